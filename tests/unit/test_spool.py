"""The capture spool: single-write appends, exactly-once drains, corrupt lines set aside."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from mimir_core.ingest import spool


def rec(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "task": f"run the integration suite {i}",
        "action": f"pytest -k case{i}",
        "outcome": "failure" if i % 2 else "success",
        "reason": f"AssertionError in case{i}" if i % 2 else "",
        "source": "claude-code",
        "idempotency_key": f"test:{i}",
        **extra,
    }


def test_spool_dir_is_per_store(tmp_path: Path) -> None:
    local = spool.spool_dir(tmp_path)
    assert local == tmp_path / "spool" / "local"
    assert spool.spool_dir(tmp_path, str(tmp_path / "store")) == local
    assert spool.spool_dir(tmp_path, str(tmp_path / "store") + "/") == local
    s3 = spool.spool_dir(tmp_path, "s3://bucket/mimir")
    other = spool.spool_dir(tmp_path, str(tmp_path / "elsewhere"))
    assert len({local, s3, other}) == 3 and s3.parent == local.parent


def test_append_writes_private_lines_under_4kb(tmp_path: Path) -> None:
    d = tmp_path / "spool"
    huge = rec(1, reason="x" * 50_000, context={"out": "é" * 20_000, "n": 3})
    spool.append(d, huge)
    spool.append(d, rec(2))
    raw = (d / spool.PENDING).read_bytes().splitlines(keepends=True)
    assert len(raw) == 2 and all(len(line) <= spool.MAX_LINE for line in raw)
    got = spool.records(raw)
    assert got[0]["idempotency_key"] == "test:1" and got[0]["context"]["n"] == 3
    assert got[0]["reason"].startswith("xxx") and got[1] == rec(2)
    assert (d / spool.PENDING).stat().st_mode & 0o777 == 0o600
    assert d.stat().st_mode & 0o777 == 0o700


def test_drain_ingests_everything_once_and_removes_the_batch(tmp_path: Path) -> None:
    d = tmp_path / "spool"
    for i in range(25):
        spool.append(d, rec(i))
    assert spool.has_pending(d)
    seen: list[list[dict[str, Any]]] = []
    report = spool.drain(d, seen.append, chunk=10)
    assert report.ingested == 25 and report.rejected == 0 and report.batches == 1
    assert [len(c) for c in seen] == [10, 10, 5]
    assert [r["idempotency_key"] for c in seen for r in c] == [f"test:{i}" for i in range(25)]
    assert not spool.has_pending(d)
    assert sorted(p.name for p in d.iterdir()) == [spool.LOCK, "lost.count"]  # see lost.py
    assert spool.drain(d, seen.append).ingested == 0


def test_corrupt_lines_are_set_aside_and_counted(tmp_path: Path) -> None:
    d = tmp_path / "spool"
    spool.append(d, rec(1))
    with open(d / spool.PENDING, "ab") as fh:
        fh.write(b'{"v": 1, "record": {"task": "torn li\n')  # a torn line
        fh.write(b"not json at all\n")
        fh.write(b'{"v": 1, "record": {"task": "no key"}}\n')
        fh.write(b'{"v": 99, "record": {"idempotency_key": "k"}}\n')
        fh.write(b"\n")
    spool.append(d, rec(2, outcome="exploded"))  # valid JSON, invalid record
    spool.append(d, rec(3))

    def ingest(items: list[dict[str, Any]]) -> None:
        for item in items:
            if item["outcome"] not in ("success", "failure"):
                raise ValueError(f"outcome: bad {item['outcome']!r}")
        stored.extend(items)

    stored: list[dict[str, Any]] = []
    report = spool.drain(d, ingest)
    assert [s["idempotency_key"] for s in stored] == ["test:1", "test:3"]
    assert report.ingested == 2 and report.rejected == 5
    assert spool.rejected_count(d) == 5
    lines = [json.loads(x) for x in (d / spool.REJECTED).read_text().splitlines()]
    assert any("exploded" in x["reason"] for x in lines)
    assert any("not JSON" in x["reason"] for x in lines)
    assert (d / spool.REJECTED).stat().st_mode & 0o777 == 0o600


def test_a_store_failure_keeps_the_batch_for_the_next_drain(tmp_path: Path) -> None:
    d = tmp_path / "spool"
    for i in range(3):
        spool.append(d, rec(i))

    def broken(items: list[dict[str, Any]]) -> None:
        raise OSError("disk on fire")

    with pytest.raises(OSError):
        spool.drain(d, broken)
    assert spool.has_pending(d) and not (d / spool.PENDING).exists()
    spool.append(d, rec(3))  # a hook appends meanwhile
    got: list[dict[str, Any]] = []
    report = spool.drain(d, got.extend)
    assert report.ingested == 4 and report.batches == 2
    assert sorted(r["idempotency_key"] for r in got) == [f"test:{i}" for i in range(4)]


def test_recall_sees_what_was_captured_a_moment_ago(hash_mimir: Any) -> None:
    m = hash_mimir
    spool.append(m.spool_dir, rec(7, task="rotate the staging TLS certificate"))
    hits = m.recall("rotate the staging TLS certificate", scope="*")
    assert hits and hits[0].experience.action == "pytest -k case7"
    assert hits[0].experience.source == "claude-code"
    assert not spool.has_pending(m.spool_dir)


def test_ingest_rejects_bad_records_but_stores_the_rest(hash_mimir: Any) -> None:
    m = hash_mimir
    spool.append(m.spool_dir, rec(1))
    spool.append(m.spool_dir, rec(2, outcome="exploded"))
    spool.append(m.spool_dir, rec(3, score=7))
    report = m.ingest()
    assert report.ingested == 1 and report.rejected == 2
    assert m.stats().experiences == 1


def _preempted(m: Any, monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """Make the next ``times`` compactions of the experiences table fail as LanceDB does when
    a concurrent write preempts the rewrite (seen in the kill -9 test's drainer)."""
    real, calls = m.store._compact, []

    def compact(name: str) -> None:
        if name != "experiences":
            return real(name)
        calls.append(1)
        if len(calls) <= times:
            raise RuntimeError(
                "lance error: Retryable commit conflict for version 9: This Rewrite "
                "transaction was preempted by concurrent transaction Update at version 9"
            )
        real(name)

    monkeypatch.setattr(m.store, "_compact", compact)
    return calls


def test_a_preempted_compaction_does_not_fail_the_drain(
    hash_mimir: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    m = hash_mimir
    m.record(**rec(0))
    calls = _preempted(m, monkeypatch, times=99)
    for i in (1, 2):
        spool.append(m.spool_dir, rec(i))
    report = m.ingest(compact=True)  # raised RuntimeError before, the records already stored
    assert report.ingested == 2 and len(calls) == 3  # tried, retried, then left for later
    assert m.stats().experiences == 3 and not spool.has_pending(m.spool_dir)
    assert "optimize of experiences failed" in caplog.text


def test_compaction_is_retried_when_preempted_then_raises_a_store_error(
    hash_mimir: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mimir_core.errors import StoreError

    m = hash_mimir
    m.record(**rec(0))
    calls = _preempted(m, monkeypatch, times=2)
    m.compact()
    assert len(calls) == 3
    calls = _preempted(m, monkeypatch, times=99)
    with pytest.raises(StoreError, match=r"cannot write table experiences.*commit conflict"):
        m.store.optimize("experiences")


_DRAINER = """
import sys, time
from pathlib import Path
from mimir_core import Mimir
from mimir_core.ingest import spool
m = Mimir(sys.argv[1], embedder="hash")
marker = Path(sys.argv[2])
def ingest(items):
    m.record_many(items)
    marker.write_text("one chunk stored")
    time.sleep(60)  # killed here, mid-drain
spool.drain(m.spool_dir, ingest, chunk=40)
"""


def test_drain_is_exactly_once_under_kill_9(tmp_path: Path) -> None:
    from mimir_core import Mimir

    home = tmp_path / "home"
    m = Mimir(home, embedder="hash")
    for i in range(120):
        spool.append(m.spool_dir, rec(i))
    marker = tmp_path / "marker"
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_DRAINER), str(home), str(marker)],
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 180
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert m.stats().experiences == 40  # the first chunk, and the batch file is still there
    assert spool.has_pending(m.spool_dir)
    report = m.ingest()
    assert report.ingested == 120 and report.rejected == 0
    assert m.stats().experiences == 120
    keys = m.store.column("experiences", ["idem_key"]).column("idem_key").to_pylist()
    assert sorted(keys) == sorted(f"test:{i}" for i in range(120))  # none lost, none twice
    assert not spool.has_pending(m.spool_dir)
    m.close()


@pytest.mark.parametrize("drain_at", ["after_open", "before_write"])
def test_a_drain_racing_an_append_never_loses_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, drain_at: str
) -> None:
    """A drain that sets the file aside while a writer is between opening it and writing must
    not lose the writer's line (the writer would otherwise write into a file already read)."""
    import fcntl
    import threading

    d = tmp_path / "spool"
    spool.append(d, rec(0))
    got: list[str] = []

    def ingest(items: list[dict[str, Any]]) -> None:
        got.extend(r["idempotency_key"] for r in items)

    drain = threading.Thread(target=spool.drain, args=(d, ingest))
    real_flock, real_write = fcntl.flock, os.write

    def flock_then_drain(fd: int, op: int) -> None:
        # The writer has opened the file but not locked it: a whole drain runs now.
        if op == fcntl.LOCK_EX and not drain.is_alive() and drain.ident is None:
            drain.start()
            drain.join(timeout=10)
        real_flock(fd, op)

    def drain_then_write(fd: int, data: bytes) -> int:
        # The writer holds its lock and checked the name, but has not written yet.
        if b"test:1" in data and drain.ident is None:
            drain.start()
            time.sleep(0.3)  # the drain has set the file aside and waits for this writer
        return real_write(fd, data)

    if drain_at == "after_open":
        monkeypatch.setattr(fcntl, "flock", flock_then_drain)
    else:
        monkeypatch.setattr(os, "write", drain_then_write)
    spool.append(d, rec(1))
    monkeypatch.undo()
    drain.join(timeout=10)
    spool.drain(d, ingest)
    assert sorted(got) == ["test:0", "test:1"]
