"""``mimir demo``: the whole loop in under a minute, on a temporary store unless ``--home``."""

from __future__ import annotations

import argparse
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
]


def _print(args: argparse.Namespace, text: str) -> None:
    if not getattr(args, "json", False):
        print(text, flush=True)


def run_demo(args: argparse.Namespace) -> int:
    """Record, recall, recommend (and consolidate, when lessons are available)."""
    from mimir_core.render import render_hits, render_recommendation

    temp: str | None = None
    if not getattr(args, "home", None):
        temp = tempfile.mkdtemp(prefix="mimir-demo-")
        args.home = temp
    try:
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
                "created_at": now - timedelta(hours=len(EXPERIENCES) - i),
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

        lessons_out: Any = None
        consolidate = getattr(m, "consolidate", None)
        if callable(consolidate):
            report = consolidate()
            lessons_out = report
            _print(args, "5. Consolidated lessons")
            _print(args, _indent(str(report)) + "\n")

        elapsed = time.perf_counter() - started
        _print(
            args,
            f'Done in {elapsed:.1f} s. Try: mimir recall "docker image won\'t start" --home DIR',
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
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


def _indent(text: str) -> str:
    return "\n".join("   " + line for line in text.splitlines())
