"""Handing freed native memory back to the system after upkeep.

Why: the Lance engine allocates from many threads (its I/O and compute pools), and glibc's
malloc gives each thread an arena of its own. Memory freed in those arenas stays in the process
until something trims them, so a process that writes one record at a time grew by ~12 KB of
private memory a write (12k single writes, trimmed every 2,000: 146 MB at 2k, 263 MB at 12k
before its trim, 216 MB after; 192 MB untrimmed with two arenas, ``MALLOC_ARENA_MAX=2``).
Upkeep calls ``malloc_trim(0)`` after a run that rewrote files (compaction, index folding: the
largest short-lived allocations), at most once every :data:`TRIM_EVERY` seconds, on its own
thread (the same 12k writes: 239 MB).

Only glibc has ``malloc_trim``; elsewhere (musl, macOS, Windows) this does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import time
from typing import Any

#: Fewest seconds between two trims (a trim walks every arena: ~1-5 ms of the upkeep thread).
TRIM_EVERY = 2.0

_LOCK = threading.Lock()
_last_trim = 0.0


@functools.cache
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim`` from the symbols already loaded (no library search, which would
    start a subprocess), or ``None``."""
    try:
        fn = getattr(ctypes.CDLL(None), "malloc_trim", None)
    except (OSError, TypeError):  # pragma: no cover - no dlopen(NULL) (Windows)
        return None
    if fn is not None:
        fn.argtypes = [ctypes.c_size_t]
        fn.restype = ctypes.c_int
    return fn


def release_free_memory(*, force: bool = False) -> bool:
    """Return freed heap memory to the system (glibc's ``malloc_trim(0)``); ``True`` if a trim
    ran. Skipped when the last one ran less than :data:`TRIM_EVERY` seconds ago, unless
    ``force``."""
    global _last_trim
    trim = _malloc_trim()
    if trim is None:
        return False
    with _LOCK:
        now = time.monotonic()
        if not force and now - _last_trim < TRIM_EVERY:
            return False
        _last_trim = now
    trim(0)
    return True
