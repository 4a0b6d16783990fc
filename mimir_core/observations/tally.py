"""How each action went on a set of related tasks, counted by independent source (stdlib only).

Both ways Mimir shows past attempts use these tallies: ``Mimir.context()`` tallies the
experiences its vector search found on topic, and the hooks tally the attempts digest's entries
their keyword match found plus the spool's tail. So the counting is the same everywhere; what is
shown, and in which words, is :mod:`mimir_core.observations.policy`'s.

**Independent sources, not volume.** Every attempt carries the session (or thread) it came
from; records without one count as one source per host. A tally keeps how many attempts
succeeded and failed *and* how many distinct sources each came from, and the rules that decide
what reaches an agent read the sources: fifty records from one session are one session's word.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..search.actions import normalise_action

#: Distinct sources remembered per tally and outcome (beyond that only the count grows).
SOURCE_CAP = 16
#: Newest outcomes remembered per tally (for "failed the last N tries").
RECENT_KEPT = 12
#: Longest error text kept per tally (its gist is shown, see :func:`error_gist`).
ERROR_KEPT = 400

OK, FAIL, OTHER = "o", "f", "p"


def source_key(session_id: object, thread_id: object = None, source: object = None) -> str:
    """The independent source of a record: its session, else its thread, else its host (all
    records of one host without a session count as one source). A short digest: the tallies
    travel in the hooks' digest file."""
    from ..lessons.sign import sha256_hex

    if isinstance(session_id, str) and session_id:
        raw = "s:" + session_id
    elif isinstance(thread_id, str) and thread_id:
        raw = "s:" + thread_id
    else:
        raw = "h:" + (source if isinstance(source, str) and source else "api")
    return raw[0] + sha256_hex(raw.encode("utf-8"))[:10]


#: In ``recommend``, the ε-gate and a lesson's confidence, one source's n records of an action
#: count as n / (1 + (n - 1) * this) observations: at most 1 / this = 2, however many it made.
#: Fifty successes from one session then weigh less than three from three sessions.
SOURCE_CORRELATION = 0.5
#: A lesson needs its supporting evidence from at least this many independent sources.
LESSON_SOURCES = 2
#: The host a record names when its caller named none (the Python API's default).
DEFAULT_SOURCE = "api"


def evidence_source(row: Mapping[str, Any]) -> str | None:
    """The independent source a stored record's evidence counts under: its session, else its
    thread, else the host that wrote it when that is not the API's default; ``None`` for an
    unattributed record (the Python API without a session: each such record is its own
    source, as a caller of the API could name any session anyway; every host adapter passes
    one). The same keys as :func:`source_key`, without the digest."""
    for field, prefix in (("session_id", "s:"), ("thread_id", "s:")):
        value = row.get(field)
        if isinstance(value, str) and value:
            return prefix + value
    source = row.get("source")
    if isinstance(source, str) and source and source != DEFAULT_SOURCE:
        return "h:" + source
    return None


def independence_weights(sources: Sequence[str | None]) -> list[float]:
    """Each record's weight when its source made n of them: 1 / (1 + (n - 1) ·
    :data:`SOURCE_CORRELATION`), so a source's records sum to at most 2 observations;
    an unattributed record (``None``) weighs 1."""
    made: dict[str, int] = {}
    for src in sources:
        if src is not None:
            made[src] = made.get(src, 0) + 1
    return [
        1.0 if src is None else 1.0 / (1.0 + (made[src] - 1) * SOURCE_CORRELATION)
        for src in sources
    ]


def independent_sources(sources: Sequence[str | None]) -> int:
    """How many independent sources some records come from (each unattributed one its own)."""
    return len({s for s in sources if s is not None}) + sum(1 for s in sources if s is None)


def outcome_code(outcome: object, score: object = None) -> str:
    """``o`` for a success, ``f`` for a failure, ``p`` for anything else (a partial outcome,
    an interrupted call: neither worked nor failed)."""
    if outcome == "success":
        return OK
    if outcome == "failure":
        return FAIL
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        return OK if score >= 0.99 else FAIL if score <= 0.01 else OTHER
    return OTHER


