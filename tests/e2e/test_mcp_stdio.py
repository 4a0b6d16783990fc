"""The MCP server as a real subprocess over stdio, driven by the SDK's own client.

Proven here: both protocol generations work end to end through ``mimir-mcp`` and ``mimir mcp``
(the default MiniLM embedder, loaded in the background), two servers on one store write at the
same time without losing anything, and a running server drains the capture spool by itself.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from mcp import Client, StdioServerParameters

pytestmark = [pytest.mark.e2e]

BIN = Path(sys.executable).parent


def server_params(
    home: Path, *, cli: bool = False, embedder: str | None = "hash", extra: list[str] = ()
) -> StdioServerParameters:
    env = {"MIMIR_HOME": str(home), "HOME": os.environ["HOME"], "HF_HUB_OFFLINE": "1"}
    if embedder:
        env["MIMIR_EMBEDDER"] = embedder
    if cli:
        command, args = str(BIN / "mimir"), ["mcp", *extra]
    else:
        command, args = sys.executable, ["-m", "mimir_integrations.cli_mcp", *extra]
    return StdioServerParameters(command=command, args=args, env=env, cwd=str(home.parent))


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


@pytest.mark.parametrize(
    ("mode", "cli", "embedder"),
    [("auto", False, None), ("legacy", False, "hash"), ("legacy", True, "hash")],
    ids=["modern-mimir-mcp-minilm", "legacy-mimir-mcp", "legacy-mimir-cli"],
)
def test_record_recall_recommend_forget_over_stdio(
    tmp_path: Path, mode: str, cli: bool, embedder: str | None
) -> None:
    if cli and not (BIN / "mimir").exists():
        pytest.skip("the mimir console script is not installed in this environment")
    params = server_params(tmp_path / "home", cli=cli, embedder=embedder)

    async def main() -> None:
        async with Client(params, mode=mode, read_timeout_seconds=120) as c:
            assert c.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
            tools = (await c.list_tools()).tools
            assert len(tools) == 13
            task = "run the payments integration tests"
            r = await c.call_tool(
                "record_failure",
                {"task": task, "action": "pytest tests/integration", "reason": "no table orders"},
            )
            assert not r.is_error, text_of(r)
            failed_id = r.structured_content["experience"]["id"]
            r = await c.call_tool(
                "record_experience",
                {"task": task, "action": "alembic upgrade head && pytest", "outcome": "success"},
            )
            assert not r.is_error, text_of(r)
            r = await c.call_tool("recall_experiences", {"query": "payments integration tests"})
            assert {h["id"] for h in r.structured_content["hits"]} >= {failed_id}
            r = await c.call_tool("recommend_action", {"task": task})
            assert r.structured_content["action"] == "alembic upgrade head && pytest"
            r = await c.call_tool("recall_experiences", {"query": "x", "k": 0})
            assert r.is_error and text_of(r) == "k: must be an integer from 1 to 100; got 0"
            r = await c.call_tool("consolidate", {"dry_run": True})
            assert not r.is_error, text_of(r)
            r = await c.call_tool("forget", {"id": failed_id})
            assert not r.is_error, text_of(r)
            r = await c.call_tool("recent_experiences", {"n": 10})
            assert [e["id"] for e in r.structured_content["experiences"]] != [failed_id]
            assert len(r.structured_content["experiences"]) == 1
            r = await c.call_tool("memory_stats", {})
            assert r.structured_content["by_source"] == {"mcp": 1}
            want = "hash-v1" if embedder == "hash" else "minilm"
            assert want in r.structured_content["embedder"].lower()

    anyio.run(main)
    log = (tmp_path / "home" / "logs" / "mcp.log").read_text()
    assert "Traceback" not in log
    assert oct((tmp_path / "home" / "logs" / "mcp.log").stat().st_mode & 0o777) == "0o600"


def test_two_servers_write_to_one_store_at_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    per_server = 15

    async def writer(name: str, results: dict[str, list[str]]) -> None:
        async with Client(server_params(home), mode="legacy", read_timeout_seconds=120) as c:
            await c.list_tools()
            ids = []
            for i in range(per_server):
                r = await c.call_tool(
                    "record_experience",
                    {
                        "task": f"build target {i} on {name}",
                        "action": f"make -j4 target{i}",
                        "outcome": "success" if i % 3 else "failure",
                    },
                )
                assert not r.is_error, text_of(r)
                ids.append(r.structured_content["experience"]["id"])
            results[name] = ids

    async def main() -> dict[str, list[str]]:
        results: dict[str, list[str]] = {}
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer, "alpha", results)
            tg.start_soon(writer, "beta", results)
        return results

    results = anyio.run(main)
    from mimir_core import Mimir

    m = Mimir(home, embedder="hash")
    assert m.stats().experiences == 2 * per_server
    for ids in results.values():
        assert len(m.deps.get_many(ids)) == per_server
    assert m.recall("build target 7 on beta", k=3)[0].experience.action == "make -j4 target7"


def test_the_server_drains_the_spool_in_the_background(tmp_path: Path) -> None:
    from mimir_core import Mimir
    from mimir_core.ingest import spool

    home = tmp_path / "home"
    m = Mimir(home, embedder="hash")
    record = {
        "task": "deploy the billing service",
        "action": "helm upgrade billing ./chart",
        "outcome": "failure",
        "reason": "ImagePullBackOff",
        "source": "claude-code",
        "idempotency_key": "hook:session-1:1",
    }
    spool.append(m.spool_dir, {**record})  # what a hook process writes

    async def main() -> list[dict[str, Any]]:
        async with Client(server_params(home, extra=["--interval", "0.2"]), mode="legacy") as c:
            await c.list_tools()  # the first request starts the background upkeep
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                r = await c.call_tool("recent_experiences", {"n": 5, "scope": "*"})
                if r.structured_content["experiences"]:
                    return list(r.structured_content["experiences"])
                await anyio.sleep(0.2)
            return []

    got = anyio.run(main)
    assert [e["action"] for e in got] == ["helm upgrade billing ./chart"]
    assert got[0]["source"] == "claude-code"
    assert not spool.has_pending(m.spool_dir)


def _raw_session(home: Path, *, front: bool) -> dict[Any, bytes]:
    """A legacy client's opening, written at once; the server's raw answer lines by id."""
    import json
    import subprocess

    def line(msg: dict[str, Any]) -> bytes:
        return (json.dumps(msg) + "\n").encode()

    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    }
    env = {**server_params(home).env, "PATH": os.environ.get("PATH", "")}
    if not front:
        env["MIMIR_MCP_NO_FRONT"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mimir_integrations.cli_mcp", "--no-background"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(
        line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        + line({"jsonrpc": "2.0", "method": "notifications/initialized"})
        + line({"jsonrpc": "2.0", "id": "list-1", "method": "tools/list"})
        + line({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    )
    proc.stdin.flush()
    answers: dict[Any, bytes] = {}
    try:
        while len(answers) < 3:
            raw = proc.stdout.readline()
            assert raw, proc.stderr.read() if proc.stderr else ""
            answers[json.loads(raw)["id"]] = raw
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    return answers


def test_early_answers_are_the_sdks_own_bytes(tmp_path: Path) -> None:
    """The stdlib front answers initialize and tools/list before the SDK has loaded, from the
    SDK's recorded answers: byte for byte what the SDK alone says, in both protocol eras."""
    import json

    home = tmp_path / "home"
    sdk_only = _raw_session(home, front=False)
    assert not (home / "cache" / "mcp-early.json").exists()
    cold = _raw_session(home, front=True)  # records the SDK's answers
    assert cold == sdk_only
    warm = _raw_session(home, front=True)  # answered early
    assert warm == sdk_only
    log = (home / "logs" / "mcp.log").read_text()
    assert "mcp front: 0 answered early, 2 answers cached" in log
    assert "mcp front: 2 answered early, 2 answers cached" in log

    async def opening(mode: str) -> list[str]:
        async with Client(server_params(home), mode=mode, read_timeout_seconds=120) as c:
            tools = (await c.list_tools()).tools
            r = await c.call_tool("memory_stats", {})
            assert not r.is_error, text_of(r)
            return [t.model_dump_json() for t in tools]

    first = anyio.run(opening, "auto")  # a 2026 client: records its tools/list
    assert anyio.run(opening, "auto") == first  # answered early, checked against the SDK's
    log = (home / "logs" / "mcp.log").read_text()
    assert "differs from the SDK" not in log and "Traceback" not in log
    entries = json.loads((home / "cache" / "mcp-early.json").read_text())["entries"]
    assert any('"modern"' in key for key in entries), list(entries)
    assert log.count("answered early") == 4 and log.count(" 0 answered early") == 2, log
