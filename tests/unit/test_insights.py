"""mimir_core.ops.insights on a real store: activity, families, injections, attribution, search."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from mimir_core import Mimir
from mimir_core.errors import InvalidInputError, NotFoundError
from mimir_core.lessons.lifecycle import insert
from mimir_core.ops import insights
from mimir_core.types import Lesson

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
TASK = "run the payments integration tests"
GOOD = "alembic upgrade head && pytest tests/integration"


def _seed(m: Mimir) -> None:
    day = timedelta(days=1)
    m.record(
        TASK,
        "pytest tests/integration",
        "failure",
        reason="UndefinedTable",
        created_at=NOW - 2 * day,
    )
    m.record(
        TASK, "pytest tests/integration", "failure", reason="UndefinedTable", created_at=NOW - day
    )
    m.record(
        TASK, GOOD, "success", source="claude-code", recalled_lesson_ids=["les_a"], created_at=NOW
    )
    m.record(TASK, GOOD, "partial", score=0.5, recalled_lesson_ids=["les_a"], created_at=NOW)
    m.record("build the docker image", "docker build .", "success", created_at=NOW - 40 * day)
    insert(
        m.deps,
        [
            Lesson(
                id="les_a",
                status="active",
                rule="Run alembic first, then the tests",
                trigger=TASK,
                kind="prefer",
                action=GOOD,
            )
        ],
        actor="test",
        event="admitted",
    )


def test_activity_buckets_by_day_outcome_and_source(hash_mimir: Mimir) -> None:
    _seed(hash_mimir)
    act = insights.activity(hash_mimir.deps, days=3, now=NOW)
    assert act.days == ["2026-11-28", "2026-11-29", "2026-11-30"]
    assert act.by_outcome == {"success": [0, 0, 1], "failure": [1, 1, 0], "partial": [0, 0, 1]}
    assert act.by_source == {"api": [1, 1, 1], "claude-code": [0, 0, 1]}
    assert act.total == 4  # the 40-day-old one is outside the window
    assert insights.activity(hash_mimir.deps, days=60, now=NOW).total == 5
    with pytest.raises(InvalidInputError, match="days"):
        insights.activity(hash_mimir.deps, days=0)


def test_family_success_groups_similar_tasks(hash_mimir: Mimir) -> None:
    assert insights.family_success(hash_mimir.deps) == []
    _seed(hash_mimir)
    fams = insights.family_success(hash_mimir.deps)
    assert [(f.label, f.n) for f in fams] == [(TASK, 4), ("build the docker image", 1)]
    top = fams[0]
    assert (top.successes, top.failures, top.partial) == (1, 2, 1)
    assert top.rate == pytest.approx(1.5 / 4)
    assert len(insights.family_success(hash_mimir.deps, limit=1)) == 1
    newest = insights.family_success(hash_mimir.deps, max_experiences=2)
    assert [(f.label, f.n, f.rate) for f in newest] == [(TASK, 2, 0.75)]
    with pytest.raises(InvalidInputError, match="limit"):
        insights.family_success(hash_mimir.deps, limit=0)


def test_recent_injections_and_attribution(hash_mimir: Mimir) -> None:
    _seed(hash_mimir)
    inj = insights.recent_injections(hash_mimir.deps, limit=5)
    assert len(inj) == 2 and all(i.lesson_ids == ["les_a"] for i in inj)
    attr = insights.attribution(hash_mimir.deps, "les_a")
    assert (attr.n_with, attr.with_rate) == (2, pytest.approx(0.75))
    assert (attr.n_without, attr.without_rate) == (2, pytest.approx(0.0))
    with pytest.raises(NotFoundError):
        insights.attribution(hash_mimir.deps, "les_missing")


def test_search_text_lessons_and_pulse(hash_mimir: Mimir) -> None:
    empty = insights.pulse(hash_mimir.deps)
    assert (empty.experiences, empty.lessons, empty.newest_experience) == (0, 0, 0.0)
    _seed(hash_mimir)
    found = insights.search_text(hash_mimir.deps, "undefinedtable")
    assert len(found) == 2 and found[0].created_at > found[1].created_at
    assert insights.search_text(hash_mimir.deps, "sourdough") == []
    with pytest.raises(InvalidInputError, match="text"):
        insights.search_text(hash_mimir.deps, " ")
    assert [le.id for le in insights.search_lessons(hash_mimir.deps, "ALEMBIC")] == ["les_a"]
    assert insights.search_lessons(hash_mimir.deps, "alembic", status="retired") == []
    assert insights.search_lessons(hash_mimir.deps, "sourdough") == []
    p = insights.pulse(hash_mimir.deps)
    assert (p.experiences, p.lessons) == (5, 1)
    assert p.newest_experience == pytest.approx(NOW.timestamp())


def test_learning_curve_reads_the_newest_readable_file(tmp_path: Path) -> None:
    assert insights.learning_curve(tmp_path) is None
    assert insights.learning_curve(tmp_path / "missing") is None
    good = {
        "created": "c",
        "config": {"window": 10},
        "figures": {"arms": {"cold": {"curve": [{"mean": 0.2}, {"mean": 0.4}]}}},
    }
    (tmp_path / "learning-1.json").write_text(json.dumps(good))
    (tmp_path / "learning-2.json").write_text(json.dumps({"figures": {}}))
    curve = insights.learning_curve(tmp_path)
    assert curve is not None and curve.source == "learning-1.json"
    assert curve.arms == {"cold": [0.2, 0.4]} and curve.window == 10


def test_search_lessons_finds_an_old_match_beyond_the_limit(hash_mimir: Mimir) -> None:
    _seed(hash_mimir)  # les_a is the oldest lesson
    newer = [
        Lesson(id=f"les_n{i}", status="active", rule=f"Rule {i}", trigger=f"task {i}", kind="avoid")
        for i in range(3)
    ]
    insert(hash_mimir.deps, newer, actor="test", event="admitted")
    assert [le.id for le in insights.search_lessons(hash_mimir.deps, "alembic", limit=1)] == [
        "les_a"
    ]
    assert len(insights.search_lessons(hash_mimir.deps, None, limit=2)) == 2
