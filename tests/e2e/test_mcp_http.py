"""The MCP server over streamable HTTP on a free loopback port, with and without a bearer token."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

pytestmark = [pytest.mark.e2e]

TOKEN = "test-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_cmd(*extra: str) -> list[str]:
    return [sys.executable, "-m", "mimir_integrations.cli_mcp", "--http", *extra]


def env_for(home: Path) -> dict[str, str]:
    return dict(os.environ, MIMIR_HOME=str(home), MIMIR_EMBEDDER="hash")


@contextmanager
def http_server(home: Path, *extra: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        server_cmd("--port", str(port), *extra),
        env=env_for(home),
        cwd=home.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"server exited: {proc.communicate()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
        assert out == "", out  # stdout is never used for logs
        assert "Traceback" not in err, err


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def exercise(client: Client) -> None:
    tools = (await client.list_tools()).tools
    assert len(tools) == 13
    r = await client.call_tool(
        "record_failure",
        {"task": "restart the worker", "action": "systemctl restart w", "reason": "unit masked"},
    )
    assert not r.is_error, text_of(r)
    r = await client.call_tool("recall_experiences", {"query": "restart the worker"})
    assert r.structured_content["hits"][0]["action"] == "systemctl restart w"
    r = await client.call_tool("recent_experiences", {"n": 0})
    assert r.is_error and text_of(r) == "n: must be an integer from 1 to 100; got 0"
    res = await client.read_resource("mimir://stats")
    assert '"experiences": 1' in res.contents[0].text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_http_on_loopback(tmp_path: Path, mode: str) -> None:
    with http_server(tmp_path / "home") as url:

        async def main() -> None:
            async with Client(url, mode=mode, read_timeout_seconds=120) as c:
                await exercise(c)

        anyio.run(main)


def test_http_with_a_bearer_token(tmp_path: Path) -> None:
    with http_server(tmp_path / "home", "--token", TOKEN) as url:
        r = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert r.status_code == 401
        assert r.headers["www-authenticate"].startswith("Bearer")
        bad = {"Authorization": "Bearer wrong-token-0123456789"}
        assert httpx2.post(url, json={}, headers=bad).status_code == 401

        async def main() -> None:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
                transport = streamable_http_client(url, http_client=http)
                async with Client(transport, mode="legacy") as c:
                    await exercise(c)

        anyio.run(main)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "is not a loopback address"),
        (["--host", "0.0.0.0", "--allow-remote"], "needs a bearer token"),
        (["--host", "0.0.0.0", "--allow-remote", "--token", "short"], "at least 16 characters"),
    ],
)
def test_remote_binds_need_a_flag_and_a_token(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = subprocess.run(
        server_cmd(*args), env=env_for(tmp_path), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 1
    assert message in out.stderr and out.stdout == ""


def test_without_the_mcp_extra_the_error_says_what_to_install(tmp_path: Path) -> None:
    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('mcp', 'mcp_types'):\n"
        "            raise ModuleNotFoundError('blocked', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from mimir_integrations.cli_mcp import main\n"
        "sys.exit(main([]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env_for(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 1, out.stderr
    assert "pip install 'mimir-lessons[mcp]'" in out.stderr and out.stdout == ""
