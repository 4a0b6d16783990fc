"""Group commit: writes that arrive together in one process become one store commit.

Why: each LanceDB commit writes a data file, a transaction file and a manifest (~2-3 ms), and
takes the store's inter-process write lock. Threads recording at once (an MCP server's tool
calls, a LangGraph graph's parallel nodes, a host's worker pool) each paid that, one after
another, behind the lock.

How (leader/follower, no timer): a writer queues its rows. If no commit is running, it becomes
the leader and commits everything queued so far in one call; writers that arrive while that
commit runs queue behind it, and the first of them to wake leads the next commit of all of them
(up to :data:`MAX_ROWS` rows). A lone writer therefore pays one commit and never waits for a
timer; concurrent writers share one commit per round.

Every writer returns only once its own rows are committed to the store (the LanceDB commit is
the write's durable record): a ``recall`` / ``recommend`` / ``search`` in this process or any
other sees the write the moment its call returns, with no tail to consult. A commit that fails
fails every writer in it with the same error, and nothing of theirs is half-written (one commit
is atomic); they may retry (idempotency keys make that safe).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, cast

R = TypeVar("R")

#: Most rows one commit takes from the queue (one ``add`` of ~3 KB rows: ~1.5 MB of Arrow).
MAX_ROWS = 512


class _Job:
    __slots__ = ("done", "error", "result", "rows")

    def __init__(self, rows: Sequence[Any]) -> None:
        self.rows = rows
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None


class GroupCommit(Generic[R]):
    """Coalesces concurrent :meth:`submit` calls into calls of ``commit(rows) -> result``.

    ``commit`` gets the rows of several writers at once, in arrival order, and returns one
    result for all of them; ``split(result, rows)`` gives each writer its part of it."""

    def __init__(
        self,
        commit: Callable[[list[Any]], R],
        split: Callable[[R, Sequence[Any]], R],
        max_rows: int = MAX_ROWS,
    ) -> None:
        self._commit = commit
        self._split = split
        self._max_rows = max_rows
        self._cond = threading.Condition()
        self._queue: list[_Job] = []
        self._leading = False
        self.commits = 0
        """How many commits ran (tests and the bench read it)."""

    def submit(self, rows: Sequence[Any]) -> R:
        """Commit ``rows`` (with whatever other writers queued meanwhile); returns this
        writer's part of the result once they are committed, or raises the commit's error."""
        job = _Job(rows)
        with self._cond:
            self._queue.append(job)
        while True:  # a commit full of earlier writers' rows may leave this one for the next
            with self._cond:
                while not job.done and self._leading:
                    self._cond.wait()
                if job.done:
                    return cast(R, self._outcome(job))
                self._leading = True
                batch = self._take()
            try:
                self._run(batch)
            finally:
                with self._cond:
                    self._leading = False
                    self._cond.notify_all()

    def _take(self) -> list[_Job]:
        """The queued jobs of the next commit (at least one; at most ``max_rows`` rows unless
        the first job alone is larger: a batch is never split)."""
        batch: list[_Job] = []
        rows = 0
        while self._queue and (not batch or rows + len(self._queue[0].rows) <= self._max_rows):
            job = self._queue.pop(0)
            batch.append(job)
            rows += len(job.rows)
        return batch

    def _run(self, batch: list[_Job]) -> None:
        rows = [r for job in batch for r in job.rows]
        try:
            result = self._commit(rows)
            self.commits += 1
            for job in batch:
                job.result = self._split(result, job.rows)
        except BaseException as exc:  # every writer of the commit sees its failure
            for job in batch:
                job.error = exc
        with self._cond:
            for job in batch:
                job.done = True

    @staticmethod
    def _outcome(job: _Job) -> Any:
        if job.error is not None:
            raise job.error
        return job.result
