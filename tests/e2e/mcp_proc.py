"""``mimir mcp`` as a real subprocess for the end-to-end MCP tests: over streamable HTTP on a
free port (any loopback host), or over raw stdio pipes (JSON-RPC lines no SDK client hides)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def server_env(home: Path, **extra: str) -> dict[str, str]:
    return dict(os.environ, MIMIR_HOME=str(home), MIMIR_EMBEDDER="hash", **extra)


def mcp_cmd(*extra: str) -> list[str]:
    return [sys.executable, "-m", "mimir_integrations.cli_mcp", "--no-background", *extra]


@dataclass
class HTTPServer:
    proc: subprocess.Popen[str]
    host: str
    port: int
    url: str
    stderr: str = ""

    def rss_kb(self) -> int:
        """The server's resident memory (``VmRSS`` of ``/proc/<pid>/status``), in kB."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")


@contextmanager
def http_server(home: Path, *extra: str, host: str = "127.0.0.1") -> Iterator[HTTPServer]:
    """``mimir mcp --http`` on ``host`` and a free port, until the block ends; on exit its
    stdout must be empty and its stderr free of tracebacks."""
    port = free_port(host)
    args = ["--http", "--host", host, "--port", str(port), *extra]
    proc = subprocess.Popen(
        mcp_cmd(*args),
        env=server_env(home),
        cwd=home.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    server = HTTPServer(proc, host, port, f"http://{host}:{port}/mcp")
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"server exited: {proc.communicate()}")
            try:
                socket.create_connection((host, port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield server
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
        server.stderr = err
        assert out == "", out  # stdout is never used for logs
        assert "Traceback" not in err, err


INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}


def stdio_exchange(home: Path, requests: list[dict[str, Any]]) -> tuple[dict[Any, Any], str]:
    """Initialize a stdio server, send ``requests`` (each with an id), and return the replies
    by id and the server's stderr."""
    proc = subprocess.Popen(
        mcp_cmd(),
        env=server_env(home),
        cwd=home.parent,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    msgs = [
        {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": INIT},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *({"jsonrpc": "2.0", **r} for r in requests),
    ]
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in msgs))
    proc.stdin.flush()
    replies: dict[Any, Any] = {}
    try:
        while len(replies) < len(requests) + 1:
            line = proc.stdout.readline()
            if not line:
                break
            msg = json.loads(line)
            replies[msg.get("id")] = msg
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        err = proc.stderr.read().decode() if proc.stderr else ""
        proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
    return replies, err
