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
            assert len(tools) == 12
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
        assert len(m._get_many(ids)) == per_server
    assert m.recall("build target 7 on beta", k=3)[0].experience.action == "make -j4 target7"


def test_the_server_drains_the_spool_in_the_background(tmp_path: Path) -> None:
    from mimir_core import Mimir, spool

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
