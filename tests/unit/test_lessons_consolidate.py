"""Consolidation on a real store with the real embedder: specific, gated, signed, traceable."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from mimir_core import Mimir
from mimir_core.lessons.consolidate import TryLock, lock_path
from mimir_core.lessons.gate import EPSILON
from mimir_core.store.core import LESSONS, META
from mimir_core.tools.digest import read_digest, render_context
from mimir_integrations.demo import EXPERIENCES as DEMO

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=timezone.utc)


def record(
    m: Mimir, rows: list[tuple[str, str, str, str]], *, prefix: str, start: datetime, **extra: Any
) -> list[Any]:
    items = [
        {
            "task": t,
            "action": a,
            "outcome": o,
            "reason": r,
            "created_at": start + timedelta(minutes=10 * i),
            "idempotency_key": f"{prefix}-{i}",
            **extra,
        }
        for i, (t, a, o, r) in enumerate(rows)
    ]
    return m.record_many(items)


@pytest.fixture
def demo_store(home: Path, fast_embedder: object) -> Mimir:
    m = Mimir(home, embedder=fast_embedder, auto_consolidate=False)  # type: ignore[arg-type]
    record(m, DEMO, prefix="demo", start=T0)
    return m


def test_consolidation_learns_specific_signed_gated_traceable_lessons(
    demo_store: Mimir, home: Path
) -> None:
    m = demo_store
    report = m.consolidate()
    assert report.ran and report.examined == len(DEMO) and report.clusters >= 4
    assert len(report.admitted) >= 2
    actions = {a for _t, a, _o, _r in DEMO}
    tasks = {t for t, _a, _o, _r in DEMO}
    for ident in report.admitted:
        detail = m.lesson_detail(ident)
        le = detail.lesson
        assert le.status == "active" and detail.signature_valid
        # specific: built from a recorded action and task, with its tally
        assert le.action in actions and le.trigger in tasks
        assert le.action in le.rule and "of" in le.rule and " times" in le.rule
        # gated: the lower end of the interval clears epsilon on held-out evidence
        assert le.gate.passed and le.gate.lift - le.gate.noise >= EPSILON
        assert le.gate.n_with >= 2 and le.gate.n_without >= 2
        # traceable: its evidence is real experiences that did the action
        assert detail.supporting and all(e.action.split()[0] in le.rule for e in detail.supporting)
        assert le.provenance["consolidator"] == "deterministic-v1"
        assert set(le.provenance["quoted_ids"]) <= {e.id for e in detail.supporting}
        assert detail.audit[-1].event == "admitted" and detail.audit[-1].actor == "consolidate"
    # The payments topic taught the migration step (as "prefer alembic" or "avoid bare pytest,
    # what worked instead: alembic", whichever replicated across the held-out halves).
    alembic = [m.get_lesson(i) for i in report.admitted if "alembic" in m.get_lesson(i).rule]
    assert alembic
    assert "`alembic upgrade head && pytest tests/integration`" in alembic[0].rule
    # served: to the facade and, through the signed digest, to hooks
    assert alembic[0].id in [le.id for le in m.lessons("payments integration tests fail")]
    assert {e["id"] for e in read_digest(home) or []} == set(report.admitted)
    assert alembic[0].id in render_context(home, "run the payments API integration tests")
    # candidates are stored but never served
    for ident in report.pending:
        cand = m.get_lesson(ident)
        assert cand.status == "candidate" and cand.gate.detail
        assert not cand.gate.passed
    assert not set(report.pending) & {le.id for le in m.list_lessons(status="active")}


def test_consolidation_is_deterministic_for_a_store(tmp_path: Path, fast_embedder: object) -> None:
    results = []
    for name in ("a", "b"):
        m = Mimir(tmp_path / name, embedder=fast_embedder, auto_consolidate=False)  # type: ignore[arg-type]
        record(m, DEMO, prefix="demo", start=T0)
        r = m.consolidate()
        results.append(
            (sorted(r.admitted), sorted(r.pending), sorted((le.id, le.rule) for le in r.candidates))
        )
    assert results[0] == results[1]


def test_runs_are_incremental_and_never_miss_backdated_rows(demo_store: Mimir) -> None:
    m = demo_store
    first = m.consolidate()
    again = m.consolidate()
    assert again.ran and again.examined == 0 and "nothing new" in again.reason
    record(
        m,
        [
            (
                "Install the dashboard's npm dependencies",
                "npm install --legacy-peer-deps",
                "success",
                "worked on the build agent too",
            )
        ],
        prefix="late",
        start=T0 + timedelta(days=3),
    )
    step = m.consolidate()
    assert step.examined == 1 and step.clusters == 1
    assert len(step.candidates) <= len(first.candidates)
    # a row with an old timestamp (an import) is still examined: the count does not add up
    record(
        m,
        [("Build the API docker image", "docker build -t api .", "failure", "exec format")],
        prefix="old",
        start=T0 - timedelta(days=30),
    )
    assert m.consolidate().examined == len(DEMO) + 2


def test_dry_run_writes_nothing(demo_store: Mimir, home: Path) -> None:
    m = demo_store
    report = m.consolidate(dry_run=True)
    assert report.dry_run and report.admitted
    assert m.store.count(LESSONS) == 0
    meta = {r["key"] for r in m.store.select(META, None, ["key"])}
    assert "lessons.watermark" not in meta
    assert not (home / "digest" / "lessons.json").exists()
    assert m.consolidate().admitted == report.admitted


def test_only_one_consolidation_runs_at_a_time(demo_store: Mimir, home: Path) -> None:
    m = demo_store
    with TryLock(lock_path(m.deps)) as lock:
        assert lock.acquired
        report = m.consolidate()
        assert not report.ran and "another consolidation" in report.reason
        # ... across processes too
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "mimir_integrations.cli",
                "consolidate",
                "--json",
                "--home",
                str(home),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**__import__("os").environ, "MIMIR_EMBEDDER": "fastembed"},
        )
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["ran"] is False
    assert m.consolidate().ran


def test_duplicates_merge_their_evidence(demo_store: Mimir) -> None:
    m = demo_store
    first = m.consolidate()
    npm = next(i for i in first.admitted if "legacy-peer-deps" in m.get_lesson(i).rule)
    before = m.get_lesson(npm)
    record(
        m,
        [
            (
                "Install the web dashboard's packages",
                "npm install --legacy-peer-deps",
                "success",
                "ok on node 22",
            ),
            (
                "Install the dashboard dependencies again",
                "npm install --legacy-peer-deps",
                "success",
                "ok after the lockfile bump",
            ),
        ],
        prefix="more-npm",
        start=T0 + timedelta(days=2),
    )
    second = m.consolidate()
    assert npm in second.merged
    after = m.get_lesson(npm)
    assert len(after.supporting_ids) == len(before.supporting_ids) + 2
    assert after.confidence > before.confidence
    same = [le for le in m.list_lessons() if le.action == "npm install --legacy-peer-deps"]
    assert [le.id for le in same] == [npm]
    assert "merged" in [e.event for e in m.audit_log(npm)]


DOCS = "Publish the documentation site to GitHub Pages"
OLD_WAY = "mkdocs gh-deploy --force"
NEW_WAY = "deploy with the actions/deploy-pages workflow"


def docs_history(m: Mimir) -> None:
    rows = [
        (DOCS, OLD_WAY, "success", "site published in 40s"),
        ("Deploy the docs site to GitHub Pages after the release", OLD_WAY, "success", "live"),
        ("Push the updated documentation to GitHub Pages", OLD_WAY, "success", "published"),
        (
            "Publish the docs site to GitHub Pages",
            "git push origin gh-pages",
            "failure",
            "rejected: gh-pages has no built site",
        ),
        ("Update the GitHub Pages docs", "git push origin gh-pages", "failure", "404 on the site"),
        (
            "Publish the documentation to GitHub Pages",
            "git push origin gh-pages",
            "failure",
            "the branch holds sources, not the built site",
        ),
    ]
    record(m, rows, prefix="docs-old", start=T0)


def test_a_contradiction_supersedes_the_old_lesson_bitemporally(
    home: Path, fast_embedder: object
) -> None:
    m = Mimir(home, embedder=fast_embedder, auto_consolidate=False)  # type: ignore[arg-type]
    docs_history(m)
    m.consolidate()
    old = next(le for le in m.list_lessons(status="active") if le.action == OLD_WAY)
    assert old.kind == "prefer"
    # The org turned on branch protection: the old way now fails, a new one works.
    later = []
    for i in range(4):
        later.append(
            (
                f"{DOCS} (attempt {i})",
                OLD_WAY,
                "failure",
                "remote rejected: gh-pages is a protected branch since the org policy change",
            )
        )
        later.append(
            (
                f"Publish the docs to GitHub Pages, try {i}",
                NEW_WAY,
                "success",
                "published by the pages workflow",
            )
        )
    record(m, later, prefix="docs-new", start=T0 + timedelta(days=10))
    report = m.consolidate()
    assert old.id in report.superseded
    gone = m.get_lesson(old.id)
    assert gone.status == "superseded" and gone.invalid_at is not None
    new = m.get_lesson(gone.superseded_by or "")
    assert new.status == "active" and new.kind == "avoid" and new.action == OLD_WAY
    assert new.provenance["revises"] == old.id
    why = next(e for e in m.audit_log(old.id) if e.event == "superseded")
    assert why.detail["by"] == new.id and "contradicted" in why.detail["reason"]
    assert old.id not in [le.id for le in m.lessons("publish the docs site to github pages")]
    # Forgetting the new lesson leaves no copy of its rule, not even in the old lesson's trail.
    m.forget(new.id)
    quote = new.rule[:200]
    assert all(quote not in str(e.detail) for e in m.audit_log(old.id))
    store = b"".join(p.read_bytes() for p in (home / "store").rglob("*") if p.is_file())
    assert quote.encode() not in store


def test_a_lesson_that_hurts_is_quarantined_by_the_next_run(
    home: Path, fast_embedder: object
) -> None:
    m = Mimir(home, embedder=fast_embedder, auto_consolidate=False)  # type: ignore[arg-type]
    docs_history(m)
    m.consolidate()
    lesson = next(le for le in m.list_lessons(status="active") if le.action == OLD_WAY)
    hurt = [
        (f"{DOCS} #{i}", OLD_WAY, "failure", "remote rejected: protected branch") for i in range(5)
    ]
    record(m, hurt, prefix="hurt", start=T0 + timedelta(days=5), recalled_lesson_ids=[lesson.id])
    report = m.consolidate()
    assert lesson.id in report.quarantined
    assert m.get_lesson(lesson.id).status == "quarantined"
    why = next(e for e in m.audit_log(lesson.id) if e.event == "quarantined")
    assert "circuit breaker" in why.detail["reason"] and why.actor == "consolidate"
    assert lesson.id not in [le.id for le in m.lessons(DOCS)]


def test_a_retired_lesson_is_not_learned_again(demo_store: Mimir) -> None:
    m = demo_store
    first = m.consolidate()
    ident = first.admitted[0]
    m.retire_lesson(ident, "we moved off this stack")
    record(
        m,
        [(m.get_lesson(ident).trigger, m.get_lesson(ident).action, "success", "again")],
        prefix="again",
        start=T0 + timedelta(days=4),
    )
    second = m.consolidate(force=True)
    assert ident not in second.admitted
    assert any(ident in why for why in second.dropped)
    assert m.get_lesson(ident).status == "retired"


def test_too_little_evidence_stays_a_candidate_with_what_it_needs(
    home: Path, fast_embedder: object
) -> None:
    m = Mimir(home, embedder=fast_embedder, auto_consolidate=False)  # type: ignore[arg-type]
    record(
        m,
        [
            (
                "Rotate the staging TLS certificate",
                "certbot renew --force-renewal",
                "success",
                "ok",
            ),
            (
                "Renew the TLS certificate of staging",
                "certbot renew --force-renewal",
                "success",
                "renewed",
            ),
        ],
        prefix="tls",
        start=T0,
    )
    report = m.consolidate()
    assert not report.admitted and report.pending
    cand = m.get_lesson(report.pending[0])
    assert cand.status == "candidate" and cand.gate.needed > 0 and "needs" in cand.gate.detail
    assert m.lessons("renew the staging certificate") == []


IMPORT_TASKS = (
    "fix the import error for {x}",
    "python can't import {x} after checkout",
    "ModuleNotFoundError: No module named '{x}' when running the app",
)


def import_history(m: Mimir, scope: str, action: str, outcomes: str, prefix: str) -> None:
    """Tries of ``action`` on import errors in project ``scope`` (``outcomes``: "1" a success)."""
    rows = [
        (
            IMPORT_TASKS[i % 3].format(x=f"pkg{i}"),
            action,
            "success" if o == "1" else "failure",
            "ok" if o == "1" else "no setup.py or pyproject found",
        )
        for i, o in enumerate(outcomes)
    ]
    record(m, rows, prefix=f"{prefix}-{scope}", start=T0, scope=scope)


def test_a_fix_that_fails_in_one_project_is_only_taught_where_it_works(
    home: Path, fast_embedder: object
) -> None:
    m = Mimir(home, embedder=fast_embedder, auto_consolidate=False)  # type: ignore[arg-type]
    for scope in ("api", "web"):
        import_history(m, scope, "pip install -e .", "111", "pip")
        import_history(m, scope, "export PYTHONPATH=src", "00", "path")
    first = m.consolidate()
    pip = [m.get_lesson(i) for i in first.admitted if m.get_lesson(i).action == "pip install -e ."]
    assert [(le.kind, le.scope) for le in pip] == [("prefer", "")]  # it worked everywhere tried
    # Then it fails in a third project: served there, it would hurt.
    import_history(m, "data", "pip install -e .", "0", "pip")
    import_history(m, "data", "export PYTHONPATH=src", "0", "path")
    second = m.consolidate()
    now = [le for le in m.list_lessons(status="active") if le.action == "pip install -e ."]
    assert sorted((le.kind, le.scope) for le in now) == [("prefer", "api"), ("prefer", "web")]
    assert m.get_lesson(pip[0].id).status == "superseded" and pip[0].id in second.superseded
    assert not [
        le
        for le in m.lessons("fix the import error for etl", scope="data")
        if le.action == "pip install -e ." and le.kind == "prefer"
    ]
