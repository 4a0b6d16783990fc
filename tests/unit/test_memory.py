"""The Mimir facade on a real LanceDB store: writes, reads, lifecycle, errors."""

from __future__ import annotations

import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from mimir_core import Experience, Mimir
from mimir_core.errors import InvalidInputError, NotFoundError


def test_record_returns_the_stored_experience(hash_mimir: Mimir) -> None:
    exp = hash_mimir.record(
        "run the api tests",
        "pytest tests/api",
        "failure",
        reason="relation orders does not exist",
        context={"exit_code": 1},
        source="claude-code",
        session_id="s1",
        recalled_lesson_ids=["L1"],
    )
    assert isinstance(exp, Experience)
    got = hash_mimir.get(exp.id)
    assert got.task == "run the api tests"
    assert got.context == {"exit_code": 1}
    assert got.recalled_lesson_ids == ["L1"]
    assert got.embed_model == "hash-v1"
    assert got.source == "claude-code"


def test_record_failure_requires_a_reason(hash_mimir: Mimir) -> None:
    with pytest.raises(InvalidInputError, match="reason"):
        hash_mimir.record_failure("task", "action", "")
    exp = hash_mimir.record_failure("task", "action", "it broke")
    assert exp.outcome == "failure" and exp.score == 0.0


def test_idempotency_key_deduplicates(hash_mimir: Mimir) -> None:
    a = hash_mimir.record("t", "a", "success", idempotency_key="call-1")
    b = hash_mimir.record("t", "a", "success", idempotency_key="call-1")
    assert a.id == b.id
    assert hash_mimir.stats().experiences == 1


def test_a_bad_item_in_a_batch_stores_nothing(hash_mimir: Mimir) -> None:
    with pytest.raises(InvalidInputError, match="outcome"):
        hash_mimir.record_many(
            [
                {"task": "ok", "action": "ok", "outcome": "success"},
                {"task": "bad", "action": "bad", "outcome": "maybe"},
            ]
        )
    with pytest.raises(InvalidInputError, match="colour"):
        hash_mimir.record_many([{"task": "t", "action": "a", "outcome": "success", "colour": 1}])
    assert hash_mimir.stats().experiences == 0


def test_supersede_checks_existence_and_cycles(hash_mimir: Mimir) -> None:
    a = hash_mimir.record("t1", "a1", "failure")
    b = hash_mimir.record("t1", "a2", "success")
    c = hash_mimir.record("t1", "a3", "success")
    with pytest.raises(NotFoundError, match="nope"):
        hash_mimir.supersede(a.id, "nope")
    with pytest.raises(InvalidInputError, match="itself"):
        hash_mimir.supersede(a.id, a.id)
    hash_mimir.supersede(a.id, b.id)
    hash_mimir.supersede(b.id, c.id)
    with pytest.raises(InvalidInputError, match="cycle"):
        hash_mimir.supersede(c.id, a.id)
    assert hash_mimir.get(a.id).superseded_by == b.id
    ids = [h.experience.id for h in hash_mimir.recall("t1 a1", k=10)]
    assert a.id not in ids
    ids = [h.experience.id for h in hash_mimir.recall("t1 a1", k=10, include_superseded=True)]
    assert a.id in ids


def test_forgetting_the_newer_experience_makes_the_older_current_again(
    hash_mimir: Mimir,
) -> None:
    a = hash_mimir.record("t1", "a1", "failure")
    b = hash_mimir.record("t1", "a2", "success")
    keep = hash_mimir.record("t1", "a3", "success")
    hash_mimir.supersede(keep.id, a.id)  # an unrelated link stays
    hash_mimir.supersede(a.id, b.id)
    hash_mimir.forget(b.id)
    assert hash_mimir.get(a.id).superseded_by is None
    assert hash_mimir.get(keep.id).superseded_by == a.id
    assert a.id in [h.experience.id for h in hash_mimir.recall("t1 a1", k=10)]


@pytest.mark.parametrize("home_arg", ["", "   ", 5, b"/tmp/x"])
def test_home_must_be_a_non_empty_path(
    home_arg: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInputError, match=r"^home: "):
        Mimir(home_arg, embedder="hash")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []  # nothing created in the current directory


def test_home_that_is_a_file_is_a_store_error(tmp_path: Path) -> None:
    from mimir_core.errors import StoreError

    (tmp_path / "file").write_text("x")
    for home in (tmp_path / "file", tmp_path / "file" / "sub"):
        with pytest.raises(StoreError, match="not a directory"):
            Mimir(home, embedder="hash").stats()


@pytest.mark.parametrize("value", [0, -5, float("nan"), float("inf"), "3", True])
def test_half_life_days_must_be_finite_and_positive(value: object, home: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"^half_life_days: "):
        Mimir(home, embedder="hash", half_life_days=value)  # type: ignore[arg-type]
    assert Mimir(home, embedder="hash", half_life_days=7).half_life_days == 7.0


