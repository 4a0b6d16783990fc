"""The LlamaIndex adapter on a real store: the retriever, and the memory block inside a real
``llama_index.core.memory.Memory`` (its own flush and prompt assembly)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from llama_index.core.llms import ChatMessage
from llama_index.core.memory import Memory, StaticMemoryBlock
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from mimir_core import Mimir
from mimir_core.testing import seed_lesson
from mimir_integrations.llamaindex import MimirMemoryBlock, MimirRetriever

pytestmark = pytest.mark.asyncio


@pytest.fixture
def m(hash_mimir: Mimir) -> Mimir:
    return hash_mimir


async def test_retriever_returns_scored_nodes_with_metadata(m: Mimir) -> None:
    lesson = seed_lesson(m, rule="Use a pinned image tag.", trigger="deploy the app", evidence=2)
    failed = m.record_failure("deploy the app", "kubectl apply -f app.yaml", "ImagePullBackOff")
    retriever = MimirRetriever(m, top_k=4)
    assert isinstance(retriever, BaseRetriever)
    nodes = retriever.retrieve("deploy the app")
    # the lesson, its 2 identical evidence experiences as one hit (count 2), the failure
    assert all(isinstance(n, NodeWithScore) for n in nodes) and len(nodes) == 3
    counts = [n.node.metadata["count"] for n in nodes if n.node.metadata["kind"] == "experience"]
    assert sorted(counts) == [1, 2]
    assert nodes[0].node.metadata["kind"] == "lesson" and nodes[0].node.node_id == lesson.id
    assert nodes[0].score == pytest.approx(lesson.confidence)
    exp = next(n for n in nodes if n.node.node_id == failed.id)
    assert exp.node.metadata["outcome"] == "failure" and exp.score is not None
    assert "ImagePullBackOff" in exp.node.get_content()
    scores = [n.score for n in nodes if n.node.metadata["kind"] == "experience"]
    assert scores == sorted(scores, reverse=True)

    again = await retriever.aretrieve(QueryBundle(query_str="deploy the app"))
    assert [n.node.node_id for n in again] == [n.node.node_id for n in nodes]
    only = MimirRetriever(m, top_k=3, include=("experiences",), outcome="failure")
    assert [n.node.node_id for n in only.retrieve("deploy the app")] == [failed.id]


def tool_turn(call_id: str, command: str, result: str, error: bool = False) -> list[ChatMessage]:
    call = {"id": call_id, "type": "function"}
    call["function"] = {"name": "shell", "arguments": json.dumps({"command": command})}
    extra: dict[str, Any] = {"tool_call_id": call_id, "name": "shell"}
    if error:
        extra["is_error"] = True
    return [
        ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": [call]}),
        ChatMessage(role="tool", content=result, additional_kwargs=extra),
    ]


async def test_memory_block_serves_lessons_and_records_flushed_turns(m: Mimir) -> None:
    lesson = seed_lesson(
        m, rule="Run alembic upgrade head before the api tests.", trigger="run the api tests"
    )
    before = m.stats().experiences
    block = MimirMemoryBlock(mimir=m)
    memory = Memory.from_defaults(
        session_id="s1",
        token_limit=400,
        chat_history_token_ratio=0.3,
        token_flush_size=60,
        memory_blocks=[block, StaticMemoryBlock(name="persona", static_content="Be brief.")],
    )
    await memory.aput_messages(
        [
            ChatMessage(role="user", content="run the api tests"),
            *tool_turn("c1", "pytest tests/api", "UndefinedTable: relation orders", error=True),
            *tool_turn("c2", "alembic upgrade head && pytest tests/api", "12 passed"),
            ChatMessage(role="assistant", content="The api tests pass after migrating."),
        ]
    )
    for i in range(12):  # later chat pushes the first turn out of short-term memory
        await memory.aput(ChatMessage(role="user", content=f"and now item {i} " + "x " * 20))
        await memory.aput(ChatMessage(role="assistant", content="ok " * 20))
    await memory.aput(ChatMessage(role="user", content="run the api tests again"))
    prompt = await memory.aget()
    assert prompt[0].role.value == "system"
    assert "<mimir_lessons>" in prompt[0].content and lesson.id in prompt[0].content
    assert "alembic upgrade head" in prompt[0].content and "Be brief." in prompt[0].content

    got = {(e.outcome, e.action) for e in m.recent(20) if e.source == "llamaindex"}
    assert got == {
        ("failure", "pytest tests/api"),
        ("success", "alembic upgrade head && pytest tests/api"),
    }
    assert m.stats().experiences == before + 2
    assert {e.session_id for e in m.recent(20) if e.source == "llamaindex"} == {"s1"}


async def test_a_turn_cut_by_a_flush_is_recorded_once(m: Mimir) -> None:
    block = MimirMemoryBlock(mimir=m)
    first = [ChatMessage(role="user", content="build the frontend")]
    first += tool_turn("c1", "npm run build", "Error: node 16 is not supported")[:1]
    second = tool_turn("c1", "npm run build", "Error: node 16 is not supported")[1:]
    second += tool_turn("c2", "nvm use 20 && npm run build", "built in 4s")
    for msg in [*first, *second]:
        msg.additional_kwargs["session_id"] = "s2"
    await block.aput(first, from_short_term_memory=True, session_id="s2")
    assert m.stats().experiences == 0  # the call's result has not been flushed yet
    await block.aput(second, from_short_term_memory=True, session_id="s2")
    # The same turn seen again (another process's memory flushing the same history): no dup.
    await MimirMemoryBlock(mimir=m).aput([*first, *second], session_id="s2")
    got = sorted((e.outcome, e.task, e.action) for e in m.recent(10))
    assert got == [
        ("failure", "build the frontend", "npm run build"),
        ("success", "build the frontend", "nvm use 20 && npm run build"),
    ]


async def test_the_block_says_what_failed_here_from_the_first_repeat(m: Mimir) -> None:
    """No lesson yet: one flushed turn that failed then worked is enough for the block to name
    the failing command and what worked instead, as observations."""
    block = MimirMemoryBlock(mimir=m)
    turn = [ChatMessage(role="user", content="build the frontend")]
    turn += tool_turn("c1", "npm run build", "Error: node 16 is not supported", error=True)
    turn += tool_turn("c2", "nvm use 20 && npm run build", "built in 4s")
    await block.aput(turn, session_id="s1")
    text = await block.aget([ChatMessage(role="user", content="build the frontend app")])
    assert "- failed here: `npm run build` — 1 of 1 try" in text
    assert "- worked here instead: `nvm use 20 && npm run build` — 1 of 1 try" in text
    assert m.list_lessons() == []


async def test_the_block_is_empty_without_a_user_message(m: Mimir) -> None:
    assert await MimirMemoryBlock(mimir=m).aget([]) == ""


async def test_the_same_attempt_in_another_session_is_another_record(m: Mimir) -> None:
    block = MimirMemoryBlock(mimir=m)
    for session in ("s1", "s2", "s1"):  # s1 twice: a redelivery of the same turn
        turn = [ChatMessage(role="user", content="build the frontend")]
        turn += tool_turn("c1", "npm run build", "Error: node 16 is not supported")
        for msg in turn:
            msg.additional_kwargs["session_id"] = session
        await MimirMemoryBlock(mimir=m).aput(turn) if session == "s2" else await block.aput(turn)
    got = sorted((e.session_id, e.action) for e in m.recent(10))
    assert got == [("s1", "npm run build"), ("s2", "npm run build")]


async def test_a_memory_failure_never_fails_the_host_memory(
    m: Mimir, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mimir_core.errors import StoreError

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("the store is unavailable")

    monkeypatch.setattr(m, "context", broken)
    monkeypatch.setattr(m, "record_many", broken)
    memory = Memory.from_defaults(
        session_id="s1",
        token_limit=200,
        chat_history_token_ratio=0.3,
        token_flush_size=40,
        memory_blocks=[MimirMemoryBlock(mimir=m)],
    )
    await memory.aput_messages(
        [
            ChatMessage(role="user", content="build the frontend"),
            *tool_turn("c1", "npm run build", "Error: node 16 is not supported"),
        ]
    )
    for i in range(6):  # flushes the failed turn into the block, whose store is down
        await memory.aput(ChatMessage(role="user", content=f"item {i} " + "x " * 20))
    prompt = await memory.aget()  # the lessons are empty, the chat goes on
    assert prompt[-1].content.startswith("item 5")
    assert "lessons unavailable" in caplog.text and "could not record" in caplog.text
