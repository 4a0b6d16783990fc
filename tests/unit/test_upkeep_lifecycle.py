"""The upkeep thread's lifecycle: it ends with its store, and it never runs on a table that is
being dropped or replaced (a LanceDB call on one crashed the whole test run)."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from pathlib import Path

import pytest

from mimir_core import Mimir
from mimir_core.embed.core import HashEmbedder
from mimir_core.store import upkeep
from mimir_core.store.core import COMPACT_FRAGMENTS, EXPERIENCES, Store


class OtherEmbedder(HashEmbedder):
    """Another model, so that a reindex replaces every table."""

    name = "hash-other-lifecycle"

    def __init__(self) -> None:
        super().__init__(dim=96)


def _upkeep_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "mimir-upkeep")


def _until(cond: object, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


def test_stores_closed_or_dropped_leave_no_upkeep_thread_behind(tmp_path: Path) -> None:
    before = _upkeep_threads()
    stores: list[weakref.ref[Store]] = []
    for i in range(8):
        m = Mimir(tmp_path / f"home{i}", embedder="hash", auto_consolidate=False)
        m.record(f"task {i}", "act", "success")  # asks for upkeep: starts the thread
        assert m.store.upkeep._thread is not None
        stores.append(weakref.ref(m.store))
        if i % 2:
            m.close()  # closed: its thread is ended and joined before close returns
            assert _upkeep_threads() <= before + i
        del m  # the others only dropped: collected, their thread ends
    gc.collect()
    # a thread idle for 30 s used to hold its store (and stay alive) until it gave up
    assert _until(lambda: _upkeep_threads() <= before), _upkeep_threads()
    gc.collect()
    assert all(ref() is None for ref in stores)


def test_close_finishes_pending_upkeep_and_the_mimir_opens_again(home: Path) -> None:
    m = Mimir(home, embedder="hash", auto_consolidate=False)
    for i in range(COMPACT_FRAGMENTS + 2):
        m.record(f"task {i}", "act", "success")
    store = m.store
    m.close()
    assert store.upkeep._thread is None  # ended and joined before close returned
    assert store.fragments(EXPERIENCES) < COMPACT_FRAGMENTS  # the pending compaction ran
    m.close()  # twice is fine
    assert m.stats().experiences == COMPACT_FRAGMENTS + 2
    assert m.store is not store
    m.close()


def test_a_reindex_waits_for_upkeep_in_progress_and_loses_no_row(
    home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    n = COMPACT_FRAGMENTS + 2
    writer = Mimir(home, embedder="hash", auto_consolidate=False)
    started, swapping = threading.Event(), threading.Event()
    spans: dict[str, list[tuple[float, float]]] = {"upkeep": [], "swap": []}
    store = writer.store
    real_compact = store._compact_tail

    def slow_compact(name: str) -> None:  # runs on writer's upkeep thread
        t0 = time.monotonic()
        started.set()
        swapping.wait(2)  # until the reindex swaps a table (it must not, while this runs)
        try:
            real_compact(name)
        finally:
            spans["upkeep"].append((t0, time.monotonic()))

    monkeypatch.setattr(store, "_compact_tail", slow_compact)
    real_replace = Store.replace_table

    def timed_replace(self: Store, name: str, rows: object) -> None:
        t0 = time.monotonic()
        swapping.set()
        real_replace(self, name, rows)  # type: ignore[arg-type]
        spans["swap"].append((t0, time.monotonic()))

    monkeypatch.setattr(Store, "replace_table", timed_replace)
    for i in range(n):
        writer.record(f"task {i} of module m{i}", f"fix {i}", "success")
    assert started.wait(30)
    before = store.table(EXPERIENCES)

    other = Mimir(home, embedder=OtherEmbedder(), auto_consolidate=False)
    assert other.reindex() == n  # another store object on the same location

    assert store.upkeep.wait(30)
    (_up_start, up_end), *_ = spans["upkeep"]
    assert spans["swap"] and all(start >= up_end for start, _end in spans["swap"])
    assert not [r for r in caplog.records if "optimize of" in r.getMessage()]
    assert other.stats().experiences == n
    assert [h.experience.action for h in other.recall("task 3 of module m3", k=1)] == ["fix 3"]
    # the writer's store drops its table objects of the dropped tables, and sees the new ones
    assert store.table(EXPERIENCES) is not before
    assert store.count(EXPERIENCES) == n
    writer.close()
    other.close()


def test_paused_awaits_the_run_in_progress_and_holds_pending_runs_until_it_ends() -> None:
    ran: list[str] = []
    inside = threading.Event()
    release = threading.Event()

    def run(table: str) -> None:
        ran.append(table)
        if table == "slow":
            inside.set()
            release.wait(10)

    key = "test://paused-location"
    up = upkeep.Upkeep(run, key=key)
    up.request("slow")
    assert inside.wait(10)
    entered = threading.Event()

    def pauser() -> None:
        with upkeep.paused(key):
            entered.set()
            up.request("later")
            time.sleep(0.3)
            assert ran == ["slow"]  # nothing runs inside the pause

    t = threading.Thread(target=pauser)
    t.start()
    assert not entered.wait(0.3)  # the pause waits for the run in progress
    release.set()
    assert entered.wait(10)
    t.join(10)
    assert up.wait(10)
    assert ran == ["slow", "later"]
    assert upkeep.generation(key) >= 1
    up.stop(5)
    assert not up.alive
    up.request("ignored")  # a stopped upkeep takes no more requests
    assert not up.alive and ran == ["slow", "later"]


def test_single_writes_do_not_fill_the_caches_with_old_versions_metadata(
    hash_mimir: Mimir,
) -> None:
    # each single write's version added ~45 KB of metadata to each of the store's two LanceDB
    # sessions, never read again: ~20 MB after 250 writes at the former 32 MB cap
    m = hash_mimir
    for i in range(250):
        m.record(f"task {i} about module {i % 7}", f"action {i}", "success")
    store = m.store
    held = store.session.size_bytes() + store.db_session.size_bytes
    assert held < 12 * 2**20, f"{held / 2**20:.1f} MB"
