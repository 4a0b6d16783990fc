"""``mimir demo``: the whole loop in under a minute, on a temporary store unless ``--home``."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from .cli import emit, open_mimir

# A realistic mix: (task, action, outcome, reason), several attempts per task family.
EXPERIENCES: list[tuple[str, str, str, str]] = [
    (
        "Run the integration tests of the payments API",
        "pytest tests/integration",
        "failure",
        'psycopg2.errors.UndefinedTable: relation "orders" does not exist',
    ),
    (
        "Make the payments API integration suite pass",
        "pytest tests/integration -x",
        "failure",
        'UndefinedTable: relation "orders" does not exist (fresh database)',
    ),
    (
        "Run the payments integration tests in CI",
        "alembic upgrade head && pytest tests/integration",
        "success",
        "schema migrated first, 48 passed",
    ),
    (
        "Integration tests for payments service are red",
        "alembic upgrade head, then pytest tests/integration",
        "success",
        "all 48 tests pass once the migrations are applied",
    ),
    (
        "Run payments API integration tests after a rebase",
        "recreate the test database with docker compose down -v",
        "partial",
        "database recreated but still missing tables until migrations ran",
    ),
    (
        "Install the frontend dependencies",
        "npm install",
        "failure",
        "npm ERR! code ERESOLVE unable to resolve dependency tree: react@19 vs react-dom@18 peer",
    ),
    (
        "Install node packages for the dashboard",
        "npm install --force",
        "failure",
        "installed but the build broke: Invalid hook call, two copies of React",
    ),
    (
        "Install the dashboard's npm dependencies",
        "npm install --legacy-peer-deps",
        "success",
        "dependency tree resolved, build green",
    ),
    (
        "Set up node_modules for the web dashboard",
        "npm install --legacy-peer-deps",
        "success",
        "worked again after the lockfile changed",
    ),
    (
        "Fix the flaky test test_invoice_due_date",
        "add a retry with pytest-rerunfailures",
        "failure",
        "still fails between 23:00 and 00:00 UTC: the date is computed in local time",
    ),
    (
        "test_invoice_due_date fails at night",
        "freeze time with freezegun and use UTC in parse_invoice_date",
        "success",
        "deterministic: due date computed from an aware UTC datetime",
    ),
    (
        "Build the API docker image",
        "docker build -t api .",
        "failure",
        "exec format error: image built for arm64 on the M2 laptop, cluster is amd64",
    ),
    (
        "Build the API container for the cluster",
        "docker buildx build --platform linux/amd64 -t api .",
        "success",
        "image runs on the amd64 nodes",
    ),
    (
        "Deploy the worker to Kubernetes",
        "kubectl apply -f k8s/worker.yaml",
        "failure",
        "CrashLoopBackOff: OOMKilled, exit code 137 with a 256Mi limit",
    ),
    (
        "Deploy the worker to Kubernetes",
        "raise the memory limit of the worker to 1Gi",
        "success",
        "pods stable for 24h",
    ),
    # More attempts of the same families: lessons need evidence that replicates.
    (
        "Run the payments API integration tests on a fresh clone",
        "pytest tests/integration",
        "failure",
        'relation "invoices" does not exist: the test database has no tables yet',
    ),
    (
        "Payments integration suite fails locally",
        "pytest tests/integration --maxfail=1",
        "failure",
        'psycopg2.errors.UndefinedTable: relation "orders" does not exist',
    ),
    (
        "Run the payments API integration tests on a fresh clone",
        "alembic upgrade head && pytest tests/integration",
        "success",
        "migrations created the schema; 48 passed",
    ),
    (
        "Payments integration tests after pulling main",
        "alembic upgrade head && pytest tests/integration",
        "success",
        "the new refunds migration was applied first; suite green",
    ),
    (
        "Install dependencies of the web dashboard on a new laptop",
        "npm install",
        "failure",
        'npm ERR! ERESOLVE could not resolve: peer react@"^18" from react-dom@18.3.1',
    ),
    (
        "Install the dashboard's npm packages in CI",
        "npm install --legacy-peer-deps",
        "success",
        "resolved; CI build green",
    ),
    (
        "Reinstall the dashboard's node_modules after a rebase",
        "npm install --force",
        "failure",
        "build broke: Invalid hook call, two copies of React",
    ),
    (
        "test_invoice_due_date is flaky in CI",
        "add a retry with pytest-rerunfailures",
        "failure",
        "reruns pass by day, still red in the nightly run at 23:30 UTC",
    ),
    (
        "test_invoice_due_date fails in the nightly build",
        "freeze time with freezegun and use UTC in parse_invoice_date",
        "success",
        "deterministic in the nightly run too",
    ),
    (
        "Build the worker image for the cluster",
        "docker build -t worker .",
        "failure",
        "exec format error on the amd64 nodes: the image was built on an arm64 laptop",
    ),
    (
        "Build the API image on the M2 laptop for staging",
        "docker buildx build --platform linux/amd64 -t api .",
        "success",
        "runs on the amd64 staging nodes",
    ),
    (
        "Build the worker image for the cluster",
        "docker buildx build --platform linux/amd64 -t worker .",
        "success",
        "the worker starts on the cluster",
    ),
    (
        "Worker pods keep restarting after the deploy",
        "kubectl rollout restart deployment/worker",
        "failure",
        "OOMKilled again within a minute: exit code 137",
    ),
    (
        "Worker pods are OOMKilled in production",
        "raise the memory limit of the worker to 1Gi",
        "success",
        "no restarts since",
    ),
]


def _print(args: argparse.Namespace, text: str) -> None:
    if not getattr(args, "json", False):
        print(text, flush=True)


def run_demo(args: argparse.Namespace) -> int:
    """Record, recall, recommend (and consolidate, when lessons are available)."""
    from mimir_core.tools.render import render_hits, render_recommendation

    if not getattr(args, "home", None):
        args.home = str(_fresh_demo_home())
    # The demo store is kept, for `mimir ui --home DIR` to show what was learned.
    started = time.perf_counter()
    m = open_mimir(args, scope="demo-project")
    _print(args, f"Mimir demo — store in {Path(args.home) / 'store'}\n")
    _print(args, "1. Recording what an agent tried, and how it turned out")
    now = datetime.now(timezone.utc)
    items = [
        {
            "task": t,
            "action": a,
            "outcome": o,
            "reason": r,
            "source": "demo",
            "session_id": f"demo-session-{i}",  # each attempt from an agent session of its own
            "created_at": now - timedelta(hours=len(EXPERIENCES) - i),
            "idempotency_key": f"mimir-demo-{i}",  # stable ids: the same lessons every run
        }
        for i, (t, a, o, r) in enumerate(EXPERIENCES)
    ]
    stored = m.record_many(items)
    fails = sum(e.outcome == "failure" for e in stored)
    _print(args, f"   {len(stored)} experiences ({fails} failures) across 6 task families\n")

    query = "the api test suite can't find the orders table"
    hits = m.recall(query, k=3)
    _print(args, f"2. Recall, for a paraphrased question: {query!r}")
    _print(args, _indent(render_hits(hits, query)) + "\n")

    task = "get the payment service's integration suite passing"
    rec = m.recommend(task)
    _print(args, f"3. Recommend, for a new task: {task!r}")
    _print(args, _indent(render_recommendation(rec, task)) + "\n")

    off_topic = "bake a sourdough loaf"
    none = m.recommend(off_topic)
    _print(args, f"4. An off-topic task ({off_topic!r}) gets no recommendation:")
    _print(args, _indent(render_recommendation(none, off_topic)) + "\n")

    lessons_out: Any = _demo_lessons(args, m)

    elapsed = time.perf_counter() - started
    _print(
        args,
        f"Done in {elapsed:.1f} s. The demo store is kept in {args.home}: see what was learned"
        f" with `mimir ui --home {args.home}`, or try"
        f' `mimir recall "docker image won\'t start" --home {args.home}`.',
    )
    emit(
        args,
        {
            "recorded": len(stored),
            "recall": hits,
            "recommendation": rec,
            "off_topic_recommendation": none,
            "lessons": lessons_out,
            "seconds": round(elapsed, 2),
        },
        lambda: "",
    ) if getattr(args, "json", False) else None
    return 0


DEMO_MARK = ".mimir-demo"


def _fresh_demo_home() -> Path:
    """The demo's own store (private, per user, in the temp dir), emptied for a fresh run.

    Only a directory the demo made itself (it holds the marker file) is ever emptied.
    """
    home = Path(tempfile.gettempdir()) / f"mimir-demo-{os.getuid()}"
    if home.is_symlink() or (home.exists() and not (home / DEMO_MARK).is_file()):
        home = Path(tempfile.mkdtemp(prefix="mimir-demo-"))  # not ours: never touch it
    elif home.exists():
        shutil.rmtree(home)
    home.mkdir(mode=0o700, exist_ok=True)
    (home / DEMO_MARK).write_text("made by `mimir demo`; emptied by the next run\n")
    return home


def _demo_lessons(args: argparse.Namespace, m: Any) -> Any:
    """Steps 5-7: consolidate into gated lessons, inject them, trace one to its evidence."""
    from mimir_core.lessons.render import render_detail, render_report

    report = m.consolidate()
    _print(args, "5. Consolidate: rules learned from the evidence, each gated and signed")
    _print(args, _indent(render_report(report, limit=6)) + "\n")
    task = "make the payments api integration tests pass on my machine"
    block = m.context(task)
    _print(args, f"6. The context block an agent gets for {task!r}:")
    _print(args, _indent(block or "(nothing relevant: no block)") + "\n")
    if report.admitted:
        detail = m.lesson_detail(report.admitted[0])
        _print(args, f"7. Every lesson is traceable: mimir show {detail.lesson.id}")
        _print(args, _indent(render_detail(detail)) + "\n")
    return {"report": report, "context": block}


def _indent(text: str) -> str:
    return "\n".join("   " + line for line in text.splitlines())
