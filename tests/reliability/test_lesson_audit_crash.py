"""A SIGKILL between a lesson write and its head/audit write (review finding 13).

A real process writes three active lessons and is killed (``MIMIR_CRASH_AT``, a real SIGKILL)
right after the rows are written, or right after the heads: the lessons are in the store, served,
with no audit entry. The next consolidation (and ``mimir doctor``) adds the missing audit entries
and heads, and logs them; a second run adds nothing more.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mimir_core import Mimir
from mimir_core.lessons.storage import heads

KEY = "k" * 32
IDS = ["les_0", "les_1", "les_2"]
WRITER = """
import sys
from mimir_core import Mimir
from mimir_core.lessons.lifecycle import Write, insert, write_batch
from mimir_core.types import Lesson

home, how, key = sys.argv[1:4]
m = Mimir(home, embedder="hash", signing_key=key, auto_consolidate=False)
lessons = [
    Lesson(id=f"les_{i}", rule=f"Run `make test-{i}` before pushing.", status="active",
           trigger=f"run the test suite before pushing {i}", kind="prefer",
           action=f"make test-{i}", confidence=0.7)
    for i in range(3)
]
if how == "insert":
    insert(m.deps, lessons, actor="mimir", event="admitted")
else:
    write_batch(m.deps, [Write(le, "admitted") for le in lessons], actor="mimir")
print("not killed")
"""


def opened(home: Path) -> Mimir:
    return Mimir(home, embedder="hash", signing_key=KEY, auto_consolidate=False)


@pytest.mark.parametrize("how", ["insert", "write_batch"])
@pytest.mark.parametrize("point", ["lesson_rows_written", "lesson_heads_written"])
def test_a_kill_before_the_audit_is_reconciled_by_the_next_consolidation(
    home: Path, how: str, point: str
) -> None:
    env = dict(os.environ, MIMIR_CRASH_AT=point)
    proc = subprocess.run(
        [sys.executable, "-c", WRITER, str(home), how, KEY],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    m = opened(home)
    try:
        # the crash window: active, served lessons without an audit trail
        assert sorted(le.id for le in m.list_lessons(status="active")) == IDS
        assert all(m.audit_log(i) == [] for i in IDS)
        assert m.lessons("run the test suite before pushing 1")
        m.consolidate()
        for i in IDS:
            events = [e.event for e in m.audit_log(i)]
            assert events == ["reconciled"], (i, events)
        assert set(heads(m.store, IDS)) == set(IDS)
        log = [json.loads(x) for x in (home / "logs" / "lessons.log").read_text().splitlines()]
        assert sorted(e["lesson"] for e in log if e["event"] == "reconciled") == IDS
        m.consolidate()  # reconciled once: nothing more to add
        assert all(len(m.audit_log(i)) == 1 for i in IDS)
        assert all(m.lesson_detail(i).signature_valid for i in IDS)
    finally:
        m.close()


def test_doctor_reconciles_too(home: Path) -> None:
    env = dict(os.environ, MIMIR_CRASH_AT="lesson_rows_written")
    proc = subprocess.run(
        [sys.executable, "-c", WRITER, str(home), "insert", KEY],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    from mimir_core.ops.doctor import run_checks

    m = opened(home)
    try:
        check = next(c for c in run_checks(m) if c["check"] == "lessons")
        assert check["ok"] and "added 3 audit" in str(check["detail"]), check
        assert all([e.event for e in m.audit_log(i)] == ["reconciled"] for i in IDS)
    finally:
        m.close()
