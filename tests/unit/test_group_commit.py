"""The write path: group commit, no read-back, upkeep off the caller's path."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mimir_core import Mimir
from mimir_core.store.core import EXPERIENCES
from mimir_core.store.group_commit import GroupCommit


def test_threads_writing_at_once_share_commits_and_each_gets_its_own_rows(
    hash_mimir: Mimir,
) -> None:
    m = hash_mimir
    m.record("warm the store", "open it", "success")
    store = m.store
    group_before = store._groups[(EXPERIENCES, "idem_key")].commits
    n_threads, per = 8, 6
    got: dict[int, list[Any]] = {}
    start = threading.Barrier(n_threads)

    def writer(t: int) -> None:
        start.wait()
        got[t] = [m.record(f"thread {t} task {i}", f"act {i}", "success") for i in range(per)]

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    commits = store._groups[(EXPERIENCES, "idem_key")].commits - group_before
    assert commits < n_threads * per  # writers that met shared a commit
    assert m.stats().experiences == 1 + n_threads * per
    for t, exps in got.items():
        assert [e.task for e in exps] == [f"thread {t} task {i}" for i in range(per)]
        stored = {e.id: e for e in m.deps.get_many([e.id for e in exps])}
        assert all(stored[e.id] == e for e in exps)


def test_a_shared_key_written_by_two_threads_at_once_is_stored_once(hash_mimir: Mimir) -> None:
    m = hash_mimir
    m.record("warm the store", "open it", "success")
    results: list[Any] = []
    start = threading.Barrier(6)

    def writer(t: int) -> None:
        start.wait()
        results.append(m.record(f"attempt {t}", "same", "failure", idempotency_key="one-key"))

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len({e.id for e in results}) == 1
    assert len({e.task for e in results}) == 1  # every caller gets the one stored
    assert m.stats().experiences == 2


def test_what_record_returns_is_what_a_read_returns(hash_mimir: Mimir) -> None:
    # record builds its answer from the row it wrote instead of reading it back
    m = hash_mimir
    exp = m.record(
        "deploy the api",
        "kubectl apply -f api.yaml",
        "partial",
        score=0.3333333,
        reason="one pod crashed",
        context={"cluster": "eu-1", "tries": 2, "nested": {"a": [1, 2]}},
        scope="proj",
        session_id="s1",
        thread_id="t1",
        recalled_lesson_ids=["l1", "l2"],
        created_at="2024-05-01T10:00:00.123456+00:00",
    )
    assert exp == m.get(exp.id)
    keyed = m.record("deploy", "helm", "success", idempotency_key="k-1")
    assert keyed == m.get(keyed.id)
    again = m.record("something else", "other", "failure", idempotency_key="k-1")
    assert again == keyed  # the stored one, read back


def test_a_write_is_visible_to_another_process_when_record_returns(hash_mimir: Mimir) -> None:
    m = hash_mimir
    exp = m.record("rotate the zqxwv credentials", "vault write", "failure", reason="denied")
    reader = (
        "import sys; from mimir_core import Mimir\n"
        "m = Mimir(sys.argv[1], embedder='hash')\n"
        "hits = m.recall('rotate the zqxwv credentials', k=3)\n"
        "print(m.get(sys.argv[2]).task, any(h.experience.id == sys.argv[2] for h in hits))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", reader, str(m.home), exp.id],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.split() == ["rotate", "the", "zqxwv", "credentials", "True"]


def test_upkeep_runs_on_its_own_thread_not_the_writers(
    hash_mimir: Mimir, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = hash_mimir
    store = m.store
    seen: list[str] = []
    real = store._compact_tail

    def watched(name: str) -> None:
        seen.append(threading.current_thread().name)
        time.sleep(0.3)  # a slow upkeep must not slow the write that asked for it
        real(name)

    monkeypatch.setattr(store, "_compact_tail", watched)
    from mimir_core.store.core import COMPACT_FRAGMENTS

    slowest = 0.0
    for i in range(COMPACT_FRAGMENTS + 4):
        t0 = time.perf_counter()
        m.record(f"task {i}", f"action {i}", "success")
        slowest = max(slowest, time.perf_counter() - t0)
    assert store.upkeep.wait(60)
    assert seen and set(seen) == {"mimir-upkeep"}
    assert slowest < 0.3


def test_a_failed_commit_fails_every_writer_in_it_and_the_next_commit_goes_on() -> None:
    calls: list[list[int]] = []
    gate = threading.Event()

    def commit(rows: list[int]) -> list[int]:
        calls.append(rows)
        if rows == [0]:
            gate.wait(5)  # hold the first commit so that the others queue behind it
        if 13 in rows:
            raise OSError("disk full")
        return rows

    group: GroupCommit[list[int]] = GroupCommit(commit, lambda res, rows: list(rows), max_rows=4)
    out: dict[int, Any] = {}

    def writer(i: int) -> None:
        try:
            out[i] = group.submit([i])
        except OSError as exc:
            out[i] = exc

    first = threading.Thread(target=writer, args=(0,))
    first.start()
    while not calls:
        time.sleep(0.001)
    rest = [threading.Thread(target=writer, args=(i,)) for i in (11, 12, 13, 14, 15, 16)]
    for th in rest:
        th.start()
    time.sleep(0.2)
    gate.set()
    for th in [first, *rest]:
        th.join()
    assert out[0] == [0]
    assert sum(len(c) for c in calls) == 7 and max(len(c) for c in calls) <= 4
    failed = next(c for c in calls if 13 in c)
    for i in (11, 12, 14, 15, 16):
        assert isinstance(out[i], OSError) == (i in failed)
        if i not in failed:
            assert out[i] == [i]
    assert isinstance(out[13], OSError)


def test_recording_failures_does_not_read_the_store_each_time_to_decide_consolidation(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = Mimir(home, embedder="hash", auto_consolidate=True)
    m.auto_consolidate_hours = 0.0
    m.auto_consolidate_failures = 50
    m.record("first failure", "a", "failure", reason="x")  # the check: 1 of 50
    reads = [0]
    real = m.store.count

    def counted(*args: Any, **kwargs: Any) -> int:
        reads[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(m.store, "count", counted)
    for i in range(10):
        m.record(f"failure {i}", "a", "failure", reason="x")
    assert reads[0] == 0  # 11 of 50: counted down in process


def test_single_writes_compact_among_themselves_and_leave_the_large_fragment_alone(
    hash_mimir: Mimir,
) -> None:
    # Every 24 single writes used to rewrite the whole table (all fragments under 128k rows
    # were merged): at 10k rows, ~30 MB written and kept on disk for 5 minutes per 24 writes.
    from mimir_core.store.core import COMPACT_FRAGMENTS

    m = hash_mimir
    m.record_many([{"task": f"bulk {i}", "action": "a", "outcome": "success"} for i in range(2000)])
    m.compact()
    big = {f.fragment_id for f in m.store._dataset(EXPERIENCES).get_fragments()}
    assert len(big) == 1
    for i in range(COMPACT_FRAGMENTS * 2):
        m.record(f"single {i}", "b", "failure", reason="r")
    assert m.store.upkeep.wait(60)
    frags = {f.fragment_id: f.count_rows() for f in m.store._dataset(EXPERIENCES).get_fragments()}
    assert big <= set(frags)  # never rewritten
    assert len(frags) < COMPACT_FRAGMENTS
    assert m.stats().experiences == 2000 + COMPACT_FRAGMENTS * 2


def test_a_large_kv_table_gets_a_key_index_and_new_keys_are_appended(
    hash_mimir: Mimir, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every put looks its ids up (to keep created_at): without an index that scans the table
    from mimir_core.hosting.kv import KVPut, KVStore
    from mimir_core.store import core as store_mod

    monkeypatch.setattr(store_mod, "INDEX_ROWS", 50)
    monkeypatch.setattr(store_mod, "UNINDEXED_ROWS", 10)
    kv = KVStore(hash_mimir)
    kv.put_many([KVPut(("docs",), f"k{i}", {"text": f"doc {i}"}) for i in range(60)])
    before = kv.get(("docs",), "k1")
    assert before is not None
    kv.put(("docs",), "k1", {"text": "changed"})
    kv.put(("docs",), "new", {"text": "fresh"})
    store = hash_mimir.store
    assert store.upkeep.wait(60)
    cols = {tuple(i.columns) for i in store.table(store_mod.KV).list_indices()}
    assert ("id",) in cols
    after = kv.get(("docs",), "k1")
    assert after is not None and after.value == {"text": "changed"}
    assert after.created_at == before.created_at
    assert store.count(store_mod.KV) == 61


def test_a_short_lived_process_finishes_its_upkeep_before_it_exits(home: Path) -> None:
    # upkeep runs on a daemon thread: without the exit hook, a process that writes and exits
    # (``mimir record``) would leave its fragments to pile up
    from mimir_core.store.core import COMPACT_FRAGMENTS

    Mimir(home, embedder="hash").stats()
    writer = (
        "import sys; from mimir_core import Mimir\nfrom mimir_core.store import upkeep\n"
        "upkeep.GAP_SECONDS = 3.0  # the run the last writes ask for waits past the exit\n"
        "m = Mimir(sys.argv[1], embedder='hash')\n"
        "for i in range(int(sys.argv[2])): m.record(f'task {i}', 'act', 'success')\n"
    )
    subprocess.run(
        [sys.executable, "-c", writer, str(home), str(COMPACT_FRAGMENTS + 6)],
        check=True,
        timeout=180,
    )
    m = Mimir(home, embedder="hash")
    assert m.stats().experiences == COMPACT_FRAGMENTS + 6
    assert m.store.fragments(EXPERIENCES) < COMPACT_FRAGMENTS


def test_two_items_of_one_batch_with_one_key_return_the_one_stored(hash_mimir: Mimir) -> None:
    m = hash_mimir
    got = m.record_many(
        [
            {"task": "first", "action": "a", "outcome": "success", "idempotency_key": "dup"},
            {"task": "second", "action": "b", "outcome": "failure", "idempotency_key": "dup"},
        ]
    )
    stored = m.get(got[0].id)
    assert stored.task == "first"
    assert got == [stored, stored]