@pytest.mark.parametrize(
    ("var", "value", "expected"),
    [
        ("MIMIR_HALF_LIFE_DAYS", "nan", "MIMIR_HALF_LIFE_DAYS: must be a finite number"),
        ("MIMIR_HALF_LIFE_DAYS", "-5", "MIMIR_HALF_LIFE_DAYS: must be a finite number"),
        ("MIMIR_HALF_LIFE_DAYS", "0", "MIMIR_HALF_LIFE_DAYS: must be a finite number"),
        ("MIMIR_HOME", "", "MIMIR_HOME: must not be empty"),
        ("MIMIR_EMBEDDER", "bogus", "MIMIR_EMBEDDER: .*got 'bogus'"),
        ("MIMIR_REDACT_PATTERNS", "not json", "MIMIR_REDACT_PATTERNS: is not valid JSON; got"),
    ],
)
def test_bad_settings_are_one_line_config_errors(
    var: str, value: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mimir_core.errors import ConfigError

    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError, match=expected) as info:
        Mimir(embedder="hash")
    assert "\n" not in str(info.value)


def test_forget_really_removes_the_text(hash_mimir: Mimir, home: Path) -> None:
    for i in range(30):
        hash_mimir.record(f"ordinary task {i}", f"ordinary action {i}", "success")
    secret = hash_mimir.record("ZEBRAQUUXTASK private", "SNARFBLATACTION", "failure")
    hash_mimir.recall("ZEBRAQUUXTASK", 3)  # touch the indexes
    hash_mimir.forget(secret.id)
    with pytest.raises(NotFoundError):
        hash_mimir.get(secret.id)
    with pytest.raises(NotFoundError):
        hash_mimir.forget(secret.id)
    found = subprocess.run(
        ["grep", "-rlai", "-e", "zebraquuxtask", "-e", "snarfblataction", str(home)],
        capture_output=True,
        text=True,
    )
    assert found.stdout == "", f"forgotten text still on disk in {found.stdout}"
    assert hash_mimir.stats().experiences == 30


def test_recent_is_newest_first(hash_mimir: Mimir) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i in range(5):
        hash_mimir.record(f"task {i}", "a", "success", created_at=t0 + timedelta(days=i))
    assert [e.task for e in hash_mimir.recent(3)] == ["task 4", "task 3", "task 2"]
    with pytest.raises(InvalidInputError, match="n"):
        hash_mimir.recent(0)


def test_stats_counts(hash_mimir: Mimir) -> None:
    hash_mimir.record("a", "b", "success", source="cline", scope="p1")
    hash_mimir.record("a", "c", "failure", source="cline", scope="p2")
    hash_mimir.record("a", "d", "partial", scope="p2")
    st = hash_mimir.stats()
    assert st.experiences == 3
    assert st.by_outcome == {"success": 1, "failure": 1, "partial": 1}
    assert st.by_source == {"cline": 2, "api": 1}
    assert st.by_scope == {"p2": 2, "p1": 1}
    assert st.embedder == "hash-v1"


def test_recall_argument_errors_name_the_argument(hash_mimir: Mimir) -> None:
    for kwargs, field in [
        ({"query": ""}, "query"),
        ({"query": "x", "k": 0}, "k"),
        ({"query": "x", "k": "5"}, "k"),
        ({"query": "x", "outcome": "meh"}, "outcome"),
        ({"query": "x", "since": "not a time"}, "since"),
        ({"query": "x", "scope": 3}, "scope"),
    ]:
        with pytest.raises(InvalidInputError) as info:
            hash_mimir.recall(**kwargs)  # type: ignore[arg-type]
        assert info.value.field == field


def test_scope_filters_and_preference(home: Path) -> None:
    m = Mimir(home, embedder="hash", scope="repo-a")
    m.record("configure the linter", "ruff check --fix", "success")
    m.record("configure the linter", "flake8", "failure", scope="repo-b")
    assert {h.experience.scope for h in m.recall("configure the linter", k=5)} == {
        "repo-a",
        "repo-b",
    }
    assert m.recall("configure the linter", k=5)[0].experience.scope == "repo-a"
    only_b = m.recall("configure the linter", k=5, scope="repo-b")
    assert [h.experience.scope for h in only_b] == ["repo-b"]
    assert len(m.recall("configure the linter", k=5, scope="*")) == 2


def test_outcome_and_since_filters(hash_mimir: Mimir) -> None:
    old = datetime(2020, 1, 1, tzinfo=timezone.utc)
    hash_mimir.record("deploy the app", "kubectl apply", "failure", created_at=old)
    hash_mimir.record("deploy the app", "helm upgrade", "success")
    fails = hash_mimir.recall("deploy the app", outcome="failure")
    assert [h.experience.action for h in fails] == ["kubectl apply"]
    recent = hash_mimir.recall("deploy the app", since="2025-01-01T00:00:00Z")
    assert [h.experience.action for h in recent] == ["helm upgrade"]


def test_compaction_keeps_fragments_bounded(hash_mimir: Mimir) -> None:
    from mimir_core.store.core import COMPACT_FRAGMENTS, EXPERIENCES

    for i in range(COMPACT_FRAGMENTS * 2 + 5):
        hash_mimir.record(f"task {i}", f"action {i}", "success")
    assert hash_mimir.store.upkeep.wait(60)  # upkeep runs off the writer's path
    assert hash_mimir.store.fragments(EXPERIENCES) < COMPACT_FRAGMENTS
    assert hash_mimir.stats().experiences == COMPACT_FRAGMENTS * 2 + 5
