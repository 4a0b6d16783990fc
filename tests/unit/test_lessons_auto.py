"""Auto-consolidation: a detached background run after enough failures and time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mimir_core import Mimir
from mimir_core.embed.core import HashEmbedder
from mimir_core.lessons.auto import due, log_path
from mimir_core.settings import MimirSettings

FAILS = [
    ("Run the payments integration tests", "pytest tests/integration", "failure", "UndefinedTable"),
    ("Payments integration tests fail", "pytest tests/integration", "failure", "UndefinedTable"),
    ("Run payments integration tests", "alembic upgrade head && pytest tests/integration",
     "success", "migrated first"),
]  # fmt: skip


def eager(m: Mimir) -> Mimir:
    m.auto_consolidate = True
    m.auto_consolidate_hours = 0.0
    m.auto_consolidate_failures = 2
    return m


def wait_for(path: Path, text: str, timeout: float = 120.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in (content := path.read_text()):
            return content
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared in {path}")


def test_not_due_on_a_fresh_store_or_with_too_few_failures(hash_mimir: Mimir) -> None:
    m = hash_mimir
    m.auto_consolidate = True
    m.record(*FAILS[0][:3], reason=FAILS[0][3])
    assert not due(m.deps)  # the store was created moments ago: not 4 hours yet
    m.auto_consolidate_hours = 0.0
    m.deps.state.auto_checked_at = 0.0
    assert not due(m.deps)  # one failure of five
    m.auto_consolidate_failures = 1
    m.deps.state.auto_checked_at = 0.0
    assert due(m.deps)
    assert not due(m.deps)  # checked a moment ago: throttled


def test_a_capture_starts_a_detached_consolidation(home: Path) -> None:
    m = eager(Mimir(home, embedder="hash"))
    for task, action, outcome, reason in FAILS:
        m.record(task, action, outcome, reason=reason)
    log = wait_for(log_path(home), "consolidated")
    assert "automatic consolidation started" in log
    assert oct(log_path(home).stat().st_mode & 0o777) == "0o600"
    # the run was recorded: the watermark moved and the next check is not due
    deadline = time.monotonic() + 30
    while "lessons.watermark" not in m.store.meta() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert json.loads(m.store.meta()["lessons.watermark"])["count"] == len(FAILS)
    m.deps.state.auto_checked_at = 0.0
    assert not due(m.deps)


def test_an_embedder_a_process_cannot_rebuild_runs_in_a_thread(home: Path) -> None:
    class Custom(HashEmbedder):
        name = "custom-test-embedder"

    m = eager(Mimir(home, embedder=Custom()))
    for task, action, outcome, reason in FAILS:
        m.record(task, action, outcome, reason=reason)
    assert "consolidated" in wait_for(log_path(home), "consolidated")


def test_auto_consolidate_can_be_turned_off(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIMIR_AUTO_CONSOLIDATE", "0")
    m = Mimir(home, embedder="hash")
    assert m.auto_consolidate is False
    m.auto_consolidate_hours, m.auto_consolidate_failures = 0.0, 1
    for task, action, outcome, reason in FAILS:
        m.record(task, action, outcome, reason=reason)
    time.sleep(1.0)
    assert not log_path(home).exists()
    assert MimirSettings().auto_consolidate is False


def test_cli_consolidate_auto_runs_only_when_due(home: Path) -> None:
    env = {**os.environ, "MIMIR_EMBEDDER": "hash"}
    cmd = [sys.executable, "-m", "mimir_integrations.cli", "consolidate", "--auto", "--json",
           "--home", str(home)]  # fmt: skip
    Mimir(home, embedder="hash").record("t", "a", "failure", reason="r")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"ran": False, "reason": "not due"}
    env.update(MIMIR_AUTO_CONSOLIDATE_HOURS="0", MIMIR_AUTO_CONSOLIDATE_FAILURES="1")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["ran"] is True


def test_a_recall_starts_a_due_consolidation_too(home: Path) -> None:
    m = Mimir(home, embedder="hash", auto_consolidate=False)
    for task, action, outcome, reason in FAILS:
        m.record(task, action, outcome, reason=reason)
    assert not log_path(home).exists()  # recorded with auto-consolidation off
    eager(m).recall("payments integration tests")
    assert "consolidated" in wait_for(log_path(home), "consolidated")
