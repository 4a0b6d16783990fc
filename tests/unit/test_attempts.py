"""``Mimir.attempts``: the past attempts of one action (real LanceDB store, hash embedder)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mimir_core import Mimir
from mimir_core.errors import InvalidInputError
from mimir_core.search.attempts import action_where
from mimir_core.store.core import EXPERIENCES

TASK = "run the payments integration tests"


@pytest.fixture
def m(home: Path) -> Iterator[Mimir]:
    mim = Mimir(home, embedder="hash", scope="payments-api", auto_consolidate=False)
    yield mim
    mim.close()


def _rec(m: Mimir, action: str, outcome: str, minute: int, **kw: object) -> str:
    task = kw.pop("task", TASK)
    return m.record(
        str(task), action, outcome, created_at=f"2026-01-01T00:{minute:02d}:00+00:00", **kw
    ).id


def test_exact_match_folds_case_spacing_and_punctuation_newest_first(m: Mimir) -> None:
    a = _rec(m, "pytest tests/integration", "failure", 1)
    b = _rec(m, "Pytest   tests/integration.", "failure", 2)
    c = _rec(m, "pytest tests/integration", "success", 3)
    _rec(m, "alembic upgrade head && pytest tests/integration", "success", 4)
    _rec(m, "pytest tests/integration -x", "failure", 5)
    _rec(m, "tox -e integration", "failure", 6)
    hits = m.attempts("pytest  TESTS/integration")
    assert [h.experience.id for h in hits] == [c, b, a]
    assert all(h.why == "same action" for h in hits)
    assert [h.experience.id for h in m.attempts("pytest tests/integration", k=2)] == [c, b]
    assert m.attempts("make deploy") == []


def test_signature_match_pools_arguments_but_not_other_tools(m: Mimir) -> None:
    a = _rec(m, "pytest tests/integration", "failure", 1)
    b = _rec(m, "pytest tests/unit -x", "failure", 2)
    _rec(m, "alembic upgrade head && pytest tests/integration", "success", 3)
    _rec(m, "pytest --reruns 3 tests/unit", "failure", 4)
    hits = m.attempts("pytest tests/other", match="signature")
    assert [h.experience.id for h in hits] == [b, a]
    assert hits[0].matched_terms == ["pytest"]
    assert "signature" in hits[0].why
    # Exact matching tells them apart.
    assert [h.experience.id for h in m.attempts("pytest tests/unit -x")] == [b]
    # Prose has no signature: compared exactly even with match="signature".
    p = _rec(m, "reran the migrations before the tests", "success", 5)
    prose = m.attempts("Reran the migrations before the tests", match="signature")
    assert [h.experience.id for h in prose] == [p]


def test_scope_isolation(m: Mimir) -> None:
    here = _rec(m, "pip install -e .", "failure", 1)
    there = _rec(m, "pip install -e .", "success", 2, scope="web-app")
    assert [h.experience.id for h in m.attempts("pip install -e .")] == [here]
    assert [h.experience.id for h in m.attempts("pip install -e .", scope="web-app")] == [there]
    assert [h.experience.id for h in m.attempts("pip install -e .", scope="*")] == [there, here]
    unscoped = Mimir(m.home, embedder="hash", auto_consolidate=False)
    assert len(unscoped.attempts("pip install -e .")) == 2  # no project: every project


def test_task_floor_keeps_related_tasks_only(m: Mimir) -> None:
    related = _rec(m, "pytest tests/integration", "failure", 1)
    _rec(m, "pytest tests/integration", "failure", 2, task="bake sourdough bread overnight")
    hits = m.attempts("pytest tests/integration", task="payments integration tests are failing")
    assert [h.experience.id for h in hits] == [related]
    assert 0.15 <= hits[0].similarity <= 1.0 and "task similarity" in hits[0].why
    everything = m.attempts("pytest tests/integration", task="x", min_similarity=-1.0)
    assert len(everything) == 2


def test_superseded_attempts_are_left_out(m: Mimir) -> None:
    old = _rec(m, "helm upgrade --install api ./chart", "failure", 1)
    new = _rec(m, "helm upgrade --install api ./chart", "success", 2)
    m.supersede(old, new)
    assert [h.experience.id for h in m.attempts("helm upgrade --install api ./chart")] == [new]


def test_secrets_are_matched_as_stored(m: Mimir) -> None:
    cmd = 'curl -H "Authorization: Bearer ghp_' + "a1B2" * 9 + '" https://api.github.com'
    ident = _rec(m, cmd, "failure", 1)
    hits = m.attempts(cmd)
    assert [h.experience.id for h in hits] == [ident]
    assert "ghp_" not in hits[0].experience.action


def test_quotes_and_like_wildcards_are_literal(m: Mimir) -> None:
    ident = _rec(m, "echo 'it''s 100%_done'", "failure", 1)
    _rec(m, "echo 'its 1000 done'", "failure", 2)
    assert [h.experience.id for h in m.attempts("echo 'it''s 100%_done'")] == [ident]


def test_the_where_narrows_in_lancedb(m: Mimir) -> None:
    _rec(m, "pytest tests/integration", "failure", 1)
    _rec(m, "alembic upgrade head && pytest tests/integration", "success", 2)
    _rec(m, "tox -e integration", "failure", 3)
    _rec(m, "npm ci && npm run build", "success", 4)
    where, sig = action_where("pytest tests/integration", "exact")
    assert sig is None
    rows = m.store.select(EXPERIENCES, where, ["action"])
    assert sorted(r["action"] for r in rows) == [
        "alembic upgrade head && pytest tests/integration",
        "pytest tests/integration",
    ]
    where, sig = action_where("npm run build -- --force", "signature")
    assert sig == "--force npm run"
    assert m.store.select(EXPERIENCES, where, ["action"]) == []


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"action": ""}, "action"),
        ({"action": 3}, "action"),
        ({"task": "  "}, "task"),
        ({"k": 0}, "k"),
        ({"k": True}, "k"),
        ({"match": "fuzzy"}, "match"),
        ({"min_similarity": "high"}, "min_similarity"),
        ({"min_similarity": 1.5}, "min_similarity"),
        ({"scope": 7}, "scope"),
    ],
)
def test_bad_input_names_the_argument(m: Mimir, kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"action": "pytest"} | kwargs
    with pytest.raises(InvalidInputError) as err:
        m.attempts(**args)  # type: ignore[arg-type]
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}:")
