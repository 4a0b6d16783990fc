"""An inter-process file lock (fcntl) that is also safe between threads and re-entrant."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class FileLock:
    """``with lock.hold():`` serialises a critical section across threads and processes.

    ``error`` is the :class:`StoreError` subclass raised when the lock cannot be had."""

    def __init__(
        self, path: Path, timeout: float = 60.0, *, error: type[StoreError] = StoreError
    ) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.error = error
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the lock for the duration of the block."""
        with self._thread_lock:
            if self._depth == 0:
                self._acquire()
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._release()

    def _acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise self.error(f"cannot create lock file {self.path}: {exc}") from exc
        if fcntl is not None:
            deadline = time.monotonic() + self.timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        os.close(fd)
                        raise self.error(
                            f"timed out after {self.timeout:.0f}s waiting for lock {self.path}"
                        ) from None
                    time.sleep(0.005)
        self._fd = fd

    def _release(self) -> None:
        if self._fd is not None:
            if fcntl is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
