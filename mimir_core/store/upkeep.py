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

Lifecycle (a thread inside LanceDB on a table another thread drops crashed the process):

* The thread holds its store only weakly, and only for the length of one run: a store closed
  (:meth:`Upkeep.stop`) or garbage-collected ends its thread, so a host that opens many stores
  (a test suite, a server with a store per tenant) does not pile up threads.
* :func:`paused` stops every upkeep of one store location in this process (every store object
  opened on it), and waits for a run in progress, around whatever drops, replaces or rolls back
  a table (reindex, purge, a backup restored at open, a repair). Each pause moves the
  location's :func:`generation` on, so a store drops the table objects it opened before.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: Seconds the thread waits for a request before it ends.
IDLE_SECONDS = 30.0
#: Seconds between two runs of the thread: a run's check alone costs a few ms of CPU (it opens
#: the table's latest version), and writes in a loop would ask for one after each write.
GAP_SECONDS = 0.1
#: Seconds an interpreter exit waits for pending upkeep, per store.
EXIT_WAIT = 30.0
#: Seconds :func:`paused` waits for a run in progress to finish (a compaction of a large
#: table takes seconds; one that takes longer is let be, and the caller goes on).
PAUSE_WAIT = 600.0

_LIVE: weakref.WeakSet[Upkeep] = weakref.WeakSet()
_STATE = threading.Lock()
#: Location -> how many :func:`paused` blocks are open on it.
_PAUSES: dict[str, int] = {}
#: Location -> how many :func:`paused` blocks ended on it (tables may have been replaced).
_GENERATIONS: dict[str, int] = {}


class Upkeep:
    """Runs ``run(table_name)`` on a daemon thread for each table asked for.

    A bound method ``run`` is held weakly (its object is the store): once the store is gone,
    the thread ends and pending requests are dropped. ``key`` names the store's location, for
    :func:`paused`."""

    def __init__(
        self, run: Callable[[str], None], name: str = "mimir-upkeep", key: str = ""
    ) -> None:
        self._run: Callable[[], Callable[[str], None] | None]
        owner = getattr(run, "__self__", None)
        if owner is not None:
            self._run = weakref.WeakMethod(run)  # type: ignore[arg-type]
            # not at exit: the exit hook lets pending upkeep finish first
            weakref.finalize(owner, self._abandon).atexit = False
        else:
            self._run = lambda: run
        self._name = name
        self.key = key
        self._cond = threading.Condition()
        self._pending: dict[str, None] = {}  # ordered set
        self._busy = False
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.runs = 0
        """How many upkeep runs finished (tests read it)."""
        _register()
        _LIVE.add(self)

    @property
    def alive(self) -> bool:
        """Whether this upkeep's thread is running."""
        with self._cond:
            return self._thread is not None

    def request(self, table: str) -> None:
        """Ask for ``table``'s upkeep (returns at once; repeated asks coalesce)."""
        with self._cond:
            if self._stopping:
                return
            self._pending[table] = None
            self._start()
            self._cond.notify_all()

    def _start(self) -> None:
        # under self._cond
        if self._thread is None and not self._stopping:
            self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
            self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until nothing is pending or running; ``False`` if ``timeout`` ran out first.
        Pending requests of a paused location do not count (they run after the pause)."""
        with self._cond:
            return self._cond.wait_for(
                lambda: (not self._pending or self._paused()) and not self._busy, timeout
            )

    def stop(self, timeout: float) -> None:
        """Let pending upkeep finish (up to ``timeout`` seconds), then end the thread and
        wait for it: no thread of ours is inside LanceDB once this returns (unless a run
        outlasted ``timeout``). Later requests are ignored."""
        self.wait(timeout)
        self._abandon()
        with self._cond:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _abandon(self) -> None:
        """Drop pending requests and tell the thread to end (it finishes a run in progress);
        does not wait, so a finalizer (which may run on the thread itself) can call it."""
        with self._cond:
            self._stopping = True
            self._pending.clear()
            self._cond.notify_all()

    def _paused(self) -> bool:
        return _PAUSES.get(self.key, 0) > 0

    def _idle(self) -> None:
        """Wait, paused, until the run in progress (if any) finishes."""
        if threading.current_thread() is self._thread:
            return  # a run that pauses its own location waits for nothing
        with self._cond:
            self._cond.wait_for(lambda: not self._busy, PAUSE_WAIT)

    def _resume(self) -> None:
        with self._cond:
            if self._pending:
                self._start()  # the thread may have ended idle during the pause
            self._cond.notify_all()

    def _loop(self) -> None:
        me = threading.current_thread()
        while True:
            with self._cond:
                woke = self._cond.wait_for(
                    lambda: (bool(self._pending) and not self._paused()) or self._stopping,
                    IDLE_SECONDS,
                )
                if not woke or self._stopping:
                    if self._thread is me:
                        self._thread = None
                    return
                table = next(iter(self._pending))
                del self._pending[table]
                run = self._run()
                if run is None:  # the store is gone
                    self._stopping = True
                    continue
                self._busy = True
            try:
                run(table)  # best effort by contract: it logs its own failures
            except Exception:  # pragma: no cover - run() catches; the thread must survive
                pass
            finally:
                del run  # hold the store no longer than one run
                with self._cond:
                    self._busy = False
                    self.runs += 1
                    self._cond.notify_all()
                    # requests arriving meanwhile wait for one run after the gap
                    self._cond.wait_for(lambda: self._stopping, GAP_SECONDS)


def generation(key: str) -> int:
    """How many times tables at ``key`` may have been replaced in this process: a store that
    opened its table objects at another generation opens them again."""
    return _GENERATIONS.get(key, 0)


@contextmanager
def paused(key: str) -> Iterator[None]:
    """No upkeep of this process runs on the store at ``key`` inside this block: runs in
    progress are awaited at entry, pending ones run after it. Nests."""
    with _STATE:
        _PAUSES[key] = _PAUSES.get(key, 0) + 1
    try:
        for upkeep in _at(key):
            upkeep._idle()
        yield
    finally:
        with _STATE:
            _PAUSES[key] -= 1
            if not _PAUSES[key]:
                del _PAUSES[key]
            _GENERATIONS[key] = _GENERATIONS.get(key, 0) + 1
        for upkeep in _at(key):
            upkeep._resume()


def _at(key: str) -> list[Upkeep]:
    return [u for u in list(_LIVE) if u.key == key]


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
