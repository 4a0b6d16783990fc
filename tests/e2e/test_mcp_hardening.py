"""The stdio MCP server against misuse, with the SDK's own client on a real subprocess.

Proven here: wrong-typed arguments are rejected (never coerced, even on ``forget``), no secret
given as a project key comes back, a bad setting is reported by every call instead of a closed
connection, resource reads name the cause of a failure, a client that only lists the tools
and hangs up sees the server exit at once (no SIGTERM), and a request the SDK's parser rejects
(nested too deep, a lone surrogate) gets a parse error instead of no reply at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from mimir_core.testing import FAKE_SECRET

pytestmark = [pytest.mark.e2e]


def params(home: Path, cwd: Path | None = None, **env: str) -> StdioServerParameters:
    base = {"MIMIR_HOME": str(home), "HOME": os.environ["HOME"], "MIMIR_EMBEDDER": "hash"}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mimir_integrations.cli_mcp", "--no-background"],
        env={**base, "HF_HUB_OFFLINE": "1", **env},
        cwd=str(cwd or home.parent),
    )


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def warm_the_cache(home: Path) -> None:
    """One plain session: the front caches the SDK's handshake and tools/list answers."""

    async def main() -> None:
        async with Client(params(home), mode="legacy", read_timeout_seconds=120) as c:
            await c.list_tools()

    anyio.run(main)
    assert (home / "cache" / "mcp-early.json").exists()


def test_wrong_typed_arguments_are_rejected_and_secret_scopes_redacted(tmp_path: Path) -> None:
    home = tmp_path / "home"

    async def main() -> None:
        async with Client(params(home), mode="legacy", read_timeout_seconds=120) as c:
            args = {"task": "push the release", "action": "git push", "outcome": "success"}
            r = await c.call_tool("record_experience", {**args, "scope": f"proj-{FAKE_SECRET}"})
            assert not r.is_error, text_of(r)
            exp_id = r.structured_content["experience"]["id"]
            r = await c.call_tool("forget", {"id": exp_id, "with_experiences": "yes"})
            assert r.is_error
            assert text_of(r) == "with_experiences: must be true or false; got 'yes'"
            bad = [
                ("recall_experiences", {"query": "x", "k": "5"}, "k: must be an integer"),
                ("record_experience", {**args, "score": "0.5"}, "score: must be a number"),
                ("recommend_action", {"task": "t", "explore": "yes"}, "explore: must be true"),
                ("recommend_action", {"task": "t", "explore": 1}, "explore: must be true"),
                ("consolidate", {"dry_run": "true"}, "dry_run: must be true or false"),
            ]
            for name, arguments, message in bad:
                r = await c.call_tool(name, arguments)
                assert r.is_error and text_of(r).startswith(message), (name, text_of(r))
            r = await c.call_tool("recent_experiences", {"n": 10, "scope": "*"})
            assert [e["id"] for e in r.structured_content["experiences"]] == [exp_id]
            r = await c.call_tool("memory_stats", {})
            stats = await c.read_resource("mimir://stats")
            shown = json.dumps(r.structured_content) + text_of(r) + stats.contents[0].text
            assert "proj-[REDACTED" in shown and FAKE_SECRET not in shown

    anyio.run(main)


@pytest.mark.parametrize(
    ("variable", "value"),
    [("MIMIR_HALF_LIFE_DAYS", "abc"), ("MIMIR_EMBEDDER", "bogus")],
)
def test_a_bad_setting_is_reported_by_every_call(tmp_path: Path, variable: str, value: str) -> None:
    home = tmp_path / "home"
    warm_the_cache(home)  # the handshake and tools/list are then answered before any check
    errlog = tmp_path / "stderr.txt"

    async def main() -> None:
        with errlog.open("w") as err:
            server = params(home, **{variable: value})
            async with stdio_client(server, errlog=err) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                assert len((await s.list_tools()).tools) == 13
                for _ in range(2):
                    res = await s.call_tool("memory_stats", {})
                    assert res.is_error and variable in text_of(res), text_of(res)
                    assert text_of(res).startswith("cannot open Mimir: ConfigError: ")
                with pytest.raises(MCPError, match=variable):
                    await s.read_resource("mimir://stats")

    anyio.run(main)
    lines = errlog.read_text().splitlines()
    assert len(lines) == 1 and variable in lines[0] and repr(value) in lines[0], lines


