"""Keep a directory's files in the page cache while latencies are measured (``mlock``).

Some VMs reclaim page-cache pages idle for a minute (DAMON ``pageout``; the bench VMs here do).
A recall then reads most of a 1M store's rows from disk: measured in one process, recall p50 /
p95 28.6 / 75.3 ms on an evicted 1M store and 14.9 / 34.7 ms once its files had been read.
A machine without proactive reclaim keeps them cached until memory runs short. Pinning every
store's files (Mimir's and mimir-learn's alike) measures the code under that condition on any
machine; ``bench.perf --no-pin`` measures what the host's reclaim leaves.

Linux only; where ``mlock`` is refused (no ``CAP_IPC_LOCK`` and a small ``ulimit -l``) nothing
is pinned and :attr:`PinnedFiles.error` says why.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

_PROT_READ = 0x1
_MAP_SHARED = 0x01
_MAP_FAILED = ctypes.c_void_p(-1).value


class PinnedFiles:
    """Every regular file under ``root`` mapped and locked in memory until :meth:`close`."""

    def __init__(self, root: Path) -> None:
        self.bytes = 0
        self.files = 0
        self.error: str | None = None
        self._maps: list[tuple[int, int]] = []
        try:
            self._libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
            self._libc.mmap.restype = ctypes.c_void_p
            self._libc.mmap.argtypes = [
                ctypes.c_void_p,
                ctypes.c_size_t,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_long,
            ]
            self._libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            self._libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        except (OSError, AttributeError) as exc:
            self.error = f"no libc mmap/mlock: {exc}"
            return
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            if not self._pin(path):
                break

    def _pin(self, path: Path) -> bool:
        size = path.stat().st_size
        if size == 0:
            return True
        fd = os.open(path, os.O_RDONLY)
        try:
            addr = self._libc.mmap(None, size, _PROT_READ, _MAP_SHARED, fd, 0)
        finally:
            os.close(fd)  # the mapping keeps the file
        if addr is None or addr == _MAP_FAILED:
            self.error = f"mmap {path}: {os.strerror(ctypes.get_errno())}"
            return False
        self._maps.append((addr, size))
        if self._libc.mlock(addr, size) != 0:
            self.error = f"mlock {path}: {os.strerror(ctypes.get_errno())}"
            self.close()
            return False
        self.bytes += size
        self.files += 1
        return True

    def info(self) -> dict[str, object]:
        """What was pinned, for the results file."""
        return {
            "pinned": self.error is None,
            "mb": round(self.bytes / 1e6),
            "files": self.files,
            "error": self.error,
        }

    def close(self) -> None:
        """Unlock and unmap everything (files deleted meanwhile are freed now)."""
        for addr, size in self._maps:
            self._libc.munmap(addr, size)
        self._maps.clear()
        self.bytes = self.files = 0
