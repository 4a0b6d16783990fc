"""An S3-compatible server (moto's) on 127.0.0.1 for tests of the object-storage path."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def moto_server() -> str | None:
    """The ``moto_server`` executable (on PATH or beside this interpreter), or ``None``."""
    exe = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
    return exe if Path(exe).exists() else None


@contextmanager
def moto_s3(bucket: str, *, exe: str, wait: float = 60.0) -> Iterator[dict[str, str]]:
    """Run moto's server with ``bucket`` created; yields LanceDB ``storage_options`` for it."""
    port = free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    proc = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        import boto3

        deadline = time.monotonic() + wait
        while True:
            try:
                boto3.client(
                    "s3",
                    endpoint_url=endpoint,
                    aws_access_key_id="testing",
                    aws_secret_access_key="testing",
                    region_name="us-east-1",
                ).create_bucket(Bucket=bucket)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield {
            "endpoint": endpoint,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
            "region": "us-east-1",
            "allow_http": "true",
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
