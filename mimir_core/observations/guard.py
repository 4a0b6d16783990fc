"""Past attempts for hook processes: at task start, before a tool runs, right after it failed
(stdlib only).

Each function reads the project's signed attempts digest and the spool's tail
(:mod:`~mimir_core.observations.attempt_digest`), finds the past tasks like the current one by
their keywords, and lets :mod:`~mimir_core.observations.policy` say what to show. They return
:class:`~mimir_core.observations.policy.Line` objects for
:func:`mimir_core.tools.digest.render_block` to fence. A command with no history costs one read of
the digest's small action index and of the spool's tail, and nothing else.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from . import attempt_digest as ad
from .policy import Line, after_failure_lines, before_tool_lines, never_worked, task_start_lines

_NEEDLE = re.compile(r"[\w./:@=+-]+", re.UNICODE)


class Guard(NamedTuple):
    """What the repeat guard says before a tool runs: the lines, and whether to ask the user
    first (the command failed at least the configured number of times here and never worked)."""

    lines: list[Line]
    ask: bool


def task_lines(
    spool_dir: str | os.PathLike[str], scope: str, query: str, key: bytes | None
) -> list[Line]:
    """The observations for a task that starts with ``query``: what failed on tasks like it in
    this project, and what worked instead."""
    if not query.strip():
        return []
    digest = ad.with_spool(spool_dir, scope, key)
    entries = digest.pool(query)
    return task_start_lines(digest.tallies(entries)) if entries else []


def _needle(action: str) -> bytes | None:
    """The longest word of ``action``, in lower case: a spool line without it cannot be this
    action (whose case does not count)."""
    words = _NEEDLE.findall(action.lower())
    return max(words, key=len).encode("utf-8") if words else None


def _with_spool(
    spool_dir: str | os.PathLike[str], scope: str, key: bytes | None, skip: str = ""
) -> tuple[ad.AttemptDigest, bool]:
    """(the digest with the spool's tail folded in, whether the digest itself already held the
    record ``skip``, which the spool's copy of it then leaves out)."""
    digest = ad.load(spool_dir, scope, key) or ad.AttemptDigest(scope)
    held = bool(skip) and skip in digest.keys
    folded = dict(digest.keys)
    if skip:
        folded[skip] = None
    for record in ad.spool_records(spool_dir, scope, skip=folded):
        digest.add_record(record)
    return digest, held


def _has_history(spool_dir: str | os.PathLike[str], scope: str, akey: str, action: str) -> bool:
    """Whether ``action`` was tried in this project at all: its line in the digest's index, or
    a spooled record of it (the cheap answer, and "no" for most commands)."""
    if ad.has_action(spool_dir, scope, akey):
        return True
    pending = ad.spool_records(spool_dir, scope, needle=_needle(action))
    return any(ad.action_key(str(r.get("action") or "")) == akey for r in pending)


def before_tool(
    spool_dir: str | os.PathLike[str],
    scope: str,
    task: str,
    action: str,
    key: bytes | None,
    *,
    ask_after: int = 0,
) -> Guard:
    """The repeat guard for ``action`` about to run on ``task`` (``""``: any task here)."""
    akey = ad.action_key(action)
    if not akey or not _has_history(spool_dir, scope, akey, action):
        return Guard([], False)
    digest, _held = _with_spool(spool_dir, scope, key)
    entries = digest.pool(task) if task.strip() else list(digest.tasks.values())
    tasks = digest.tallies(entries)
    lines = before_tool_lines(tasks.get(akey), tasks)
    ask = False
    if ask_after > 0 and lines and lines[0].warns:
        everywhere = digest.tallies(digest.tasks.values()).get(akey)
        ask = everywhere is not None and never_worked(everywhere) and everywhere.fail >= ask_after
    return Guard(lines, ask)


def after_failure(
    spool_dir: str | os.PathLike[str],
    scope: str,
    task: str,
    action: str,
    key: bytes | None,
    *,
    record_key: str = "",
) -> list[Line]:
    """Right after ``action`` failed on ``task``: whether it had failed here before on tasks
    like it, and what worked instead. ``record_key`` is the failure just captured (left out)."""
    digest, already = _with_spool(spool_dir, scope, key, record_key)
    entries = digest.pool(task) if task.strip() else list(digest.tasks.values())
    tasks = digest.tallies(entries)
    akey = ad.action_key(action)
    before = tasks.get(akey)
    if before is not None and already:  # a drain folded this very failure in: take it back
        before = before.copy()
        before.fail -= 1
    return after_failure_lines(before, tasks, akey)


__all__ = ["Guard", "after_failure", "before_tool", "task_lines"]
