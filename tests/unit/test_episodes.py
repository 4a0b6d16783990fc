"""Exactly-once keys, fork lineage and step records (the framework-free half of the node)."""

from __future__ import annotations

from mimir_core import Mimir
from mimir_core.hosting.episodes import (
    Branch,
    CheckpointInfo,
    Episodes,
    LineageResolver,
    StepRef,
    step_key,
    tool_key,
)


def test_keys_are_stable_and_distinct() -> None:
    assert step_key("t", "act:1", "1") == step_key("t", "act:1", "1")
    assert step_key("t", "act:1", "1") != step_key("t", "act:1", "2")
    assert step_key("t", "act:1", "1") != step_key("t", "act:1", "1", "ask")
    assert step_key("t", "a", "1") != step_key("u", "a", "1")
    assert tool_key("t", "call_1") != tool_key("u", "call_1")
    assert len(step_key("t" * 500, "ns" * 500, "x")) < 200  # fits the idempotency key limit


def chain(*infos: CheckpointInfo) -> dict[str, CheckpointInfo]:
    return {i.checkpoint_id: i for i in infos}


def test_lineage_main_line_forks_and_edits() -> None:
    cps = chain(
        CheckpointInfo("c0", None, "input"),
        CheckpointInfo("c1", "c0", "loop"),
        CheckpointInfo("c2", "c1", "loop"),
        CheckpointInfo("f1", "c1", "fork"),  # time travel from c1
        CheckpointInfo("f2", "f1", "loop"),
        CheckpointInfo("u1", "c1", "update"),  # an edit of c1, which already had children
        CheckpointInfo("h1", "c2", "update"),  # an edit of the head: the main line goes on
    )
    lookups: list[str] = []

    def lookup(cid: str) -> CheckpointInfo | None:
        lookups.append(cid)
        return cps.get(cid)

    def children(cid: str) -> int:
        return sum(1 for c in cps.values() if c.parent_id == cid)

    lineage = LineageResolver(lookup, children)
    assert lineage.branch("c2") == Branch()
    assert lineage.branch("f2") == Branch("f1", "c1")
    assert lineage.branch("u1") == Branch("u1", "c1")
    assert lineage.branch("h1") == Branch()
    assert lineage.branch("unknown") == Branch()
    assert lineage.branch(None) == Branch()
    before = len(lookups)
    assert lineage.branch("f2") == Branch("f1", "c1")
    assert len(lookups) == before  # cached


def test_record_step_is_exactly_once_per_task_and_label(hash_mimir: Mimir) -> None:
    eps = Episodes(hash_mimir, source="graph", scope="proj")
    ref = StepRef("thread-1", "act:abc", "abc", checkpoint_id="c1", node="act")
    item = {"task": "deploy", "action": "make deploy", "outcome": "success"}
    for _ in range(3):  # re-executions of the same task
        eps.record_step(ref, [item])
    eps.record_step(ref, [item], label="ask")
    eps.record_step(StepRef("thread-1", "act:def", "def"), [item], branch=Branch("f1", "c1"))
    got = eps.history("thread-1")
    assert len(got) == 3
    assert {e.source for e in got} == {"graph"} and {e.scope for e in got} == {"proj"}
    forked = [e for e in got if e.context["episode"].get("forked_from")]
    assert len(forked) == 1 and forked[0].context["episode"]["branch"] == "f1"
    assert eps.history("thread-2") == []


def test_several_items_of_a_step_and_tool_calls(hash_mimir: Mimir) -> None:
    eps = Episodes(hash_mimir, source="graph")
    ref = StepRef("t", "n:1", "1")
    items = [
        {"task": "x", "action": "a1", "outcome": "failure", "reason": "boom"},
        {"task": "x", "action": "a2", "outcome": "success", "idempotency_key": "own"},
    ]
    eps.record_step(ref, items)
    eps.record_step(ref, items)
    call = {"task": "x", "action": "tool(a=1)", "outcome": "failure", "reason": "bad"}
    eps.record_tool_call("t", "call-1", call)
    eps.record_tool_call("t", "call-1", call)
    got = eps.history("t")
    assert sorted(e.action for e in got) == ["a1", "a2", "tool(a=1)"]
    assert all(e.thread_id == "t" for e in got)


def test_a_tool_key_covers_the_tool_and_its_arguments() -> None:
    args = {"task": "deploy", "action": "make deploy", "outcome": "success"}
    key = tool_key(None, "call_0", "record_experience", args)
    assert key == tool_key(None, "call_0", "record_experience", dict(reversed(args.items())))
    assert key != tool_key(None, "call_0", "record_failure", args)
    assert key != tool_key(None, "call_0", "record_experience", {**args, "action": "helm up"})
    assert key != tool_key("t", "call_0", "record_experience", args)
