"""Background work for long-lived processes and hosts: the store kept current, calls bounded.

Two ways to keep Mimir's heavy parts (the store, the embedding model) off a host's critical path:

* :class:`Maintainer`, for a long-lived server (the MCP server): one lazily created
  :class:`~mimir_core.Mimir` and, on a daemon thread started once the process has answered its
  first request (so that start-up stays fast), loads the store and the model, drains the capture
  spool that hooks append to, and runs consolidation when it is due. Every step fails open: an
  error is logged and the next round tries again.
* :class:`LiveMemory`, for a host that calls its memory in process with hard time budgets and
  exits when the user is done (Hermes Agent): the store and the model are opened on one daemon
  worker thread, started at once; every store call runs on that worker, in order, and the caller
  waits at most a given time (:meth:`LiveMemory.call`); captured records are appended to the
  spool before :meth:`LiveMemory.capture` returns and ingested on the worker (a crash loses
  nothing: the next drain stores them, idempotency keys make a second capture a no-op);
  :meth:`LiveMemory.finish` stores what is pending and starts a consolidation when one is due.

Threads are daemon threads: a wedged store never keeps the host from exiting.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..ingest import spool
from ..ingest.capture.events import lesson_ids

if TYPE_CHECKING:
    from ..embed.core import Embedder
    from ..memory import Mimir
    from ..settings import MimirSettings

log = logging.getLogger("mimir.background")

T = TypeVar("T")


def warm_up(m: Mimir) -> None:
    """Open (or create) the store and load the embedding model now, not in the first query."""
    _ = m.store
    m.embedder.embed_one("warm up")


class Maintainer:
    """Lazily builds a Mimir and keeps its store current from a background thread.

    ``factory`` builds the Mimir (called once, on first use). ``interval`` is the number of
    seconds between upkeep rounds. Consolidation runs when it is due by the Mimir's own rule
    (``MIMIR_AUTO_CONSOLIDATE``, ``..._FAILURES``, ``..._HOURS``: see
    :func:`mimir_core.lessons.auto.due`), here on this thread; ``consolidate=False`` leaves it
    out. ``settle`` is how long the thread lets the request that started it finish before it
    loads the heavy parts.
    """

    def __init__(
        self,
        factory: Callable[[], Mimir],
        *,
        interval: float = 30.0,
        consolidate: bool = True,
        settle: float = 0.1,
    ) -> None:
        self._factory = factory
        self.interval = interval
        self.consolidate = consolidate
        self.settle = settle
        self._mimir: Mimir | None = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._reported: set[str] = set()
        self.rounds = 0

    @property
    def mimir(self) -> Mimir:
        """The Mimir (built on first use)."""
        with self._lock:
            if self._mimir is None:
                self._mimir = self._factory()
            return self._mimir

    @property
    def started(self) -> bool:
        """Whether the upkeep thread was started."""
        return self._thread is not None

    def start(self) -> None:
        """Start the upkeep thread (once; later calls do nothing)."""
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="mimir-maintainer", daemon=True
                )
                self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread after its current step."""
        self._stopped.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def warm(self) -> None:
        """Open the store and load the embedding model."""
        warm_up(self.mimir)

    def run_once(self) -> dict[str, Any]:
        """One upkeep round: drain the spool, then consolidate if due. Returns what happened."""
        done: dict[str, Any] = {}
        m = self.mimir
        if spool.has_pending(m.spool_dir):
            report = self._step("ingest", m.ingest)
            done["ingested"] = getattr(report, "ingested", 0)
        if self.consolidate and self._step("consolidation check", lambda: _due(m)):
            report = self._step("consolidate", m.consolidate)
            done["consolidated"] = bool(getattr(report, "ran", False))
        self.rounds += 1
        return done

    def _step(self, name: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:  # fail open: log once per kind of failure, retry next round
            key = f"{name}:{type(exc).__name__}"
            if key not in self._reported:
                self._reported.add(key)
                log.warning("background %s failed: %s: %s", name, type(exc).__name__, exc)
            else:
                log.debug("background %s failed again: %s", name, exc)
            return None

    def _loop(self) -> None:
        if self._stopped.wait(self.settle):
            return
        self._step("warm-up", self.warm)
        while not self._stopped.is_set():
            self._step("upkeep", self.run_once)
            self._stopped.wait(self.interval)


def _due(m: Mimir) -> bool:
    from ..lessons.auto import due

    return due(m.deps)


# -- in-process hosts -----------------------------------------------------------------------

_EMBEDDERS: dict[str, Embedder] = {}
_EMBEDDERS_LOCK = threading.Lock()


def _shared_embedder(settings: MimirSettings) -> Embedder:
    """One loaded model per process and kind, shared by every :class:`LiveMemory` (a host such as
    Hermes' gateway runs a provider per chat session; each would otherwise load its own)."""
    with _EMBEDDERS_LOCK:
        emb = _EMBEDDERS.get(settings.embedder)
        if emb is None:
            from ..embed.core import make_embedder

            emb = make_embedder(settings.embedder, Path(settings.home) / "models" / "minilm-int8")
            _EMBEDDERS[settings.embedder] = emb
        return emb


class _Worker:
    """One daemon thread running jobs in order."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[tuple[Future[Any] | None, Callable[[], Any] | None]] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        fut: Future[T] = Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        self._jobs.put((fut, fn))
        return fut

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread once the jobs before this call are done (a later submit restarts)."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None and thread.is_alive():
                self._jobs.put((None, None))
                if thread is not threading.current_thread():
                    thread.join(timeout)

    def _run(self) -> None:
        while True:
            fut, fn = self._jobs.get()
            if fut is None or fn is None:
                return
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn())
            except BaseException as exc:
                fut.set_exception(exc)


class LiveMemory:
    """A :class:`~mimir_core.Mimir` opened in the background, with bounded calls.

    ``settings`` says which store (its ``home``, ``store_uri``...), ``scope`` the project for
    writes, ``on_error`` is called once with a message if the store cannot be opened.
    """

    def __init__(
        self,
        settings: MimirSettings,
        *,
        scope: str | None = None,
        name: str = "mimir-live",
        on_error: Callable[[str], object] | None = None,
    ) -> None:
        self.settings = settings
        self.scope = scope
        self.spool_dir: Path = spool.spool_dir(settings.home, settings.store_uri)
        self.error: str | None = None
        self._on_error = on_error
        self._mimir: Mimir | None = None
        self._ready = threading.Event()
        self._worker = _Worker(name)
        self._worker.submit(self._open)

    def _open(self) -> None:
        try:
            from ..memory import Mimir

            m = Mimir.from_settings(
                self.settings, scope=self.scope, embedder=_shared_embedder(self.settings)
            )
            warm_up(m)  # a bad store is reported at once, the first query pays no model load
            m.ingest(compact=False)  # records a crashed process left behind
            self._mimir = m
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            log.warning("mimir: cannot open the store: %s", self.error, exc_info=True)
            if self._on_error is not None:
                try:
                    self._on_error(f"Mimir memory is off: {self.error}")
                except Exception:  # the host's callback; the error itself is logged above
                    log.debug("mimir: the on_error callback failed", exc_info=True)
        finally:
            self._ready.set()

    @property
    def ready(self) -> bool:
        """Whether the store is open (False while opening, and after a failure)."""
        return self._mimir is not None

    def call(self, fn: Callable[[Mimir], T], timeout: float) -> T:
        """``fn(mimir)`` on the worker; waits at most ``timeout`` seconds in all.

        Raises :class:`TimeoutError` when it takes longer (the call still completes later),
        :class:`RuntimeError` when the store could not be opened, or what ``fn`` raised.
        """
        deadline = time.monotonic() + timeout
        if not self._ready.wait(timeout):
            raise TimeoutError("Mimir is still opening its store")
        m = self._mimir
        if m is None:
            raise RuntimeError(f"Mimir is not available: {self.error}")
        fut = self._worker.submit(lambda: fn(m))
        try:
            return fut.result(max(0.0, deadline - time.monotonic()))
        except FutureTimeout:  # a distinct class before Python 3.11
            raise TimeoutError(f"Mimir did not answer within {timeout:g}s") from None

    def context(
        self, query: str, timeout: float, *, budget_chars: int = 2000
    ) -> tuple[str, list[str]]:
        """The lessons block for ``query`` and the ids of the lessons it shows, within
        ``timeout`` seconds (raises like :meth:`call`).

        While the store and the model are still loading (a host's first turn), the signed
        lessons digest answers at once (:func:`mimir_core.tools.digest.render_context`: the same
        block, matched by keywords instead of embeddings); only when it has nothing does this
        wait for the store."""
        if not self._ready.is_set():
            text = self._digest(query, budget_chars)
            if text:
                return text, lesson_ids(text)
        text = self.call(lambda m: m.context(query, budget_chars=budget_chars), timeout)
        text = text if isinstance(text, str) else ""
        return text, lesson_ids(text)

    def _digest(self, query: str, budget_chars: int) -> str:
        """The block from the signed digests alone (lessons, and this project's past attempts
        with the spool's tail), as a hook would give it."""
        try:
            from ..ingest.spool import spool_dir
            from ..observations.guard import task_lines
            from ..search.actions import normalise_action
            from ..tools.digest import lessons_for, render_block, resolve_key

            secret = self.settings.signing_key
            home = self.settings.home
            key = resolve_key(home, secret.get_secret_value() if secret is not None else None)
            items = lessons_for(home, query, scope=self.scope, key=key)
            lines = []
            if self.scope is not None:
                spool = spool_dir(home, self.settings.store_uri)
                lines = task_lines(spool, self.scope, query, key)
            covered = {normalise_action(str(i.get("action") or "")) for i in items}
            facts = [line.text for line in lines if line.key not in covered]
            return render_block(items, budget_chars, observations=facts)
        except Exception:
            log.info("mimir: digests unreadable", exc_info=True)
            return ""

    def capture(self, records: Iterable[Mapping[str, Any]]) -> list[str]:
        """Append ``records`` (with idempotency keys) to the spool now, secrets redacted (the
        spool is on disk too); store them soon. Returns the keys of the records spooled: one
        that cannot be written is logged and skipped, and the others still go."""
        from ..redact.core import sanitize_obj

        extra = tuple(self.settings.redact_patterns or ())
        done: list[str] = []
        for record in records:
            try:
                clean = cast("dict[str, Any]", sanitize_obj(dict(record), extra_patterns=extra))
                spool.append(self.spool_dir, clean)
            except Exception as exc:
                log.warning("mimir: a record could not be spooled: %s", exc)
                continue
            done.append(str(record.get("idempotency_key", "")))
        if done:
            self._worker.submit(self._ingest)
        return done

    def _ingest(self) -> None:
        m = self._mimir
        if m is None:
            return
        try:
            m.ingest(compact=False)
        except Exception:
            log.warning("mimir: ingest failed; the records stay in the spool", exc_info=True)

    def warm(self, query: str | None = None) -> None:
        """Ingest what is pending and run ``query`` once, in the background (returns at once)."""

        def job() -> None:
            self._ingest()
            m = self._mimir
            if m is not None and query and query.strip():
                try:
                    m.context(query)
                except Exception:
                    log.info("mimir: warm-up query failed", exc_info=True)

        self._worker.submit(job)

    def flush(self, timeout: float) -> bool:
        """Store everything spooled so far; False when it did not finish within ``timeout``
        seconds (the records then stay in the spool for the next drain)."""
        deadline = time.monotonic() + timeout
        if not self._ready.wait(timeout):
            return False
        try:
            self._worker.submit(self._ingest).result(max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            return False
        return True

    def finish(self, *, timeout: float) -> bool:
        """Flush, then start a consolidation if one is due (``Mimir.auto_consolidate``).

        Consolidation runs in a detached process (:mod:`mimir_core.lessons.auto`), so the host
        exits at once. Returns whether the flush finished. Never raises."""
        try:
            flushed = self.flush(timeout)
            m = self._mimir
            if m is not None and m.auto_consolidate:
                from ..lessons import auto

                # The core's policy decides (new failures, hours since the last run, and at most
                # one check a minute: a check a moment ago by an ingest already covered this).
                self._worker.submit(lambda: auto.maybe_start(m.deps)).result(timeout)
            return flushed
        except Exception:
            log.warning("mimir: could not finish cleanly", exc_info=True)
            return False

    def close(self) -> None:
        """Let the worker thread end once its queued jobs are done (after :meth:`finish`)."""
        self._worker.stop()
