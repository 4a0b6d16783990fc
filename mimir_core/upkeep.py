"""A store's table upkeep (compaction, index folding, version cleanup) on a thread of its own.

Why: a write used to check, and now and then run, its table's upkeep before returning, so one
``record`` in 24 took a compaction's time (hundreds of ms at 10k rows, seconds at 100k) on the
caller's path. Now a write only asks for upkeep (:meth:`Upkeep.request`: a set insert) and one
daemon thread per store runs it, each table's requests coalesced into one run; the thread
ends after :data:`IDLE_SECONDS` without requests and starts again on the next one.

Upkeep is an optimisation of the layout, never part of a write: a process that exits (or is
killed) with upkeep pending loses nothing, and the next write in any process asks again. At a
normal interpreter exit, pending upkeep is given up to :data:`EXIT_WAIT` seconds, so a
short-lived process (``mimir record``) still compacts what it piled up.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Callable

#: Seconds the thread waits for a request before it ends.
IDLE_SECONDS = 30.0
#: Seconds between two runs of the thread: a run's check alone costs a few ms of CPU (it opens
#: the table's latest version), and writes in a loop would ask for one after each write.
GAP_SECONDS = 0.1
#: Seconds an interpreter exit waits for pending upkeep, per store.
EXIT_WAIT = 30.0

_LIVE: weakref.WeakSet[Upkeep] = weakref.WeakSet()


class Upkeep:
    """Runs ``run(table_name)`` on a daemon thread for each table asked for."""

    def __init__(self, run: Callable[[str], None], name: str = "mimir-upkeep") -> None:
        self._run = run
        self._name = name
        self._cond = threading.Condition()
        self._pending: dict[str, None] = {}  # ordered set
        self._busy = False
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.runs = 0
        """How many upkeep runs finished (tests read it)."""
        _register()
        _LIVE.add(self)

    def request(self, table: str) -> None:
        """Ask for ``table``'s upkeep (returns at once; repeated asks coalesce)."""
        with self._cond:
            self._pending[table] = None
            if self._thread is None and not self._stopping:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until nothing is pending or running; ``False`` if ``timeout`` ran out first."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def stop(self, timeout: float) -> None:
        """Let pending upkeep finish (up to ``timeout`` seconds), then end the thread: no
        thread of ours is inside LanceDB while the interpreter shuts down."""
        self.wait(timeout)
        with self._cond:
            self._stopping = True
            self._pending.clear()
            thread = self._thread
            self._cond.notify_all()
        if thread is not None:
            thread.join(timeout)

    def _loop(self) -> None:
        while True:
            with self._cond:
                woke = self._cond.wait_for(
                    lambda: bool(self._pending) or self._stopping, IDLE_SECONDS
                )
                if not woke or self._stopping:
                    self._thread = None
                    return
                table = next(iter(self._pending))
                del self._pending[table]
                self._busy = True
            try:
                self._run(table)  # best effort by contract: it logs its own failures
            except Exception:  # pragma: no cover - run() catches; the thread must survive
                pass
            finally:
                with self._cond:
                    self._busy = False
                    self.runs += 1
                    self._cond.notify_all()
                    # requests arriving meanwhile wait for one run after the gap
                    self._cond.wait_for(lambda: self._stopping, GAP_SECONDS)


_REGISTERED: list[bool] = []


def _register() -> None:
    """Register the exit hook once, at the first store's opening: after LanceDB's import, so
    that it runs before whatever LanceDB registered (exit hooks run last-registered first)."""
    if not _REGISTERED:
        _REGISTERED.append(True)
        atexit.register(_finish_pending)


def _finish_pending() -> None:
    for upkeep in list(_LIVE):
        upkeep.stop(EXIT_WAIT)
