from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest

from mimir_core.errors import InvalidInputError, MimirError
from mimir_core.ingest.validate import (
    MAX_REASON,
    MAX_TASK,
    build_experience,
    id_for_key,
)


def build(**kw: object):  # type: ignore[no-untyped-def]
    base: dict[str, object] = {"task": "run the tests", "action": "pytest", "outcome": "success"}
    base.update(kw)
    return build_experience(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"task": ""}, "task"),
        ({"task": "   "}, "task"),
        ({"task": None}, "task"),
        ({"task": 42}, "task"),
        ({"action": ""}, "action"),
        ({"action": ["pytest"]}, "action"),
        ({"outcome": "win"}, "outcome"),
        ({"outcome": None}, "outcome"),
        ({"outcome": 1}, "outcome"),
        ({"score": 1.5}, "score"),
        ({"score": -0.1}, "score"),
        ({"score": math.nan}, "score"),
        ({"score": "high"}, "score"),
        ({"score": True}, "score"),
        ({"outcome": "failure", "score": 1.0}, "score"),  # would count as a success
        ({"outcome": "success", "score": 0.2}, "score"),
        ({"context": "not a dict"}, "context"),
        ({"context": [1, 2]}, "context"),
        ({"reason": 3}, "reason"),
        ({"scope": 7}, "scope"),
        ({"source": {"x": 1}}, "source"),
        ({"session_id": "x" * 1000}, "session_id"),
        ({"recalled_lesson_ids": "abc"}, "recalled_lesson_ids"),
        ({"recalled_lesson_ids": [1, 2]}, "recalled_lesson_ids"),
        ({"created_at": "yesterday-ish"}, "created_at"),
        ({"created_at": object()}, "created_at"),
        ({"idempotency_key": 5}, "idempotency_key"),
    ],
)
def test_bad_input_names_the_field(kw: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        build(**kw)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}:")
    assert isinstance(info.value, MimirError)


def test_outcome_is_case_insensitive_and_score_defaults() -> None:
    assert build(outcome="FAILURE").score == 0.0
    assert build(outcome="partial").score == 0.5
    assert build(outcome="success").score == 1.0
    assert build(outcome="partial", score=0.25).score == 0.25
    assert build(outcome="failure", score=0.5).score == 0.5  # the boundary agrees with both
    assert build(outcome="success", score=0.75).score == 0.75


def test_long_texts_are_truncated_with_a_marker_not_rejected() -> None:
    exp = build(task="t" * (MAX_TASK * 3), reason="r" * (MAX_REASON * 5))
    assert len(exp.task) <= MAX_TASK
    assert "truncated" in exp.task
    assert len(exp.reason) <= MAX_REASON


def test_secrets_never_pass_the_chokepoint() -> None:
    key = "AKIAIOSFODNN7EXAMPLQ"
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    exp = build(
        task=f"deploy with AWS_ACCESS_KEY_ID={key}",
        action=f"curl -H 'Authorization: token {token}' https://api.github.com",
        reason="<private>my home address</private> failed",
        context={"env": {"GITHUB_TOKEN": token}, "cmd": f"export AWS_ACCESS_KEY_ID={key}"},
    )
    dump = exp.model_dump_json()
    assert key not in dump and token not in dump
    assert "home address" not in dump
    assert "REDACTED" in dump


def test_context_is_capped_and_non_json_values_become_strings() -> None:
    exp = build(context={"when": datetime(2026, 1, 1, tzinfo=timezone.utc), "big": "x" * 50_000})
    assert isinstance(exp.context["when"], str)
    assert len(exp.model_dump_json()) < 40_000
    huge = build(context={f"k{i}": "v" * 1000 for i in range(100)})
    assert huge.context.get("_truncated") is True


def test_times_are_normalised_to_utc() -> None:
    assert build(created_at=0).created_at == datetime(1970, 1, 1, tzinfo=timezone.utc)
    naive = build(created_at="2026-05-01T12:00:00").created_at
    assert naive.tzinfo is not None and naive.hour == 12
    assert build(created_at="2026-05-01T12:00:00Z").created_at.hour == 12


def test_idempotency_key_gives_a_stable_id() -> None:
    a, b = build(idempotency_key="tool-call-1"), build(idempotency_key="tool-call-1")
    assert a.id == b.id == id_for_key("tool-call-1")
    assert build().id != build().id


def test_a_context_with_a_cycle_or_extreme_nesting_names_the_context() -> None:
    cyclic: dict[str, object] = {"a": 1}
    cyclic["self"] = cyclic
    deep: object = 1
    for _ in range(5000):
        deep = {"a": deep}
    for context in (cyclic, deep):
        with pytest.raises(InvalidInputError) as info:
            build(context=context)
        assert info.value.field == "context"
