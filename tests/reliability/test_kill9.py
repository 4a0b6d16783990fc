"""Kill -9 of a writer, a hook, a drainer and a consolidator at random moments, many times.

They all work on one store at once (``kill9_driver.py``); after every kill the role starts again.
Afterwards: the store opens and its tables are intact, every acknowledged record is stored
exactly once, the spool resumes (a final drain completes and nothing is left pending; lines set
aside are counted), and consolidation still runs. ``MIMIR_KILL9_KILLS`` (kills per role,
default 10) and ``MIMIR_KILL9_SEED`` make a longer or different run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from mimir_core import Mimir
from mimir_core.ingest import spool
from mimir_core.store.integrity import store_health

DRIVER = Path(__file__).with_name("kill9_driver.py")
KILLS = int(os.environ.get("MIMIR_KILL9_KILLS", "10"))
SEED = int(os.environ.get("MIMIR_KILL9_SEED", "9"))


def test_kill_9_loses_nothing_duplicates_nothing_and_the_spool_resumes(
    home: Path, record_property: pytest.RecordProperty
) -> None:
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(home), str(KILLS), str(SEED)],
        capture_output=True,
        text=True,
        timeout=600 + 20 * KILLS,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads(proc.stdout.splitlines()[-1])
    assert not run["errors"] and not any(run["crashed"].values()), run["errors"]
    assert all(n >= KILLS for n in run["killed"].values()), run["killed"]

    assert all(h.ok for h in store_health(home / "store")), store_health(home / "store")
    m = Mimir(home, embedder="hash", auto_consolidate=False)
    final = m.ingest()  # the spool resumes where the kills left it
    directory = m.spool_dir
    assert not spool.has_pending(directory)
    set_aside = spool.rejected_count(directory)
    keys = m.store.column("experiences", ["idem_key"]).column("idem_key").to_pylist()
    counts = Counter(keys)
    duplicated = sorted(k for k, n in counts.items() if n > 1)
    acked = run["acked_writer"] + run["acked_hook"]
    lost = sorted(set(acked) - set(counts))
    lessons = m.store.column("lessons", ["id"]).column("id").to_pylist()
    figures = {
        "kills": sum(run["killed"].values()),
        "kills_by_role": run["killed"],
        "acknowledged": len(acked),
        "stored": len(keys),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "set_aside": set_aside,
        "final_drain": final.ingested,
        "drains": run["drains"],
        "consolidations": run["consolidations"],
        "lessons": len(lessons),
        "seconds": run["seconds"],
    }
    record_property("kill9", figures)
    print("kill -9 figures:", json.dumps(figures))
    assert acked and run["acked_hook"], "nothing was acknowledged: the roles never got to work"
    assert not lost, lost[:10]
    assert not duplicated, duplicated[:10]
    assert len(lessons) == len(set(lessons))
    assert run["consolidations"] and run["drains"]  # both ran to the end after earlier kills
    assert set_aside == 0  # a SIGKILL never tears a single O_APPEND write
    m.close()
