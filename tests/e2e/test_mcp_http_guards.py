"""``mimir mcp --http`` against a busy port, DNS rebinding on any loopback address, huge or
streamed bodies, floods of concurrent calls and blank tokens (review findings 10 and 14)."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from mcp_proc import INIT, free_port, http_server, mcp_cmd, server_env

from mimir_integrations.http_guard import Limits
from mimir_integrations.mcp_http import rebinding_guard

pytestmark = [pytest.mark.e2e]


def test_a_port_in_use_is_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            mcp_cmd("--http", "--port", str(port)),
            env=server_env(tmp_path / "home"),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert out.returncode == 1 and out.stdout == ""
    lines = out.stderr.splitlines()
    assert lines == [f"mimir-mcp: error: cannot listen on 127.0.0.1:{port}: the port is in use"]
    assert "serving" not in out.stderr


def _post(host: str, port: int, headers: dict[str, str], body: bytes = b"") -> int:
    """One raw HTTP POST to /mcp; the status code."""
    lines = ["POST /mcp HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items())]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(head + body)
        return int(s.recv(4096).split(b" ", 2)[1])


def _initialize(host: str, port: int, **headers: str) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
    base = {
        "Host": f"{host}:{port}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Content-Length": str(len(body)),
        "Connection": "close",
    }
    return _post(host, port, {**base, **headers}, body.encode())


@pytest.mark.parametrize("host", ["127.0.0.2", "127.3.4.5"])
def test_dns_rebinding_guard_on_every_loopback_address(tmp_path: Path, host: str) -> None:
    with http_server(tmp_path / "home", host=host) as server:  # no token needed: loopback
        port = server.port
        assert _initialize(host, port) == 200
        assert _initialize(host, port, Origin=f"http://{host}:{port}") == 200
        assert _initialize(host, port, Host="evil.example") == 421
        assert _initialize(host, port, Host=f"evil.example:{port}") == 421
        assert _initialize(host, port, Origin="http://evil.example") == 403


def test_the_guard_knows_every_loopback_spelling() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "127.255.0.9", "::1", "[::1]", "localhost"):
        guard = rebinding_guard(host)
        assert guard is not None and guard.enable_dns_rebinding_protection, host
    assert "127.0.0.2:*" in rebinding_guard("127.0.0.2").allowed_hosts
    assert "http://127.0.0.2:*" in rebinding_guard("127.0.0.2").allowed_origins
    assert rebinding_guard("0.0.0.0") is None and rebinding_guard("10.1.2.3") is None


def test_a_huge_body_is_refused_unread_and_memory_stays_small(tmp_path: Path) -> None:
    with http_server(tmp_path / "home") as server:
        host, port = server.host, server.port
        assert _initialize(host, port) == 200  # warm: the app and the SDK are loaded
        before = server.rss_kb()
        chunk = b"x" * (1 << 20)
        # 2 MiB is over Mimir's cap (1 MiB) but under the SDK's own (4 MiB): Mimir refuses it.
        for size in (2 << 20, 10 << 20, 500 << 20):
            with socket.create_connection((host, port), timeout=30) as s:
                head = (
                    f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: "
                    f"application/json\r\nContent-Length: {size}\r\n\r\n"
                ).encode()
                s.sendall(head + chunk)  # then the client would keep on sending
                assert s.recv(4096).split(b" ", 2)[1] == b"413"
        # A streamed (chunked) body with no length: cut off at the cap, not read to the end.
        with socket.create_connection((host, port), timeout=30) as s:
            s.sendall(
                (
                    f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: "
                    "application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                ).encode()
            )
            status = b""
            sent = 0
            try:
                for _ in range(64):  # up to 64 MB if nothing stopped it
                    s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                    sent += len(chunk)
                    s.settimeout(0.05)
                    try:
                        status = s.recv(4096)
                    except TimeoutError:
                        continue
                    finally:
                        s.settimeout(30)
                    if status:
                        break
            except (BrokenPipeError, ConnectionResetError):
                pass
            if not status:
                s.settimeout(30)
                status = s.recv(4096)
            assert status.split(b" ", 2)[1] == b"413", status[:200]
            assert sent <= 8 << 20, sent  # stopped near the 1 MiB cap
        time.sleep(0.2)
        grown = server.rss_kb() - before
        assert grown < 20_000, f"RSS grew by {grown} kB"


def test_posts_in_flight_are_capped() -> None:
    """At most ``max_in_flight`` POSTs reach the app; the rest get 503 with Retry-After, and a
    slot frees once a call ends."""
    release = anyio.Event()
    reached = 0

    async def slow_app(scope: Any, receive: Any, send: Any) -> None:
        nonlocal reached
        reached += 1
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    limits = Limits(slow_app, max_in_flight=3)
    statuses: list[tuple[int, dict[bytes, bytes]]] = []

    async def call() -> None:
        sent: list[Any] = []

        async def receive() -> Any:
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(message: Any) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "headers": [(b"content-length", b"2")]}
        await limits(scope, receive, send)
        statuses.append((sent[0]["status"], dict(sent[0]["headers"])))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(call)
            await anyio.sleep(0.1)
            assert reached == 3 and len(statuses) == 17  # refused at once, not queued
            release.set()
        await call()  # the slots are free again

    anyio.run(main)
    codes = [s for s, _ in statuses]
    assert codes.count(200) == 4 and codes.count(503) == 17
    assert all(h[b"retry-after"] == b"1" for s, h in statuses if s == 503)
    assert limits.in_flight == 0


@pytest.mark.parametrize(
    "token",
    [" " * 16, " " * 40, "abc" + " " * 13, "\t" * 20, " 0123456789abcdef"],
)
def test_a_blank_or_short_token_is_refused(tmp_path: Path, token: str) -> None:
    for how in ("flag", "env"):
        args = ["--http", "--port", str(free_port())]
        env = server_env(tmp_path / "home")
        if how == "flag":
            args += ["--token", token]
        else:
            env["MIMIR_MCP_TOKEN"] = token
        out = subprocess.run(mcp_cmd(*args), env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 1, (how, token, out.stderr)
        assert "bearer token must" in out.stderr and "serving" not in out.stderr
