"""Recommend per project: never re-recommend what only failed here; a calibrated point estimate.

Real LanceDB store in a temporary home, real offline MiniLM embedder.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from mimir_core import Mimir
from mimir_core.search.beta import jeffreys_lower_bound
from mimir_core.search.recommend import DEFAULT_TUNING

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
FIX = "pip install -e ."
OTHER = "pip install -r requirements.txt"
QUERY = "fix the import error for models"


def _m(home: Path, emb: Any, scope: str) -> Mimir:
    return Mimir(home, embedder=emb, scope=scope, auto_consolidate=False)


def _rec(m: Mimir, rows: list[tuple[str, str, str]], prefix: str, start: int = 0) -> None:
    m.record_many(
        [
            {
                "task": task,
                "action": action,
                "outcome": outcome,
                "created_at": T0 + timedelta(minutes=start + i),
                "idempotency_key": f"{prefix}-{i}",
            }
            for i, (task, action, outcome) in enumerate(rows)
        ]
    )


def test_a_fix_that_only_failed_here_is_not_recommended_here(
    home: Path, fast_embedder: object
) -> None:
    there, here = _m(home, fast_embedder, "web-app"), _m(home, fast_embedder, "data-pipeline")
    _rec(there, [("fix the import error for settings", FIX, "success")] * 5, "there")
    # Failed here on a paraphrase of the task (task cosine ~0.33 to the query: below the topic
    # threshold 0.40, above the failure threshold 0.30).
    _rec(
        here,
        [("ModuleNotFoundError: No module named 'etl.jobs' when running the app", FIX, "failure")],
        "here",
        start=10,
    )
    good = there.recommend(QUERY)
    assert good is not None and good.action == FIX
    assert here.recommend(QUERY) is None  # the only option failed here: nothing to recommend
    for seed in range(20):  # Thompson never draws it either
        assert here.recommend(QUERY, explore=True, seed=seed) is None
    # ...until it works here
    _rec(here, [("fix the import error for payments", FIX, "success")], "here-ok", start=20)
    again = here.recommend(QUERY)
    assert again is not None and again.action == FIX


def test_the_failed_fix_is_listed_and_an_alternative_is_recommended(
    home: Path, fast_embedder: object
) -> None:
    there, here = _m(home, fast_embedder, "web-app"), _m(home, fast_embedder, "data-pipeline")
    _rec(there, [("fix the import error for settings", FIX, "success")] * 6, "there")
    _rec(there, [("fix the import error for common", OTHER, "success")] * 2, "there2", start=6)
    _rec(
        here,
        # cosine ~0.48 to the query: on topic with a margin (either embedder variant)
        [("python import error for common after checkout", FIX, "failure")] * 2,
        "here",
        start=10,
    )
    rec = here.recommend(QUERY)
    assert rec is not None and rec.action == OTHER
    failed = [a for a in rec.alternatives if a.action == FIX]
    assert failed, rec.alternatives  # the agent is told it failed (here)
    assert failed[0].failures >= 2


def test_expected_success_is_this_projects_rate_and_the_bound_stays_below(
    home: Path, fast_embedder: object
) -> None:
    there, here = _m(home, fast_embedder, "web-app"), _m(home, fast_embedder, "data-pipeline")
    _rec(there, [("fix the import error for settings", FIX, "success")] * 12, "there")
    rows = [("fix the import error for payments", FIX, "success")] * 2
    rows += [("fix the import error for payments", FIX, "failure")] * 6
    _rec(here, rows, "here", start=20)
    rec = here.recommend(QUERY)
    assert rec is not None and rec.expected_success is not None
    # pooled naively: 14 of 20 (0.70); this project: 2 of 8
    assert rec.expected_success < 0.5, rec
    # the confidence too is this project's: the other one's 12 successes are worth at most 2
    # observations (pooled naively, the bound of 14 of 20 would be 0.52)
    assert rec.confidence < 0.3 < jeffreys_lower_bound(14, 6, DEFAULT_TUNING.quantile), rec
    elsewhere = there.recommend(QUERY)
    assert elsewhere is not None and elsewhere.expected_success is not None
    # 12 of 12 there (a task at cosine ~0.9): well above, short of certainty (a prior worth 4
    # observations, recency, correlated tries: the estimate's ceiling is ~0.77)
    assert elsewhere.expected_success > max(0.6, rec.expected_success + 0.2), (elsewhere, rec)
    assert elsewhere.confidence <= elsewhere.expected_success


def test_expected_success_follows_drift(home: Path, fast_embedder: object) -> None:
    m = _m(home, fast_embedder, "web-app")
    rows = [("fix the import error for settings", FIX, "success")] * 12
    rows += [("fix the import error for settings", FIX, "failure")] * 8
    _rec(m, rows, "drift")
    rec = m.recommend(QUERY)
    assert rec is not None and rec.expected_success is not None
    assert rec.expected_success < 0.5, rec  # the last 8 outcomes all failed
    from dataclasses import replace

    m.recommend_tuning = replace(m.recommend_tuning, recent_half_life=0.0)  # every outcome alike
    flat = m.recommend(QUERY)
    assert flat is not None and flat.expected_success is not None
    assert rec.expected_success < flat.expected_success - 0.1, (rec, flat)


def test_the_estimate_does_not_inherit_how_the_topics_other_actions_did(
    home: Path, fast_embedder: object
) -> None:
    # The recommended action is the one its own evidence singles out: traps and duds tried on
    # the same topic say nothing about it, so they must not pull its estimate down (anchored at
    # the topic's base rate, they did: its estimates spread wider than the rates they predict).
    alone = _m(home / "alone", fast_embedder, "web-app")
    _rec(alone, [("fix the import error for settings", FIX, "success")] * 3, "a")
    crowded = _m(home / "crowded", fast_embedder, "web-app")
    _rec(crowded, [("fix the import error for settings", FIX, "success")] * 3, "a")
    task = "fix the import error for settings"
    duds = [(task, "rm -rf build && make", "failure")] * 2 + [(task, "git clean -fdx", "failure")]
    _rec(crowded, duds, "d", start=9)
    one, other = alone.recommend(QUERY), crowded.recommend(QUERY)
    assert one is not None and other is not None and one.action == other.action == FIX
    # (the duds' tasks move the family centroid a hair, not the estimate)
    assert other.expected_success == pytest.approx(one.expected_success, abs=1e-4)
    assert one.expected_success is not None and 0.6 < one.expected_success < 0.8


def test_evidence_from_another_kind_of_task_counts_only_as_likely_as_it_is_the_same(
    home: Path, fast_embedder: object
) -> None:
    from mimir_core.search.family import topic_probability
    from mimir_core.search.recommend import DEFAULT_TUNING

    logit = DEFAULT_TUNING.topic_logit
    probs = [topic_probability(c, logit) for c in (0.3, 0.4, 0.45, 0.5, 0.6, 0.8)]
    assert probs == sorted(probs) and probs[0] < 0.1 and probs[-1] > 0.99
    m = _m(home, fast_embedder, "web-app")
    _rec(m, [("fix the import error for settings", FIX, "success")] * 6, "near")
    near = m.recommend("fix the import error for models")
    assert near is not None and near.expected_success is not None
    far = m.recommend("fix the export error for reports")  # cosine 0.46: another kind of task
    assert far is not None and far.expected_success is not None and far.action == FIX
    assert far.expected_success < near.expected_success - 0.2, (far, near)


def test_many_outcomes_count_with_diminishing_returns() -> None:
    # Outcomes on alike (not identical) tasks are correlated: 40 successes of 40 say less than
    # 40 independent coin flips, so the point estimate stays short of certainty.
    import numpy as np

    from mimir_core.search.action_clusters import ActionCluster
    from mimir_core.search.recommend import RecommendTuning, expected_success

    rows = [{"score": 1.0, "created_at": float(i), "scope": "web-app"} for i in range(40)]
    cl = ActionCluster(
        vector=np.zeros(4, dtype=np.float32), key="k", rows=rows, weights=[1.0] * len(rows)
    )
    tuning = RecommendTuning(recent_half_life=0.0)
    independent = RecommendTuning(recent_half_life=0.0, overdispersion=0.0)
    assert expected_success(cl, "web-app", independent) > 0.95
    got = expected_success(cl, "web-app", tuning)
    cap = 1.0 / tuning.overdispersion  # at most this many observations' worth
    k, prior = tuning.base_strength, tuning.prior_rate
    assert 0.75 < got < (k * prior + cap) / (k + cap) + 1e-9, got
    one = [rows[0]]
    single = ActionCluster(vector=cl.vector, key="k", rows=one, weights=[1.0])
    assert expected_success(single, "web-app", tuning) == pytest.approx(
        expected_success(single, "web-app", independent)
    )  # a single outcome is worth one observation either way
