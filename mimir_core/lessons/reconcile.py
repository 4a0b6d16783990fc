"""Keep the lessons table, its heads and its audit trail in agreement, and say when they are not.

Three things can leave them apart, and each is handled here (run by consolidation and by
``mimir doctor``):

* **A crash between the lesson write and its audit append** (or its head): the row is there,
  valid and maybe served, with no audit entry for its latest write. :func:`reconcile` adds the
  missing entry (``reconciled``) and the missing head, and logs it.
* **A row deleted outside Mimir**: its head (``lesson_head:<id>`` in ``meta``) outlives it.
  :func:`report_missing` reports it as deleted: an audit entry ``row_missing`` and a line in
  ``<home>/logs/lessons.log`` (once per lesson), and a finding of doctor and the UI for as
  long as the head stays. ``mimir forget ID`` acknowledges it (drops the head).
* **Rows written before placement bindings**: bound, or quarantined if retargeted
  (:func:`~.lifecycle.ensure_bound`).

A rollback of the whole store (rows, heads and audit together) cannot be told from the inside.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..store.core import AUDIT, LESSONS, META
from ..store.filters import In, Like
from .keys import key_problem, signing_key
from .lifecycle import ensure_bound, load_many, log_event
from .storage import HEAD_PREFIX, heads, record_heads

if TYPE_CHECKING:
    from ..deps import Deps

log = logging.getLogger("mimir.lessons")

#: ``meta`` key marking a deletion already audited and logged (the head stays: still reported).
MISSING_PREFIX = "lesson_missing:"


@dataclass
class Reconciled:
    """What :func:`maintain` found and did."""

    missing: list[str] = field(default_factory=list)
    """Lessons whose head exists but whose row is gone (deleted outside Mimir)."""
    audited: list[str] = field(default_factory=list)
    """Lessons whose latest write had no audit entry: one was added."""
    heads_added: list[str] = field(default_factory=list)
    bound: int = 0


def head_ids(deps: Deps) -> dict[str, float]:
    """Lesson id -> the ``updated_at`` of its head, for every head in ``meta``."""
    out: dict[str, float] = {}
    for row in deps.store.select(META, Like("key", HEAD_PREFIX + "%"), ["key", "value"]):
        ident = str(row["key"])[len(HEAD_PREFIX) :]
        try:
            out[ident] = float(json.loads(row["value"])["u"])
        except (ValueError, TypeError, KeyError):
            out[ident] = 0.0
    return out


def missing_lessons(deps: Deps) -> list[str]:
    """Ids of lessons that have a head but no row: deleted outside Mimir."""
    known = head_ids(deps)
    if not known:
        return []
    present = {str(r["id"]) for r in deps.store.select(LESSONS, None, ["id"])}
    return sorted(i for i in known if i not in present)


def report_missing(deps: Deps) -> list[str]:
    """:func:`missing_lessons`, each audited and logged the first time it is seen."""
    gone = missing_lessons(deps)
    if not gone:
        return gone
    told = {
        str(r["key"])[len(MISSING_PREFIX) :]
        for r in deps.store.select(META, In("key", [MISSING_PREFIX + i for i in gone]), ["key"])
    }
    fresh = [i for i in gone if i not in told]
    why = "its row is gone from the lessons table but its head remains: deleted outside Mimir"
    for ident in fresh:
        deps.audit("mimir", ident, "row_missing", {"reason": why})
        log_event(deps.home, "row_missing", lesson=ident)
        log.warning("lesson %s: %s", ident, why)
    if fresh:
        deps.store.set_meta({MISSING_PREFIX + i: "1" for i in fresh})
    return gone


def lesson_problems(deps: Deps) -> list[str]:
    """What stops lessons from being trusted, in words (the UI shows them): a key problem, and
    lessons deleted outside Mimir (each audited and logged once, :func:`report_missing`)."""
    out = []
    problem = key_problem(deps)
    if problem is not None:
        out.append(problem)
    out.extend(
        f"lesson {ident} was deleted outside Mimir: its row is gone but its head remains; "
        f"restore it from a backup (`mimir import`) or acknowledge with `mimir forget {ident}`"
        for ident in report_missing(deps)
    )
    return out


def acknowledge_missing(deps: Deps, ident: str) -> bool:
    """Forget a lesson deleted outside Mimir (drop its head and marker); ``False`` if it has no
    head."""
    keys = [HEAD_PREFIX + ident, MISSING_PREFIX + ident]
    if not deps.store.count(META, In("key", keys[:1])):
        return False
    deps.store.delete(META, In("key", keys))
    deps.audit("api", ident, "forgotten", {"table": LESSONS, "row": "already missing"})
    return True


def reconcile(deps: Deps) -> tuple[list[str], list[str]]:
    """Add the audit entries and heads that a crash left out, for valid lessons; returns
    (ids audited, ids whose head was recorded)."""
    pairs = [(le, ok) for le, ok in load_many(deps, None, refresh=False) if ok]
    if not pairs:
        return [], []
    ids = [le.id for le, _ok in pairs]
    latest: dict[str, float] = {}
    for start in range(0, len(ids), 500):
        where = In("subject_id", ids[start : start + 500])
        for r in deps.store.select(AUDIT, where, ["subject_id", "ts"]):
            sid = str(r["subject_id"])
            latest[sid] = max(latest.get(sid, 0.0), float(r["ts"] or 0.0))
    audited: list[str] = []
    for lesson, _ok in pairs:
        written = lesson.updated_at.timestamp()
        if latest.get(lesson.id, -1.0) < written - 1e-3:  # no entry for its latest write
            detail: dict[str, Any] = {
                "reason": "no audit entry for the lesson's latest write (interrupted before "
                "its audit); added afterwards",
                "status": lesson.status,
                "written_at": written,
            }
            deps.audit("mimir", lesson.id, "reconciled", detail)
            log_event(deps.home, "reconciled", lesson=lesson.id, status=lesson.status)
            audited.append(lesson.id)
    hd = heads(deps.store, ids)
    behind = [
        le for le, _ok in pairs if le.id not in hd or le.updated_at.timestamp() > hd[le.id][0]
    ]
    if behind:  # a crash between the row and its head: the row is newer, so it is the head
        record_heads(deps.store, behind)
    return audited, [le.id for le in behind]


def maintain(deps: Deps) -> Reconciled:
    """Check the key (:class:`~mimir_core.errors.SigningKeyError` if it cannot verify), bind
    old rows, add missing audit entries and heads, report deleted rows."""
    signing_key(deps)
    out = Reconciled()
    out.bound = ensure_bound(deps)
    out.audited, out.heads_added = reconcile(deps)
    out.missing = report_missing(deps)
    return out
