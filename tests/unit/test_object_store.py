"""A store on S3-compatible object storage (moto's server on 127.0.0.1)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mimir_core import Mimir


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    exe = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
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

        deadline = time.monotonic() + 30
        while True:
            try:
                client = boto3.client(
                    "s3",
                    endpoint_url=endpoint,
                    aws_access_key_id="testing",
                    aws_secret_access_key="testing",
                    region_name="us-east-1",
                )
                client.create_bucket(Bucket="mimir-test")
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
        proc.wait(timeout=10)


def test_two_clients_share_one_memory_on_object_storage(s3: dict[str, str], tmp_path: Path) -> None:
    uri = "s3://mimir-test/team-memory"
    laptop = Mimir(tmp_path / "a", store_uri=uri, storage_options=s3, embedder="hash")
    laptop.record(
        "rotate the TLS certificate",
        "certbot renew --force",
        "failure",
        reason="rate limited by ACME: too many certificates",
    )
    laptop.record(
        "rotate the TLS certificate",
        "certbot renew --staging first",
        "success",
        idempotency_key="cert-1",
    )
    server = Mimir(tmp_path / "b", store_uri=uri, storage_options=s3, embedder="hash")
    server.record(
        "rotate the TLS certificate",
        "certbot renew --staging first",
        "success",
        idempotency_key="cert-1",
    )  # same key from another machine: no duplicate
    assert server.stats().experiences == 2
    hits = server.recall("rotate the TLS certificate", k=2, outcome="failure")
    assert hits and hits[0].experience.action == "certbot renew --force"
    rec = laptop.recommend("rotate the TLS certificate")
    assert rec is not None and rec.action == "certbot renew --staging first"
