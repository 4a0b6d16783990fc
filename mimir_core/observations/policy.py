"""What of the past attempts an agent is shown, and in which words (stdlib only).

The ε-gate decides which *rules* an agent is given; this module decides which *facts*: "this
exact command failed here 3 of 3 times, with this error" needs no gate, and an agent needs it
from the first repeat. Three moments use it:

* **task start** (:func:`task_start_lines`): the commands that failed on tasks like this one
  (from the second failure, or from the first once something else worked), what worked
  instead, and what lately stopped working;
* **before a tool runs** (:func:`before_tool_lines`): this very command was tried here on this
  task and did not work;
* **right after a failure** (:func:`after_failure_lines`): it had failed here before, and
  what worked instead on the same task.

Rules that keep it honest: counts name their independent sources (sessions), and what is
*suggested* (a "worked" line on its own) needs two of them, so one session cannot create
advice by volume; a command that destroys data or switches off a safety net
(:func:`mimir_core.search.actions.destructive_reason`) is never shown as what worked, only as a
tagged fact of this project's own evidence from two sessions; other projects' evidence is labelled
and needs two sessions too. Every line is one line of plain text: the caller fences it
(:func:`mimir_core.tools.digest.render_block`).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import NamedTuple

from ..search.actions import destructive_reason
from ..tools.digest import OBSERVATIONS_HEADER as HEADER
from .tally import FAIL, OK, ActionTally, Tallies

#: Observation lines shown at task start, at most.
MAX_LINES = 5
MAX_FAILED = 3
MAX_WORKED = 2
#: Independent sources a "worked" line needs to be shown on its own (not as what worked instead
#: of a failed command), and that other projects' evidence needs to be shown at all.
SUGGEST_SOURCES = 2
#: Failures in a row after which a command that used to work counts as failing.
STREAK = 2
#: Newer attempts on the tasks after which one session's failure no longer warns, and after
#: which a line says how long ago an action was last tried.
FADE_TRIES = 8
AGE_SHOWN = 3
#: Longest action and error shown.
ACTION_CHARS = 160
ERROR_CHARS = 160


class Line(NamedTuple):
    """One observation: its words, the action it is about, and whether it warns against it."""

    text: str
    key: str
    warns: bool


# -- wording -----------------------------------------------------------------------------------

_EXIT_LINE = re.compile(r"^(exit code|exit status|returned)\s*-?\d+\.?$", re.IGNORECASE)
_EXIT_PREFIX = re.compile(r"^(exit code|exit status)\s*-?\d+\s*[:;,]\s*", re.IGNORECASE)
_ERRORISH = re.compile(
    r"error|fail|not found|no such|denied|refused|exception|cannot|can't|unable|missing|"
    r"no rule|invalid|unknown|undefined|timed? ?out|fatal",
    re.IGNORECASE,
)


def error_gist(text: str, limit: int = ERROR_CHARS) -> str:
    """The line of an error that says what went wrong ("Exit code 2" says nothing): the last
    line that reads like an error, else the last line; clipped."""
    lines = [_EXIT_PREFIX.sub("", ln.strip()) for ln in str(text).splitlines()]
    lines = [ln for ln in lines if ln and not _EXIT_LINE.match(ln) and ln not in ("…", "...")]
    if not lines:
        return ""
    pick = next((ln for ln in reversed(lines) if _ERRORISH.search(ln)), lines[-1])
    return pick if len(pick) <= limit else pick[: limit - 1].rstrip() + "…"


def quoted(action: str) -> str:
    """An action as it is shown: one line in backticks (a backtick inside becomes a look-alike,
    so it cannot end the quote), clipped."""
    text = " ".join(action.split()).replace("`", "ˋ")
    if len(text) > ACTION_CHARS:
        text = text[: ACTION_CHARS - 1].rstrip() + "…"
    return f"`{text}`"


def _sources(t: ActionTally, code: str) -> str:
    n = t.sources(code)
    if t.sessions_only(code):
        return f"in {n} session{'s' if n != 1 else ''}"
    return f"from {n} source{'s' if n != 1 else ''}"


def _tries(t: ActionTally, code: str) -> str:
    n = t.ok if code == OK else t.fail
    counted = t.ok + t.fail
    return f"{n} of {counted} tr{'ies' if counted != 1 else 'y'}, {_sources(t, code)}"


#: Recorded text that reads like orders to the agent, or points it somewhere: a tool's output
#: can carry a prompt injection, and memory must not replay it into a later session.
_ADDRESSED = re.compile(
    r"https?://|\bwww\.|\b(ignore|disregard|forget)\b.{0,40}\b(instruction|previous|above|rule)"
    r"|\b(you (must|should|are)|always run|never run|from now on|admin mode|system prompt)\b"
    r"|\b(assistant|agent|model)\s*[:,]",
    re.IGNORECASE,
)


def _with_error(text: str, t: ActionTally) -> str:
    gist = error_gist(t.error)
    if gist and (_ADDRESSED.search(t.error) or destructive_reason(gist)):
        return f"{text}; last error not shown (it reads like instructions)"
    return f"{text}; last error: {gist}" if gist else text


# -- the states of an action ---------------------------------------------------------------------


def never_worked(t: ActionTally) -> bool:
    """It failed and never worked (on the tasks tallied)."""
    return t.fail > 0 and t.ok == 0


def stopped_working(t: ActionTally) -> bool:
    """It used to work, and its newest :data:`STREAK` tries failed (drift)."""
    return t.ok > 0 and t.failing_streak() >= STREAK


def tries_since(t: ActionTally, tasks: Tallies) -> int:
    """How many attempts on these tasks (of any action) came after ``t``'s newest outcome (from
    the newest outcomes each tally keeps: a lower bound once many actions were tried)."""
    newest = t.recent[-1][0] if t.recent else t.last_at
    return sum(1 for other in tasks for at, _code in other.recent if at > newest)


def faded(t: ActionTally, tasks: Tallies) -> bool:
    """A single session's failure that :data:`FADE_TRIES` newer attempts on these tasks have
    passed by: too old and too thin to warn with (what failed once may work now; what failed
    in two sessions still warns, however old)."""
    return t.sources(FAIL) < 2 and tries_since(t, tasks) >= FADE_TRIES


def _age(t: ActionTally, tasks: Tallies) -> str:
    n = tries_since(t, tasks)
    return f", last tried {n} tries ago" if n >= AGE_SHOWN else ""


def warns(t: ActionTally) -> bool:
    """Whether the tally is a warning: it never worked, or it stopped working."""
    return never_worked(t) or stopped_working(t)


def works(t: ActionTally) -> bool:
    """It worked, its newest try did too, and it is not a command to ever suggest."""
    return t.ok > 0 and t.newest() == OK and destructive_reason(t.action) is None


def _worked_order(t: ActionTally) -> tuple[float, ...]:
    return (-t.sources(OK), -t.ok / max(t.ok + t.fail, 1), -t.last_at)


def _failed_order(t: ActionTally) -> tuple[float, ...]:
    return (-t.sources(FAIL), -t.fail, -t.last_at)


# -- task start ----------------------------------------------------------------------------------


def task_start_lines(
    here: Tallies,
    elsewhere: Tallies | None = None,
    *,
    skip: Collection[str] = (),
    max_lines: int = MAX_LINES,
) -> list[Line]:
    """The observations for a task: ``here`` tallies this project's attempts on tasks like it,
    ``elsewhere`` other projects'. ``skip``: normalised actions already covered (by a lesson).

    A failed command is shown from its second failure, or from its first once another command
    worked on these tasks; what worked is shown beside a failed one ("what worked instead"), or
    on its own when two sessions back it. Nothing is shown without on-topic evidence."""
    tallies = [t for t in here if t.key not in skip]
    worked = sorted((t for t in tallies if works(t)), key=_worked_order)
    lines: list[Line] = []
    failed = [
        t
        for t in tallies
        if ((never_worked(t) and (t.fail >= 2 or worked)) or stopped_working(t))
        and not faded(t, here)
    ]
    for t in sorted(failed, key=_failed_order)[:MAX_FAILED]:
        if never_worked(t):
            text = f"failed here: {quoted(t.action)} — {_tries(t, FAIL)}{_age(t, here)}"
        else:
            text = (
                f"failing here lately: {quoted(t.action)} — worked {t.ok} times, then failed "
                f"the last {t.failing_streak()} tries ({_sources(t, FAIL)})"
            )
        lines.append(Line(_with_error(text, t), t.key, True))
    shown_worked = [t for t in worked if lines or t.sources(OK) >= SUGGEST_SOURCES]
    for t in shown_worked[:MAX_WORKED]:
        label = "worked here" if not lines else "worked here instead"
        lines.append(Line(f"{label}: {quoted(t.action)} — {_tries(t, OK)}", t.key, False))
    for t in sorted(tallies, key=_worked_order):
        why = destructive_reason(t.action)
        if why and t.ok > 0 and t.sources(OK) >= SUGGEST_SOURCES:
            text = (
                f"recorded as working here but never suggested ({why}): {quoted(t.action)} — "
                f"{_tries(t, OK)}"
            )
            lines.append(Line(text, t.key, False))
            break
    lines += _elsewhere_lines(elsewhere, {ln.key for ln in lines} | set(skip), bool(lines))
    return lines[:max_lines]


def _elsewhere_lines(elsewhere: Tallies | None, shown: set[str], any_here: bool) -> list[Line]:
    """At most one failed and one worked line from other projects, each backed by two
    sessions (one source cannot reach another project's agent by volume)."""
    if elsewhere is None:
        return []
    tallies = [t for t in elsewhere if t.key not in shown]
    out: list[Line] = []
    failed = [t for t in tallies if warns(t) and t.sources(FAIL) >= SUGGEST_SOURCES]
    for t in sorted(failed, key=_failed_order)[:1]:
        text = f"failed in other projects: {quoted(t.action)} — {_tries(t, FAIL)}"
        out.append(Line(_with_error(text, t), t.key, True))
    worked = [t for t in tallies if works(t) and t.sources(OK) >= SUGGEST_SOURCES]
    if out or any_here:
        for t in sorted(worked, key=_worked_order)[:1]:
            text = f"worked in other projects: {quoted(t.action)} — {_tries(t, OK)}"
            out.append(Line(text, t.key, False))
    return out


# -- around a tool call --------------------------------------------------------------------------


def _instead(tasks: Tallies, key: str, *, limit: int = 1) -> list[Line]:
    """What worked on these tasks other than the action ``key``."""
    worked = sorted((t for t in tasks if t.key != key and works(t)), key=_worked_order)
    return [
        Line(f"worked instead on this task: {quoted(t.action)} — {_tries(t, OK)}", t.key, False)
        for t in worked[:limit]
    ]


def before_tool_lines(action: ActionTally | None, tasks: Tallies) -> list[Line]:
    """The repeat guard: ``action`` is this command's tally on the tasks like the current one
    (``None`` when it has none), ``tasks`` every action's. Silent unless the command failed
    here and its newest try did too."""
    if action is None or action.fail == 0 or action.newest() != FAIL:
        return []
    if faded(action, tasks):  # one old failure: a fact, not a warning
        text = (
            f"tried here before on this task: {quoted(action.action)} — "
            f"{_tries(action, FAIL)}{_age(action, tasks)}"
        )
        warn = False
    elif never_worked(action):
        text = (
            f"failed here before on this task: {quoted(action.action)} — "
            f"{_tries(action, FAIL)}, never worked"
        )
        warn = True
    elif stopped_working(action):
        text = (
            f"failing here lately on this task: {quoted(action.action)} — worked {action.ok} "
            f"times, then failed the last {action.failing_streak()} tries"
        )
        warn = True
    else:  # a mixed record whose newest try failed: a fact, not a warning
        text = (
            f"mixed here on this task: {quoted(action.action)} — worked {action.ok} of "
            f"{action.ok + action.fail} tries; the newest failed"
        )
        warn = False
    return [Line(_with_error(text, action), action.key, warn), *_instead(tasks, action.key)]


def after_failure_lines(before: ActionTally | None, tasks: Tallies, key: str) -> list[Line]:
    """Right after ``key`` failed: whether it had failed here before on this task (``before``
    is its tally without this failure), and what worked instead on the same task."""
    lines: list[Line] = []
    if before is not None and before.fail > 0:
        text = (
            f"failed here before on this task too: {quoted(before.action)} — "
            f"{before.fail} earlier {'failures' if before.fail != 1 else 'failure'} "
            f"({_sources(before, FAIL)})"
            + (f", though it worked {before.ok} times" if before.ok else ", never worked")
        )
        lines.append(Line(text, key, before.ok == 0))
    return lines + _instead(tasks, key, limit=2)


__all__ = [
    "HEADER",
    "MAX_LINES",
    "Line",
    "after_failure_lines",
    "before_tool_lines",
    "error_gist",
    "never_worked",
    "quoted",
    "stopped_working",
    "task_start_lines",
    "warns",
    "works",
]
