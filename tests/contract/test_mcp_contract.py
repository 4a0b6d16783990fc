"""The MCP server passes the adapter contract, in process, on both protocol generations.

The SDK's own client talks to the server in process: ``mode="auto"`` negotiates the 2026-07-28
protocol, ``mode="legacy"`` the 2025-11-25 ``initialize`` handshake that older hosts speak.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

import anyio
import anyio.from_thread
from mcp import Client
from mcp.shared.exceptions import MCPError

from mimir_core.testing import assert_tool_contract, seed_lesson
from mimir_core.tools.specs import AGENT_INSTRUCTIONS, TOOLS
from mimir_integrations.mcp_server import build_server

MODES = ["auto", "legacy"]


class Session:
    """A synchronous face on an in-process MCP client (the contract harness is synchronous)."""

    def __init__(self, portal: Any, client: Client) -> None:
        self.portal = portal
        self.client = client

    def __call__(self, coro_fn: Any, *args: Any) -> Any:
        return self.portal.call(coro_fn, *args)

    def invoke(self, name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any] | None, bool]:
        result = self(self.client.call_tool, name, args)
        text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
        return text, result.structured_content, bool(result.is_error)


@pytest.fixture(params=MODES)
def session(request: pytest.FixtureRequest, mimir: Any) -> Iterator[Session]:
    server = build_server(mimir, background=False)
    with anyio.from_thread.start_blocking_portal() as portal:
        client = Client(server, mode=request.param)
        with portal.wrap_async_context_manager(client) as entered:
            yield Session(portal, entered)


def test_contract(session: Session, mimir: Any) -> None:
    listed = {t.name: t.input_schema for t in session(session.client.list_tools).tools}
    assert_tool_contract(session.invoke, mimir, listed=listed)


def test_protocol_versions(session: Session) -> None:
    assert session.client.protocol_version in ("2026-07-28", "2025-11-25")
    assert session.client.instructions == AGENT_INSTRUCTIONS


def test_tools_are_rendered_from_the_specs(session: Session) -> None:
    tools = {t.name: t for t in session(session.client.list_tools).tools}
    assert list(tools) == [t.name for t in TOOLS]
    for spec in TOOLS:
        tool = tools[spec.name]
        assert tool.description == spec.description and tool.title == spec.title
        assert tool.input_schema == spec.args.model_json_schema()
        assert spec.output is not None and tool.output_schema == spec.output.model_json_schema()
        ann = tool.annotations
        assert ann is not None
        assert ann.read_only_hint is spec.read_only
        assert ann.destructive_hint is spec.destructive
        assert ann.idempotent_hint is spec.idempotent
        assert ann.open_world_hint is False
    assert tools["forget"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert tools["recall_experiences"].annotations.read_only_hint is True  # type: ignore[union-attr]


def test_errors_are_results_with_the_real_message(session: Session) -> None:
    text, data, is_error = session.invoke("recall_experiences", {"query": "x", "k": 0})
    assert (text, data, is_error) == ("k: must be an integer from 1 to 100; got 0", None, True)
    text, _data, is_error = session.invoke("record_failure", {"task": "t", "action": "a"})
    assert is_error and text == "reason: is required: a non-empty string"
    text, _data, is_error = session.invoke("forget", {"id": "0" * 32})
    assert is_error and text == f"no experience or lesson with id {'0' * 32!r}"


def test_resources(session: Session, mimir: Any) -> None:
    lesson = seed_lesson(
        mimir,
        rule="Use --frozen-lockfile for CI installs.",
        trigger="install dependencies in CI",
        action="pnpm install --frozen-lockfile",
    )
    mimir.lesson_feedback(lesson.id, True, note="worked in CI")
    listed = session(session.client.list_resources).resources
    assert {str(r.uri) for r in listed} == {"mimir://lessons", "mimir://stats"}
    templates = session(session.client.list_resource_templates).resource_templates
    assert [t.uri_template for t in templates] == ["mimir://lessons/{lesson_id}"]

    def read(uri: str) -> Any:
        contents = session(session.client.read_resource, uri).contents
        assert contents[0].mime_type == "application/json"
        return json.loads(contents[0].text)

    assert [x["id"] for x in read("mimir://lessons")["lessons"]] == [lesson.id]
    detail = read(f"mimir://lessons/{lesson.id}")
    assert detail["lesson"]["rule"] == "Use --frozen-lockfile for CI installs."
    assert detail["signature_valid"] is True
    assert {e["id"] for e in detail["supporting"]} == set(lesson.supporting_ids)
    assert {"seeded"} <= {a["event"] for a in detail["audit"]} and len(detail["audit"]) >= 2
    stats = read("mimir://stats")
    assert stats["experiences"] == 4 and stats["lessons"] == {"active": 1}
    with pytest.raises(MCPError, match="no lesson with id 'nope'"):
        session(session.client.read_resource, "mimir://lessons/nope")


def test_prompt(session: Session) -> None:
    prompts = session(session.client.list_prompts).prompts
    assert [p.name for p in prompts] == ["mimir_instructions", "mimir_context"]
    got = session(session.client.get_prompt, "mimir_instructions")
    text = got.messages[0].content.text
    assert text == AGENT_INSTRUCTIONS
    assert "recall_lessons" in text and "record_failure" in text


def test_context_prompt_shows_what_failed_here_from_the_first_repeat(
    session: Session, mimir: Any
) -> None:
    """The prompt a host reads at a task's start carries the observations, fenced, with no
    lesson admitted yet; a task with no history gets a plain sentence."""
    from mimir_core.tools.serving import NOTHING_KNOWN

    task = "deploy the billing service to staging"
    for tool, args in (
        ("record_failure", {"task": task, "action": "make deploy-staging", "reason": "No rule"}),
        (
            "record_experience",
            {"task": task, "action": "./deploy.sh staging", "outcome": "success"},
        ),
    ):
        assert not session.invoke(tool, args)[2]
    got = session(session.client.get_prompt, "mimir_context", {"task": task})
    text = got.messages[0].content.text
    assert text.startswith("<mimir-memory>") and text.endswith("</mimir-memory>")
    assert "- failed here: `make deploy-staging` — 1 of 1 try" in text
    assert "- worked here instead: `./deploy.sh staging` — 1 of 1 try" in text
    assert mimir.list_lessons() == []
    none = session(session.client.get_prompt, "mimir_context", {"task": "bake a sourdough loaf"})
    assert none.messages[0].content.text == NOTHING_KNOWN


def test_concurrent_calls_share_one_store(mimir: Any) -> None:
    """Tool calls run on worker threads: parallel calls (and background upkeep) lose nothing."""
    server = build_server(mimir, background=True, interval=0.05)

    async def main() -> None:
        async with Client(server) as c:

            async def worker(w: int) -> None:
                for i in range(6):
                    r = await c.call_tool(
                        "record_experience",
                        {"task": f"job {w}-{i}", "action": f"run {w}-{i}", "outcome": "success"},
                    )
                    assert not r.is_error, r.content
                    r = await c.call_tool("recall_experiences", {"query": f"job {w}-{i}"})
                    assert not r.is_error, r.content

            async with anyio.create_task_group() as tg:
                for w in range(4):
                    tg.start_soon(worker, w)

    try:
        anyio.run(main)
    finally:
        server.maintainer.stop()
    assert mimir.stats().experiences == 24
    assert server.maintainer.rounds >= 1


def test_a_large_resource_is_capped(hash_mimir: Any) -> None:
    trigger = "migrate the reporting database " + "with a very long description " * 80
    lesson = seed_lesson(hash_mimir, rule="Take a snapshot first.", trigger=trigger, evidence=30)

    async def read() -> str:
        async with Client(build_server(hash_mimir, background=False)) as c:
            contents = (await c.read_resource(f"mimir://lessons/{lesson.id}")).contents
            return str(contents[0].text)

    detail = json.loads(anyio.run(read))
    assert detail["truncated"] is True and len(detail["supporting"]) > 0
    assert all(len(e["task"]) <= 400 for e in detail["supporting"])  # long texts clipped
    assert len(json.dumps(detail, separators=(",", ":"), ensure_ascii=False)) <= 40_000