def test_resource_reads_name_an_os_error(tmp_path: Path) -> None:
    from mimir_integrations.mcp_server import build_server

    def unusable() -> Any:
        raise NotADirectoryError(20, "Not a directory", str(tmp_path / "file" / "home"))

    async def in_process() -> None:
        async with Client(build_server(unusable, background=False)) as c:
            with pytest.raises(MCPError) as err:
                await c.read_resource("mimir://stats")
            assert str(err.value).startswith("mimir://stats: NotADirectoryError: [Errno 20]")

    anyio.run(in_process)
    (tmp_path / "file").write_text("")  # the real thing: a home under a regular file

    async def over_stdio() -> None:
        async with Client(params(tmp_path / "file" / "home", cwd=tmp_path), mode="legacy") as c:
            with pytest.raises(MCPError, match=r"(?i)not a directory") as err:
                await c.read_resource("mimir://stats")
            assert "Error reading resource" not in str(err.value)

    anyio.run(over_stdio)


def _raw_server(home: Path) -> subprocess.Popen[bytes]:
    """``mimir mcp`` over raw pipes, for bytes no SDK client would send."""
    env = {**(params(home).env or {}), "PATH": os.environ.get("PATH", "")}
    return subprocess.Popen(
        [sys.executable, "-m", "mimir_integrations.cli_mcp", "--no-background"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )


def test_a_client_that_only_lists_the_tools_sees_the_server_exit_at_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    warm_the_cache(home)
    proc = _raw_server(home)
    assert proc.stdin is not None and proc.stdout is not None
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    for msg in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ):
        proc.stdin.write((json.dumps(msg) + "\n").encode())
    proc.stdin.flush()
    ids = [json.loads(proc.stdout.readline())["id"] for _ in range(2)]
    assert ids == [1, 2]  # both answered early, from the cache
    proc.stdin.close()  # the client is done
    start = time.monotonic()
    assert proc.wait(timeout=30) == 0
    waited = time.monotonic() - start
    log = (home / "logs" / "mcp.log").read_text()
    # It did not load the SDK only to read EOF (an SDK client waits 2 s, then sends SIGTERM):
    # the front exited at once, so the SDK never ran and the front never logged its summary.
    assert "mcp front: 2 answered early" not in log
    assert waited < 1.0, waited


def test_a_request_the_sdk_cannot_parse_gets_a_parse_error_not_silence(tmp_path: Path) -> None:
    # The SDK's stdio transport drops a line its JSON parser rejects without answering it, so
    # the client waits for its timeout; the front answers it with a JSON-RPC parse error.
    home = tmp_path / "home"
    proc = _raw_server(home)
    assert proc.stdin is not None and proc.stdout is not None
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    call = '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"recall_experiences",'
    deep = "[" * 300 + "]" * 300
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call % 2 + '"arguments":{"query":"x","k":' + deep + "}}}",
        call % '"three"' + '"arguments":{"query":"x\\ud800y"}}}',
        '{"jsonrpc":"2.0","method":"notifications/progress","params":{"x":"\\udc00"}}',
        json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
    ]
    proc.stdin.write(("\n".join(lines) + "\n").encode())
    proc.stdin.flush()
    replies = {}
    for _ in range(4):  # initialize, the two refusals, tools/list: nothing for the notification
        msg = json.loads(proc.stdout.readline())
        replies[msg["id"]] = msg
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    assert sorted(map(str, replies)) == ["1", "2", "4", "three"]
    assert replies[2]["error"]["code"] == -32700
    assert "recursion limit" in replies[2]["error"]["message"]
    assert replies["three"]["error"]["code"] == -32700
    assert "escape" in replies["three"]["error"]["message"]
    assert replies[4]["result"]["tools"]  # the session goes on
