"""``mimir_core.hosting.agent_run``: the seams every in-process framework adapter shares."""

from __future__ import annotations

import json
from typing import Any

from mimir_core import Mimir
from mimir_core.hosting.agent_run import (
    RunMemory,
    call_message,
    lessons_for,
    tool_answer,
    tool_message,
)

NOTE = "<mimir-memory>\nfailed here before\n</mimir-memory>"


def turn(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "deploy the billing service"},
        call_message([("c1", "deploy", {"target": "prod"})]),
        result,
    ]


def test_a_failed_result_is_an_error_without_mimirs_note() -> None:
    msg = tool_message("c1", f"ImagePullBackOff\n\n{NOTE}", failed=True)
    assert msg == {"role": "tool", "tool_call_id": "c1", "content": '{"error": "ImagePullBackOff"}'}
    assert tool_message("c2", {"ok": 1}, failed=False)["content"] == '{"ok": 1}'


def test_a_failure_recorded_as_it_happens_is_the_runs_record(hash_mimir: Mimir) -> None:
    memory = RunMemory(hash_mimir, source="fw")
    failed = tool_message("c1", "ImagePullBackOff", failed=True)
    assert memory.tool_failed(turn(failed), "deploy", {"target": "prod"}, run_id="r1") == ""
    # The run's end sees the same call, its result now carrying Mimir's note: still one record.
    noted = tool_message("c1", f"ImagePullBackOff\n\n{NOTE}", failed=True)
    assert memory.record_run(turn(noted), run_id="r1") == 1
    [record] = hash_mimir.recent(5)
    assert (record.outcome, record.action, record.reason, record.source) == (
        "failure",
        'deploy {"target": "prod"}',
        "ImagePullBackOff",
        "fw",
    )
    # Another run is another record; and the next failure of that call hears about the first.
    note = memory.tool_failed(turn(failed), "deploy", {"target": "prod"}, run_id="r2")
    assert "failed here before" in note and len(hash_mimir.recent(5)) == 2


def test_the_cached_context_is_dropped_after_a_record(hash_mimir: Mimir) -> None:
    memory = RunMemory(hash_mimir, source="fw", cache_seconds=3600)
    action = 'deploy {"target": "prod"}'
    hash_mimir.record_failure("deploy the billing service", action, "timeout")
    assert memory.context("deploy the billing service") == ""  # one failure: nothing to say yet
    hash_mimir.record_failure("deploy the billing service", action, "timeout", session_id="b")
    assert memory.context("deploy the billing service") == ""  # cached
    memory.record_run(turn(tool_message("c1", "ImagePullBackOff", failed=True)))
    assert "<mimir-memory>" in memory.context("deploy the billing service")


class Broken:
    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise OSError("disk full")

        return fail


def test_every_seam_fails_open() -> None:
    memory = RunMemory(Broken(), source="fw")  # type: ignore[arg-type]
    failed = tool_message("c1", "boom", failed=True)
    assert memory.context("deploy") == ""
    assert memory.before_tool("deploy", {"target": "prod"}, task="deploy") == ""
    assert memory.tool_failed(turn(failed), "deploy", {"target": "prod"}) == ""
    assert memory.record_run(turn(failed)) == 1  # read, then the write failed and was logged


def test_lessons_for_fails_open_and_is_what_run_memory_serves(hash_mimir: Mimir) -> None:
    assert lessons_for(Broken(), "deploy", budget_chars=500, scope=None) == ""
    assert lessons_for(Broken(), "   ", budget_chars=500, scope=None) == ""
    hash_mimir.record("deploy the api to staging", "make deploy-staging", "failure", reason="x")
    hash_mimir.record("deploy the api to staging", "make deploy-staging", "failure", reason="x")
    served = lessons_for(hash_mimir, "deploy the api to staging", budget_chars=2000, scope=None)
    assert served and served == RunMemory(hash_mimir, source="fw").context(
        "deploy the api to staging"
    )


def test_a_tool_answer_names_the_bad_argument(hash_mimir: Mimir) -> None:
    assert tool_answer(hash_mimir, "recall_experiences", {"k": 0}, source="fw") == {
        "error": "query: is required: a non-empty string\nk: must be an integer from 1 to 100; "
        "got 0"
    }
    ok = tool_answer(hash_mimir, "memory_stats", {}, source="fw")
    assert set(ok) == {"result", "data"} and json.dumps(ok)


def test_guard_then_settle_records_a_failure_even_when_the_guard_spoke(hash_mimir: Mimir) -> None:
    memory = RunMemory(hash_mimir, source="fw")
    history = turn({"role": "user", "content": "deploy the billing service"})[:2]
    assert memory.guard("c1", "deploy", {"target": "prod"}, history) == ""
    assert memory.settle("c1", "deploy", {"target": "prod"}, history) == ""  # it worked
    assert hash_mimir.recent(5) == []
    said = memory.settle("c2", "deploy", '{"target": "prod"}', history, "ImagePullBackOff")
    assert said == ""  # the first failure: nothing tried before
    # The same call again: the guard speaks before it, and its failure is still recorded.
    note = memory.guard("c3", "deploy", {"target": "prod"}, history)
    assert "failed here before" in note
    assert memory.settle("c3", "deploy", {"target": "prod"}, history, "timeout") == note
    got = sorted((r.outcome, r.action, r.reason) for r in hash_mimir.recent(5))
    assert got == [
        ("failure", 'deploy {"target": "prod"}', "ImagePullBackOff"),
        ("failure", 'deploy {"target": "prod"}', "timeout"),
    ]
    assert memory.notes == {}  # settled notes do not pile up


def test_a_thread_makes_the_same_attempt_another_record(hash_mimir: Mimir) -> None:
    memory = RunMemory(hash_mimir, source="fw")
    failed = turn(tool_message("c1", "ImagePullBackOff", failed=True))
    assert memory.record_run(failed, run_id="r1", thread="t1") == 1
    assert memory.record_run(failed, run_id="r1", thread="t1") == 1  # the same: one record
    assert memory.record_run(failed, run_id="r1", thread="t2") == 1
    assert sorted(r.thread_id or "" for r in hash_mimir.recent(5)) == ["t1", "t2"]


def test_search_answers_and_fails_open(hash_mimir: Mimir) -> None:
    hash_mimir.record_failure("run the api tests", "pytest tests/api", "no table orders")
    [doc] = RunMemory(hash_mimir, source="fw").search("api tests", k=1)
    assert "pytest tests/api" in doc.text
    assert RunMemory(Broken(), source="fw").search("api tests") == []  # type: ignore[arg-type]
