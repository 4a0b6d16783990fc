"""Background upkeep for long-lived processes (``mimir_core.hosting.background.Maintainer``)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest

from mimir_core import Mimir
from mimir_core.hosting.background import Maintainer
from mimir_core.ingest import spool


def spooled(m: Mimir, key: str, outcome: str = "failure") -> None:
    spool.append(
        m.spool_dir,
        {
            "task": "deploy the billing service",
            "action": f"helm upgrade billing ./chart #{key}",
            "outcome": outcome,
            "reason": "ImagePullBackOff",
            "source": "claude-code",
            "idempotency_key": f"hook:{key}",
        },
    )


def test_a_round_drains_the_spool(hash_mimir: Any) -> None:
    spooled(hash_mimir, "1")
    spooled(hash_mimir, "2")
    maint = Maintainer(lambda: hash_mimir, consolidate=False)
    assert maint.run_once() == {"ingested": 2}
    assert {e.source for e in hash_mimir.recent(5)} == {"claude-code"}
    assert maint.run_once() == {}  # nothing pending: not even a drain


def test_a_round_consolidates_when_due(hash_mimir: Any) -> None:
    maint = Maintainer(lambda: hash_mimir)
    assert maint.run_once() == {}  # a new store: not due for auto_consolidate_hours
    hash_mimir.auto_consolidate_hours = 0.0
    hash_mimir.auto_consolidate_failures = 2
    hash_mimir.auto_consolidate = False  # no consolidation started by record() itself
    for i in range(2):
        hash_mimir.record("run the tests", f"pytest -k case{i}", "failure", reason="boom")
    hash_mimir.auto_consolidate = True
    hash_mimir.deps.state.auto_checked_at = 0.0
    assert maint.run_once() == {"consolidated": True} and maint.rounds == 2
    hash_mimir.deps.state.auto_checked_at = 0.0
    assert maint.run_once() == {}  # nothing new since that run
    assert Maintainer(lambda: hash_mimir, consolidate=False).run_once() == {}


def test_the_thread_warms_up_and_keeps_going(home: Path) -> None:
    made: list[Mimir] = []

    def factory() -> Mimir:
        made.append(Mimir(home, embedder="hash"))
        return made[-1]

    maint = Maintainer(factory, interval=0.05, settle=0.0)
    assert not maint.started and made == []  # nothing is built before it is needed
    maint.start()
    maint.start()  # once
    deadline = time.monotonic() + 60
    while maint.rounds < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    maint.stop()
    assert maint.rounds >= 3 and len(made) == 1
    assert made[0].deps.loaded == {"store", "embedder"}  # warmed up


def test_failures_are_logged_once_and_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> Mimir:
        raise RuntimeError("no store here")

    maint = Maintainer(broken, interval=0.01, settle=0.0)
    with caplog.at_level(logging.WARNING, logger="mimir.background"):
        maint.start()
        time.sleep(0.5)
        maint.stop()
    warnings = [r.getMessage() for r in caplog.records]
    assert "background warm-up failed: RuntimeError: no store here" in warnings
    assert warnings.count("background upkeep failed: RuntimeError: no store here") == 1
