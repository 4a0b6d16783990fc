"""Freed native memory goes back to the system after upkeep (glibc's ``malloc_trim``)."""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
import threading
from pathlib import Path

import pytest

from mimir_core.store import core as store_mod
from mimir_core.store import native_memory

glibc = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only"
)


def _rss_anon_mb() -> float:
    with open("/proc/self/status", encoding="utf-8") as fh:
        line = next(x for x in fh if x.startswith("RssAnon"))
    return int(line.split()[1]) / 1024


@glibc
def test_memory_freed_in_a_thread_arena_is_handed_back() -> None:
    """What the Lance engine's threads free stays in their malloc arenas until trimmed."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    chunk, count = 32 * 1024, 4_000  # below the mmap threshold: from the thread's arena
    held: list[int] = []

    def allocate_then_free_all_but_the_last() -> None:
        for _ in range(count):
            p = libc.malloc(chunk)
            libc.memset(p, 1, chunk)  # touched: resident
            held.append(p)
        for p in held[:-1]:  # the last one keeps the arena's top in use: no automatic trim
            libc.free(p)

    worker = threading.Thread(target=allocate_then_free_all_but_the_last)
    worker.start()
    worker.join()
    freed = _rss_anon_mb()
    assert native_memory.release_free_memory(force=True) is True
    after = _rss_anon_mb()
    libc.free(held[-1])
    assert freed - after > 0.5 * chunk * count / 2**20, (freed, after)


@glibc
def test_trims_are_spaced_unless_forced() -> None:
    assert native_memory.release_free_memory(force=True) is True
    assert native_memory.release_free_memory() is False  # within TRIM_EVERY of the last
    assert native_memory.release_free_memory(force=True) is True


@glibc
def test_upkeep_trims_after_it_compacts(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mimir_core import Mimir

    monkeypatch.setattr(native_memory, "TRIM_EVERY", 0.0)
    m = Mimir(home, embedder="hash")
    try:
        for i in range(store_mod.COMPACT_FRAGMENTS + 2):  # one fragment each: compaction due
            m.record(task=f"fix flaky test {i}", action="pytest -x", outcome="success")
        assert m.store.upkeep.wait(120)
        assert m.store.trims >= 1
    finally:
        m.close()


def test_without_malloc_trim_nothing_happens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_memory, "_malloc_trim", lambda: None)  # musl, macOS, Windows
    assert native_memory.release_free_memory(force=True) is False
