"""``mimir_core.hosting.wire_formats``, ``item_log`` and ``responses_run``: the framework-free work
behind the OpenAI Agents SDK and Google ADK adapters, tested without either framework."""

from __future__ import annotations

import json
from types import SimpleNamespace as NS
from typing import Any

from mimir_core import Mimir
from mimir_core.hosting.agent_run import Notes, RunMemory
from mimir_core.hosting.item_log import ItemLog
from mimir_core.hosting.responses_run import ResponsesRun
from mimir_core.hosting.wire_formats import gemini_messages, responses_messages, result_outcome

HIDDEN = "An error occurred while running the tool"
TURN: list[dict[str, Any]] = [
    {"role": "user", "content": "deploy the billing service"},
    {"type": "function_call", "call_id": "c1", "name": "deploy", "arguments": '{"t": 1}'},
    {"type": "function_call_output", "call_id": "c1", "output": HIDDEN + "."},
    {"type": "function_call", "call_id": "c2", "name": "deploy", "arguments": '{"t": 2}'},
    {"type": "function_call_output", "call_id": "c2", "output": [{"text": "deployed"}]},
]


def test_responses_items_read_a_hidden_or_known_error_as_a_failure() -> None:
    plain = responses_messages(TURN)
    assert [m["role"] for m in plain] == ["user", "assistant", "tool", "assistant", "tool"]
    assert plain[2]["content"] == HIDDEN + "." and plain[4]["content"] == "deployed"
    hidden = responses_messages(TURN, failure_prefix=HIDDEN)[2]["content"]
    assert json.loads(hidden) == {"error": HIDDEN + "."}
    known = responses_messages(TURN, errors={"c1": "KeyError: 'db'"})[2]["content"]
    assert json.loads(known) == {"error": "KeyError: 'db'"}


def test_a_function_result_fails_by_googles_convention() -> None:
    assert result_outcome({"status": "error", "error_message": "no such pod"}) == (
        True,
        "no such pod",
    )
    assert result_outcome({"error": "denied"}) == (True, "denied")
    assert result_outcome({"result": "ok"}) == (False, "ok")
    assert result_outcome({"a": 1, "b": 2}) == (False, {"a": 1, "b": 2})


def part(**kw: Any) -> NS:
    return NS(**{"function_call": None, "function_response": None, "text": None, **kw})


def test_gemini_contents_by_attribute_without_mimirs_note() -> None:
    call = NS(id="f1", name="deploy", args={"t": 1})
    failed = NS(id="f1", name="deploy", response={"error": "denied", "mimir_memory": "note"})
    contents = [
        NS(role="user", parts=[part(text="deploy it", thought=False)]),
        NS(role="model", parts=[part(function_call=call)]),
        NS(role="user", parts=[part(function_response=failed)]),
        None,
    ]
    got = gemini_messages(contents, drop_key="mimir_memory")
    assert [m["role"] for m in got] == ["user", "assistant", "tool"]
    assert json.loads(got[2]["content"]) == {"error": "denied"}


def test_an_item_log_keeps_a_conversation_in_the_store(hash_mimir: Mimir) -> None:
    log = ItemLog(hash_mimir, ("fw", "sessions", "s1"))
    assert log.items() == [] and log.pop() is None
    log.append([{"n": 1}, {"n": 2}])
    assert log.append([{"n": 3}]) == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert log.items(limit=2) == [{"n": 2}, {"n": 3}] and log.items(limit=0) == []
    assert log.pop() == {"n": 3} and log.pop() == {"n": 2}
    assert ItemLog(hash_mimir, ("fw", "sessions", "s1")).items() == [{"n": 1}]
    assert ItemLog(hash_mimir, ("fw", "sessions", "s2")).items() == []
    log.clear()
    assert log.items() == []


def test_a_responses_run_keeps_the_real_error_and_notes_the_next_call(hash_mimir: Mimir) -> None:
    run = ResponsesRun(RunMemory(hash_mimir, source="fw"), failure_prefix=HIDDEN)
    hash_mimir.record_failure("deploy the billing service", 'deploy {"t": 1}', "KeyError: 'db'")
    run.tool_raised(TURN[:1], "c1", "deploy", '{"t": 1}', KeyError("db"))
    assert run.errors == {"c1": "KeyError: 'db'"} and "failed here before" in run.notes["c1"]
    items, instructions = run.model_input(TURN[:3], "You deploy.")
    assert items[2]["output"].startswith(HIDDEN) and "failed here before" in items[2]["output"]
    assert TURN[2]["output"] == HIDDEN + "."  # the caller's items are not changed
    assert instructions is not None and instructions.startswith("You deploy.")
    # The saved turn's failure is the one recorded as it happened: one record per attempt.
    assert run.record(TURN, session_id="s1") == 2
    mine = [r for r in hash_mimir.recent(5) if r.source == "fw"]
    assert sorted((r.outcome, r.action) for r in mine) == [
        ("failure", 'deploy {"t": 1}'),
        ("success", 'deploy {"t": 2}'),
    ]
    assert next(r.reason for r in mine if r.outcome == "failure") == "KeyError: 'db'"


def test_notes_are_bounded_and_skip_empty_values() -> None:
    notes = Notes(limit=2)
    for key in ("a", "b", "c"):
        notes.keep(key, key.upper())
    notes.keep("d", "")
    assert notes == {"b": "B", "c": "C"}
