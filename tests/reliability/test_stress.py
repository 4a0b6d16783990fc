"""Load and concurrency: many real processes write and read one store at once.

Eight writers run at the same time against one Mimir home, each a real process, while
``mimir consolidate`` runs in a loop beside them:

* two Claude Code hook drivers and one Cline hook driver, each starting the real
  ``mimir hook <host>`` command once per event (records go through the capture spool);
* two real ``mimir mcp`` servers, each driven over stdio by the MCP SDK's client (their reads
  and their upkeep thread drain the hooks' spool);
* a LangGraph app whose node records through ``MimirMemoryNode``;
* two API writers (``Mimir.record`` / ``record_many`` with idempotency keys, re-sending some).

Each writer reports what it got acknowledged (ids, idempotency keys). Afterwards: every
acknowledged record is stored exactly once (by id and by key) and nothing else is; no spool line
was rejected or left behind; no hook logged an error; recall finds a sample of the records; every
lesson consolidation made verifies its signature and points only at stored experiences; a fresh
process opens the store and every table reads in full.

The same runs on object storage (moto's S3 server on 127.0.0.1) with fewer records: the hooks
spool locally (``<home>/spool/<hash of the URI>``), the drains write to S3.

Size: ``MIMIR_STRESS_N`` records per writer (default 40; the issue's figure is 500) and
``MIMIR_STRESS_N_S3`` on S3 (default 10). The hash embedder keeps the model out of it.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")
pytest.importorskip("langgraph", reason="the langgraph extra is not installed")

from mimir_core import Mimir
from mimir_core.ingest import spool
from mimir_core.ingest.validate import id_for_key
from mimir_core.lessons.sign import load_or_create_key
from mimir_core.lessons.storage import from_row, select_rows
from mimir_core.store.core import EXPERIENCES, TABLES
from tests.s3_server import moto_s3, moto_server

N = int(os.environ.get("MIMIR_STRESS_N", "40"))
N_S3 = int(os.environ.get("MIMIR_STRESS_N_S3", "10"))
BIN = Path(sys.executable).parent
WORKERS = Path(__file__).resolve().with_name("stress_workers.py")
#: (kind, tag): tags are letters only, so that ``stk<tag>x0042`` is one full-text token.
WRITERS = [
    ("claude-code", "cca"),
    ("claude-code", "ccb"),
    ("cline", "cla"),
    ("mcp", "mca"),
    ("mcp", "mcb"),
    ("langgraph", "lga"),
    ("api", "apa"),
    ("api", "apb"),
]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(max(600, N * 6))]


def _env(home: Path, store: dict[str, Any] | None) -> dict[str, str]:
    env = {
        **os.environ,
        "MIMIR_HOME": str(home),
        "MIMIR_EMBEDDER": "hash",
        "MIMIR_AUTO_CONSOLIDATE": "0",
        "MIMIR_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(WORKERS.parents[2]),
    }
    if store:
        env["MIMIR_STORE_URI"] = store["uri"]
        env["MIMIR_STORAGE_OPTIONS"] = json.dumps(store["options"])
        env["AWS_ACCESS_KEY_ID"] = store["options"]["aws_access_key_id"]
        env["AWS_SECRET_ACCESS_KEY"] = store["options"]["aws_secret_access_key"]
    return env


def _open(home: Path, store: dict[str, Any] | None) -> Mimir:
    if store:
        return Mimir(
            home,
            store_uri=store["uri"],
            storage_options=store["options"],
            embedder="hash",
            auto_consolidate=False,
        )
    return Mimir(home, embedder="hash", auto_consolidate=False)


def _start(kind: str, tag: str, n: str, out: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKERS), kind, tag, n, str(out)],
        env=env,
        cwd=str(out.parent),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_stress(tmp: Path, n: int, store: dict[str, Any] | None = None) -> dict[str, Any]:
    home = tmp / "home"
    env = _env(home, store)
    m = _open(home, store)
    m.stats()  # the store exists before the writers race to open it
    m.close()

    stop = tmp / "stop"
    started = time.monotonic()
    consolidator = _start("consolidate", "-", str(stop), tmp / "consolidate.json", env)
    procs = {tag: _start(kind, tag, str(n), tmp / f"{tag}.json", env) for kind, tag in WRITERS}
    errors = {}
    for tag, proc in procs.items():
        _out, err = proc.communicate(timeout=max(600, n * 6))
        if proc.returncode != 0:
            errors[tag] = err[-3000:]
    writers_s = time.monotonic() - started
    stop.touch()
    _out, err = consolidator.communicate(timeout=600)
    assert not errors, f"writers failed: {errors}"
    assert consolidator.returncode == 0, err[-3000:]
    summary = verify(tmp, n, store)
    summary["writers_wall_s"] = round(writers_s, 1)
    print("stress summary:", json.dumps(summary))
    return summary


def verify(tmp: Path, n: int, store: dict[str, Any] | None) -> dict[str, Any]:
    """Check the store after a run (see the module doc); returns the run's figures."""
    home = tmp / "home"
    env = _env(home, store)
    cons = json.loads((tmp / "consolidate.json").read_text())
    assert not cons["failed"], f"consolidation failed concurrently: {cons['failed'][:2]}"
    assert cons["runs"] >= 1, "consolidation never ran while the writers ran"

    acked = {tag: json.loads((tmp / f"{tag}.json").read_text()) for _k, tag in WRITERS}
    m = _open(home, store)
    report = m.ingest()  # what the hooks spooled after the servers' last drain
    assert report.rejected == 0, report.reasons
    assert not spool.has_pending(m.spool_dir)
    assert spool.rejected_count(m.spool_dir) == 0, (m.spool_dir / spool.REJECTED).read_text()[:2000]
    hooks_log = home / "logs" / "hooks.log"
    assert not hooks_log.exists() or not hooks_log.read_text().strip(), hooks_log.read_text()[:3000]

    # Every acknowledged record exactly once, and nothing else.
    rows = m.store.column(EXPERIENCES, ["id", "idem_key"]).to_pylist()
    by_id = Counter(r["id"] for r in rows)
    by_key = Counter(r["idem_key"] for r in rows)
    assert max(by_id.values()) == 1, [i for i, c in by_id.items() if c > 1][:10]
    assert max(by_key.values()) == 1, [k for k, c in by_key.items() if c > 1][:10]
    want: dict[str, str] = {}  # id -> the writer that got it acknowledged
    for tag, got in acked.items():
        assert len(got["ids"]) + (len(got["keys"]) if not got["ids"] else 0) == n, tag
        for key in got["keys"]:
            assert by_key.get(key) == 1, f"{tag}: acknowledged key {key} stored {by_key.get(key)}x"
            want[id_for_key(key)] = tag
        for ident in got["ids"]:
            assert by_id.get(ident) == 1, (
                f"{tag}: acknowledged id {ident} stored {by_id.get(ident)}x"
            )
            want[ident] = tag
    assert len(want) == len(WRITERS) * n
    assert set(by_id) == set(want), f"{len(set(by_id) - set(want))} records nobody acknowledged"

    # Recall finds a sample of them (each writer's records carry a unique token).
    rng = random.Random(9)
    for kind, tag in WRITERS:
        for i in rng.sample(range(n), 2):
            tok = f"stk{tag}x{i:04d}"
            hits = m.recall(tok, k=5, scope="*")
            assert any(tok in f"{h.experience.task} {h.experience.action}" for h in hits), (
                kind,
                tok,
                [(h.experience.task, h.experience.action) for h in hits],
            )

    # Lessons: every one verifies and points only at stored experiences.
    key = load_or_create_key(home)
    lessons = [from_row(r, key) for r in select_rows(m.store, None)]
    for lesson, verified in lessons:
        assert verified, f"lesson {lesson.id} fails its signature check"
        dangling = set(lesson.supporting_ids + lesson.contradicting_ids) - set(by_id)
        assert not dangling, f"lesson {lesson.id} cites missing experiences {sorted(dangling)[:5]}"

    # The store opens cleanly in a fresh process and every table reads in full.
    for name in TABLES:
        m.store.table(name).to_arrow()
    proc = subprocess.run(
        [str(BIN / "mimir"), "stats", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["experiences"] == len(want)

    summary = {
        "store": store["uri"] if store else "local",
        "writers": len(WRITERS),
        "records_per_writer": n,
        "records": len(want),
        "hook_processes": sum(
            n + 2 + 2 * (n // 5) if kind == "claude-code" else n + 1
            for kind, _t in WRITERS
            if kind in ("claude-code", "cline")
        ),
        "consolidations": cons["runs"],
        "lessons": len(lessons),
        "active_lessons": sum(le.status == "active" for le, _ok in lessons),
        "reads": sum(a["reads"] for a in acked.values()),
        "lock_timeouts_retried": sum(a.get("lock_timeouts", 0) for a in acked.values()),
        "lost": 0,
        "duplicated": 0,
    }
    return summary


def test_eight_writers_and_consolidation_share_one_store(tmp_path: Path) -> None:
    run_stress(tmp_path, N)


# -- object storage ------------------------------------------------------------------------------


@pytest.fixture
def s3() -> Iterator[dict[str, str]]:
    exe = moto_server()
    if exe is None:
        pytest.skip("moto_server is not installed")
    with moto_s3("mimir-stress", exe=exe) as options:
        yield options


def test_the_same_on_object_storage(tmp_path: Path, s3: dict[str, str]) -> None:
    store = {"uri": "s3://mimir-stress/team-memory", "options": s3}
    summary = run_stress(tmp_path, N_S3, store)
    home = tmp_path / "home"
    # The hooks spooled beside the home, under the URI's own spool directory, not into "local".
    assert spool.spool_dir(home, store["uri"]).name != "local"
    assert not (home / "spool" / "local" / spool.PENDING).exists()
    assert not (home / "store").exists(), "an S3 store must not write a local store"
    assert summary["records"] == len(WRITERS) * N_S3