class ActionTally:
    """One action's attempts on a set of tasks: counts, sources, newest outcomes, last error."""

    __slots__ = (
        "action",
        "error",
        "error_at",
        "fail",
        "fail_sources",
        "key",
        "last_at",
        "ok",
        "ok_sources",
        "other",
        "recent",
    )

    def __init__(self, action: str, key: str | None = None) -> None:
        self.action = action
        self.key = key if key is not None else normalise_action(action)
        self.ok = 0
        self.fail = 0
        self.other = 0
        self.ok_sources: list[str] = []
        self.fail_sources: list[str] = []
        self.recent: list[tuple[float, str]] = []  # (time, outcome code), oldest first
        self.error = ""
        self.error_at = 0.0
        self.last_at = 0.0

    # -- counting ----------------------------------------------------------------------------

    @property
    def tries(self) -> int:
        return self.ok + self.fail + self.other

    def add(self, code: str, at: float, source: str, error: str = "", action: str = "") -> None:
        """Count one attempt (``code`` from :func:`outcome_code`)."""
        if code == OK:
            self.ok += 1
            _add_source(self.ok_sources, source)
        elif code == FAIL:
            self.fail += 1
            _add_source(self.fail_sources, source)
            if error and at >= self.error_at:
                self.error, self.error_at = error[-ERROR_KEPT:], at
        else:
            self.other += 1
        if code in (OK, FAIL):
            self.recent = _newest([*self.recent, (at, code)])
        if at >= self.last_at:
            self.last_at = at
            if action:
                self.action = action  # the newest phrasing names it

    def merge(self, other: ActionTally) -> None:
        """Add ``other``'s attempts (the same action on other tasks, or other records)."""
        self.ok += other.ok
        self.fail += other.fail
        self.other += other.other
        for s in other.ok_sources:
            _add_source(self.ok_sources, s)
        for s in other.fail_sources:
            _add_source(self.fail_sources, s)
        self.recent = _newest([*self.recent, *other.recent])
        if other.error and other.error_at >= self.error_at:
            self.error, self.error_at = other.error, other.error_at
        if other.last_at >= self.last_at:
            self.last_at = other.last_at
            self.action = other.action or self.action

    def copy(self) -> ActionTally:
        out = ActionTally(self.action, self.key)
        out.merge(self)
        return out

    # -- reading -----------------------------------------------------------------------------

    def failing_streak(self) -> int:
        """How many of the newest outcomes in a row are failures."""
        n = 0
        for _at, code in reversed(self.recent):
            if code != FAIL:
                break
            n += 1
        return n

    def newest(self) -> str:
        """The newest outcome's code (``""`` when it never succeeded or failed)."""
        return self.recent[-1][1] if self.recent else ""

    def sources(self, code: str) -> int:
        """Independent sources of the successes (``o``) or failures (``f``)."""
        return len(self.ok_sources if code == OK else self.fail_sources)

    def sessions_only(self, code: str) -> bool:
        """Whether every source behind ``code``'s attempts is a session (not a whole host)."""
        found = self.ok_sources if code == OK else self.fail_sources
        return all(s.startswith("s") for s in found)

    # -- the digest's form -------------------------------------------------------------------

    def to_json(self) -> list[Any]:
        return [
            self.action,
            self.ok,
            self.fail,
            self.other,
            self.ok_sources,
            self.fail_sources,
            [[round(at, 3), code] for at, code in self.recent],
            self.error,
            round(self.error_at, 3),
            round(self.last_at, 3),
        ]

    @classmethod
    def from_json(cls, key: str, data: Any) -> ActionTally | None:
        """The tally of a digest entry, or ``None`` when it is not one (never raises)."""
        try:
            action, ok, fail, other, oks, fails, recent, error, error_at, last_at = data
            out = cls(str(action), key)
            out.ok, out.fail, out.other = int(ok), int(fail), int(other)
            out.ok_sources = [str(s) for s in oks][:SOURCE_CAP]
            out.fail_sources = [str(s) for s in fails][:SOURCE_CAP]
            out.recent = _newest([(float(at), str(code)) for at, code in recent])
            out.error, out.error_at, out.last_at = str(error), float(error_at), float(last_at)
            return out
        except (TypeError, ValueError):
            return None


def _add_source(found: list[str], source: str) -> None:
    if source not in found:
        if len(found) >= SOURCE_CAP:
            return
        found.append(source)


def _newest(items: list[tuple[float, str]]) -> list[tuple[float, str]]:
    return sorted(set(items))[-RECENT_KEPT:]


class Tallies:
    """The tallies of every action on a set of tasks, keyed by normalised action."""

    def __init__(self) -> None:
        self.by_key: dict[str, ActionTally] = {}

    def add_record(self, record: Mapping[str, Any]) -> None:
        """Count one experience (a stored row, a spooled record): its action, outcome, score,
        reason, created_at, session_id, thread_id and source."""
        action = record.get("action")
        if not isinstance(action, str) or not action.strip():
            return
        key = normalise_action(action)
        if not key:
            return
        tally = self.by_key.get(key)
        if tally is None:
            tally = self.by_key[key] = ActionTally(action.strip(), key)
        code = outcome_code(record.get("outcome"), record.get("score"))
        reason = record.get("reason")
        tally.add(
            code,
            _timestamp(record.get("created_at")),
            source_key(record.get("session_id"), record.get("thread_id"), record.get("source")),
            reason if isinstance(reason, str) else "",
            action.strip(),
        )

    def merge_tally(self, tally: ActionTally) -> None:
        have = self.by_key.get(tally.key)
        if have is None:
            self.by_key[tally.key] = tally.copy()
        else:
            have.merge(tally)

    def merge(self, other: Tallies) -> None:
        for tally in other.by_key.values():
            self.merge_tally(tally)

    def __iter__(self) -> Iterator[ActionTally]:
        return iter(self.by_key.values())

    def __len__(self) -> int:
        return len(self.by_key)

    def get(self, key: str) -> ActionTally | None:
        return self.by_key.get(key)


def _timestamp(value: object) -> float:
    if isinstance(value, bool):
        return 0.0
    if isinstance(value, (int, float)):
        return float(value)
    ts = getattr(value, "timestamp", None)  # a datetime
    if callable(ts):
        return float(ts())
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            from datetime import datetime

            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                return 0.0
    return 0.0


__all__ = [
    "FAIL",
    "OK",
    "OTHER",
    "ActionTally",
    "Tallies",
    "outcome_code",
    "source_key",
]
