"""Recall and recommend with the real offline embedding model."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from mimir_core import Mimir
from mimir_core.search.beta import jeffreys_lower_bound
from mimir_core.search.recommend import DEFAULT_TUNING

T0 = datetime(2026, 6, 1, tzinfo=timezone.utc)


def seed_tests_family(m: Mimir) -> dict[str, list[str]]:
    ids: dict[str, list[str]] = {"good": [], "bad": [], "other": []}
    rows = [
        (
            "Run the integration tests of the payments API",
            "pytest tests/integration",
            "failure",
            "psycopg2.errors.UndefinedTable: relation orders does not exist",
            "bad",
        ),
        (
            "Make the payments integration suite pass",
            "pytest tests/integration",
            "failure",
            "UndefinedTable: relation orders does not exist",
            "bad",
        ),
        (
            "Payments API integration tests are failing",
            "PYTEST tests/integration",
            "failure",
            "UndefinedTable again",
            "bad",
        ),
        (
            "Run the payments integration tests in CI",
            "run alembic upgrade head before pytest tests/integration",
            "success",
            "48 passed",
            "good",
        ),
        (
            "Integration tests for the payments service",
            "Run `alembic upgrade head` before pytest tests/integration",
            "success",
            "all green",
            "good",
        ),
        (
            "Get the payments API integration tests green",
            "run alembic upgrade head before pytest tests/integration",
            "partial",
            "2 flaky left",
            "good",
        ),
        (
            "Install the frontend dependencies",
            "npm install --legacy-peer-deps",
            "success",
            "ERESOLVE avoided",
            "other",
        ),
        (
            "Bake a loaf of sourdough for the office party",
            "pytest the oven",
            "success",
            "",
            "other",
        ),
    ]
    for i, (task, action, outcome, reason, group) in enumerate(rows):
        exp = m.record(task, action, outcome, reason=reason, created_at=T0 + timedelta(hours=i))
        ids[group].append(exp.id)
    return ids


def test_paraphrase_identifier_and_abstention(mimir: Mimir) -> None:
    ids = seed_tests_family(mimir)
    hits = mimir.recall("the database tables are missing when the payment tests run", k=3)
    assert hits and hits[0].experience.id in ids["bad"] + ids["good"]
    ident = mimir.recall("psycopg2.errors.UndefinedTable", k=1)
    assert ident[0].experience.id == ids["bad"][0]
    assert "psycopg2.errors.undefinedtable" in ident[0].matched_terms
    assert mimir.recall("configure a Unity shader for water reflections", k=5) == []
    assert mimir.recall("what is the capital of Mongolia", k=5) == []


def test_non_english_and_unicode_queries(mimir: Mimir) -> None:
    de = mimir.record(
        "Datenbankmigration schlägt fehl: Spalte »kunden_id« fehlt", "alembic", "failure"
    )
    zh = mimir.record("数据库迁移失败，缺少表 orders", "运行 alembic upgrade head", "success")
    mimir.record("Install the frontend dependencies", "npm ci", "success")
    assert mimir.recall("kunden_id Spalte fehlt", k=1)[0].experience.id == de.id
    assert mimir.recall("迁移失败", k=1)[0].experience.id == zh.id
    assert mimir.recall("ünïcödé ✓ 🙂 \u200b", k=3) == [] or True  # never raises


def test_recommend_pools_variants_and_is_honest(mimir: Mimir) -> None:
    ids = seed_tests_family(mimir)
    rec = mimir.recommend("execute the payment service's integration test-suite")
    assert rec is not None
    assert "alembic upgrade head" in rec.action
    assert set(rec.evidence_ids) == set(ids["good"])  # three phrasings pooled
    assert rec.successes == pytest.approx(2.5)
    assert rec.failures == pytest.approx(0.5)
    # the bound of the family-weighted evidence: a paraphrase counts as likely as it is the
    # same kind of task, so never more than the raw counts' bound
    assert 0.2 < rec.confidence <= jeffreys_lower_bound(2.5, 0.5, DEFAULT_TUNING.quantile) + 1e-6
    trap = [a for a in rec.alternatives if a.action.lower().startswith("pytest")]
    assert trap and trap[0].successes == 0 and len(trap[0].evidence_ids) == 3
    # the sourdough row shares the word "pytest" but is off-topic: never evidence
    assert not any(i in ids["other"] for a in rec.alternatives for i in a.evidence_ids)


def test_recommend_abstains_and_never_picks_an_action_that_only_failed(mimir: Mimir) -> None:
    assert mimir.recommend("anything at all") is None  # empty store
    mimir.record(
        "Resize the EBS volume of the build box",
        "aws ec2 modify-volume",
        "failure",
        reason="VolumeModificationRateExceeded",
    )
    mimir.record(
        "Grow the build server's EBS disk",
        "aws ec2 modify-volume --size 200",
        "failure",
        reason="still rate limited",
    )
    assert mimir.recommend("increase the disk size of the build machine's EBS volume") is None
    assert mimir.recommend("write a haiku about autumn leaves") is None


def test_explore_draws_by_thompson_sampling(mimir: Mimir) -> None:
    for i in range(3):
        mimir.record(
            "Speed up the CI pipeline",
            "cache pip downloads",
            "success",
            created_at=T0 + timedelta(minutes=i),
        )
    mimir.record("Speed up the CI pipeline", "split the test job across 4 runners", "success")
    mimir.record("Speed up the CI pipeline", "split the test job across 4 runners", "failure")
    picks = {mimir.recommend("make CI faster", explore=True, seed=s).action for s in range(40)}  # type: ignore[union-attr]
    assert picks == {"cache pip downloads", "split the test job across 4 runners"}
    greedy = mimir.recommend("make CI faster")
    assert greedy is not None and greedy.action == "cache pip downloads" and not greedy.explored


def test_decay_lets_recent_evidence_win(home: Path, fast_embedder: object) -> None:
    now = datetime.now(timezone.utc)
    m = Mimir(home, embedder=fast_embedder, half_life_days=7)  # type: ignore[arg-type]
    for i in range(4):  # worked a long time ago
        m.record(
            "Publish the package to the registry",
            "twine upload dist/*",
            "success",
            created_at=now - timedelta(days=120, hours=i),
        )
    for i in range(2):  # fails now, a new way works now
        m.record(
            "Publish the package to the registry",
            "twine upload dist/*",
            "failure",
            created_at=now - timedelta(hours=i + 1),
        )
        m.record(
            "Publish the package to the registry",
            "uv publish with trusted publishing",
            "success",
            created_at=now - timedelta(hours=i + 1),
        )
    rec = m.recommend("release the package to the registry")
    assert rec is not None and rec.action == "uv publish with trusted publishing"


def test_cluster_actions_never_pools_different_command_signatures() -> None:
    import numpy as np

    from mimir_core.search.action_clusters import cluster_actions

    a, b = np.eye(2, dtype=np.float32)  # within a group cosine 1.0, across groups 0.0
    actions = [
        ("ran the migrations, then the tests", a),  # prose first: no signature yet
        ("pytest tests/integration", a),  # prose pools with a command by embedding
        ("alembic upgrade head && pytest tests/integration", a),  # another command: never
        ("pytest  tests/integration", a),  # the same command, spaced differently
        ("pytest tests/integration -x", a),  # a short flag: the same signature
        ("docker build .", b),
        ("docker buildx build --platform linux/amd64 .", b),
    ]
    rows = [
        {"id": f"e{i}", "action": t, "score": 1.0, "created_at": float(i), "action_vector": v}
        for i, (t, v) in enumerate(actions)
    ]
    clusters = cluster_actions(rows, [1.0] * len(rows), 0.7)
    groups = [[r["action"] for r in cl.rows] for cl in clusters]
    assert groups == [
        [
            "ran the migrations, then the tests",
            "pytest tests/integration",
            "pytest  tests/integration",
            "pytest tests/integration -x",
        ],
        ["alembic upgrade head && pytest tests/integration"],
        ["docker build ."],
        ["docker buildx build --platform linux/amd64 ."],
    ]


def test_recommend_keeps_a_command_apart_from_the_same_command_with_a_step_before(
    mimir: Mimir,
) -> None:
    # MiniLM puts these two actions at cosine ~0.71, above the pooling threshold (0.70).
    bad = [
        mimir.record(
            f"Run the payments integration tests ({i})",
            "pytest tests/integration",
            "failure",
            reason="UndefinedTable: relation orders does not exist",
            created_at=T0 + timedelta(hours=i),
        ).id
        for i in range(3)
    ]
    good = [
        mimir.record(
            f"Run the payments integration tests ({i + 3})",
            "alembic upgrade head && pytest tests/integration",
            "success",
            reason="48 passed",
            created_at=T0 + timedelta(hours=i + 3),
        ).id
        for i in range(2)
    ]
    rec = mimir.recommend("run the payments integration tests")
    assert rec is not None
    assert rec.action == "alembic upgrade head && pytest tests/integration"
    assert sorted(rec.evidence_ids) == sorted(good)
    assert (rec.successes, rec.failures) == (2.0, 0.0)
    trap = [a for a in rec.alternatives if a.action == "pytest tests/integration"]
    assert trap and sorted(trap[0].evidence_ids) == sorted(bad) and trap[0].successes == 0


def _naive_find(
    clusters: list[Any],
    phrasings: dict[int, list[tuple[str, Any]]],
    key: str,
    sig: str | None,
    vec: Any,
    threshold: float,
) -> Any:
    """The cluster lookup written plainly (one cosine per phrasing of each cluster: single
    linkage), as a reference."""
    home, best = None, threshold
    for cl in clusters:
        if any(k == key for k, _v in phrasings[id(cl)]):
            return cl
    for cl in reversed(clusters):  # ties: the newer phrasing, which is the newer cluster's here
        if sig is not None and cl.sig is not None and cl.sig != sig:
            continue
        sim = max(float(v @ vec) for _k, v in phrasings[id(cl)])
        if sim >= best + (1e-6 if home is not None else 0.0):
            best, home = sim, cl
    return home


@pytest.mark.parametrize("seed", range(20))
def test_the_cluster_index_finds_what_one_cosine_per_phrasing_finds(seed: int) -> None:
    import numpy as np

    from mimir_core.search.action_clusters import ActionCluster, ClusterIndex

    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((6, 16)).astype(np.float32)
    index = ClusterIndex(0.7)
    phrasings: dict[int, list[tuple[str, Any]]] = {}
    for step in range(120):
        vec = centres[rng.integers(6)] + 0.4 * rng.standard_normal(16).astype(np.float32)
        vec = (vec / np.linalg.norm(vec)).astype(np.float32)
        if step % 17 == 0:
            vec = index.clusters[0].vector.copy() if index.clusters else vec  # an exact tie
        key = f"k{rng.integers(40)}"
        sig = None if rng.random() < 0.5 else f"s{rng.integers(3)}"
        want = _naive_find(index.clusters, phrasings, key, sig, vec, 0.7)
        got = index.find(key, sig, vec)
        assert got is want, step
        if got is None:
            got = index.add(ActionCluster(vector=vec, key=key, sig=sig))
            phrasings[id(got)] = [(key, vec)]
            continue
        index.join(got, key, vec)
        if all(k != key for k, _v in phrasings[id(got)]) and not any(
            k == key for ps in phrasings.values() for k, _v in ps
        ):
            phrasings[id(got)].append((key, vec))
        if got.sig is None:
            got.sig = sig  # as cluster_actions does: the index must see signatures change
