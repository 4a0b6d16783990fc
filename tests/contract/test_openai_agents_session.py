"""``MimirSession`` honours the Agents SDK ``Session`` protocol on Mimir's store, and records
the attempts of what it is given once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from agents.memory import Session

from mimir_core import Mimir
from mimir_integrations.openai_agents import SDK_FAILURE, MimirAgentsMemory


def items(*texts: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": t} for t in texts]


def test_the_session_protocol_round_trip(hash_mimir: Mimir) -> None:
    session = MimirAgentsMemory(hash_mimir).session("user-1")
    assert isinstance(session, Session)

    async def scenario() -> list[Any]:
        await session.add_items(items("a", "b"))
        await session.add_items(items("c"))
        await session.add_items([])
        got = [
            await session.get_items(),
            await session.get_items(limit=2),
            await session.get_items(limit=0),
        ]
        got.append(await session.pop_item())
        got.append(await session.pop_item())
        got.append(await session.get_items())
        # Another process (another memory on the same store) sees the same conversation.
        got.append(await MimirAgentsMemory(hash_mimir).session("user-1").get_items())
        got.append(await MimirAgentsMemory(hash_mimir).session("user-2").get_items())
        await session.clear_session()
        got.append(await session.get_items())
        got.append(await session.pop_item())
        return got

    every, last_two, none, popped, popped2, left, elsewhere, other, cleared, empty = asyncio.run(
        scenario()
    )
    assert every == items("a", "b", "c") and last_two == items("b", "c") and none == []
    assert popped == items("c")[0] and popped2 == items("b")[0]
    assert left == items("a") and elsewhere == items("a") and other == []
    assert cleared == [] and empty is None


def test_a_saved_turn_is_recorded_once_with_the_sdk_failure_text(hash_mimir: Mimir) -> None:
    session = MimirAgentsMemory(hash_mimir).session("s1")
    turn = [
        {"role": "user", "content": "deploy the billing service"},
        {"type": "function_call", "call_id": "c1", "name": "deploy", "arguments": '{"t": 1}'},
        {"type": "function_call_output", "call_id": "c1", "output": SDK_FAILURE + "."},
        {"type": "function_call", "call_id": "c2", "name": "deploy", "arguments": '{"t": 2}'},
        {"type": "function_call_output", "call_id": "c2", "output": "deployed"},
    ]

    async def save() -> None:
        await session.add_items(turn[:1])
        await session.add_items(turn[1:])
        await session.add_items([{"role": "user", "content": "thanks"}])

    asyncio.run(save())
    got = sorted((e.outcome, e.action, e.session_id) for e in hash_mimir.recent(10))
    assert got == [
        ("failure", 'deploy {"t": 1}', "s1"),
        ("success", 'deploy {"t": 2}', "s1"),
    ]
