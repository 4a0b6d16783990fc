"""The bodies of the lesson methods of the :class:`~mimir_core.Mimir` facade.

The facade declares each lesson method with its explicit, typed signature (what
``inspect.signature`` shows a host) and delegates here; these functions take its
:class:`~mimir_core.deps.Deps`, or only the part they need (``audit_log`` takes the store), as an
explicit argument, so they run and are tested with no facade.

INTERFACE CONTRACT (other adapters code against these signatures, on ``Mimir``):

* ``lessons(query, k=5, *, scope=None, min_confidence=None) -> list[Lesson]``
* ``context(query, *, budget_chars=2000, scope=None) -> str``
* ``consolidate(*, dry_run=False, judge=None, force=False) -> ConsolidationReport``
* ``get_lesson(id) -> Lesson``; ``lesson_detail(id) -> LessonDetail``
* ``list_lessons(*, status=None, scope=None, limit=100) -> list[Lesson]``
* ``pin_lesson(id, *, pinned=True, actor="api") -> Lesson``
* ``quarantine_lesson(id, reason, *, actor="api") -> Lesson``
* ``retire_lesson(id, reason, *, actor="api") -> Lesson``
* ``lesson_feedback(lesson_id, helped, *, task=None, note=None, actor="api",
  session_id=None) -> None``
* ``audit_log(subject_id=None, *, limit=100) -> list[AuditEvent]``
* ``forget(id, *, with_experiences=False)`` (on the facade itself) removes a lesson too.

This module stays light at import time (stdlib only): the work happens in the sibling modules,
imported when a function is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..deps import Deps
    from ..store.core import Store
    from ..types import AuditEvent, ConsolidationReport, Lesson, LessonDetail
    from .judge import Judge


def _limit(value: object, field: str = "limit") -> int:
    from ..errors import InvalidInputError, short

    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000:
        raise InvalidInputError(field, f"must be an integer from 1 to 10000; got {short(value)}")
    return value


def _actor(value: object) -> str:
    from ..errors import InvalidInputError, short

    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise InvalidInputError("actor", f"must be a short non-empty string; got {short(value)}")
    return value.strip()


# -- serving ---------------------------------------------------------------------------------------


def lessons(
    deps: Deps, query: str, k: int, *, scope: str | None, min_confidence: float | None
) -> list[Lesson]:
    """:meth:`Mimir.lessons`: the ranked lessons without their relevance scores."""
    from .serve import relevant_lessons

    ranked = relevant_lessons(deps, query, k, scope=scope, min_confidence=min_confidence)
    return [lesson for _score, lesson in ranked]


def context(deps: Deps, query: str, *, budget_chars: int, scope: str | None) -> str:
    """:meth:`Mimir.context`: the fenced prompt block (see :func:`.serve.context_block`)."""
    from .serve import context_block

    return context_block(deps, query, budget_chars=budget_chars, scope=scope)


# -- consolidation ---------------------------------------------------------------------------------


def consolidate(
    deps: Deps, *, dry_run: bool, judge: Judge | None, force: bool
) -> ConsolidationReport:
    """:meth:`Mimir.consolidate`; a file that cannot be written (a full disk) is a
    :class:`StoreError` naming it, since what was stored before stays."""
    from ..errors import StoreError
    from .consolidate import run

    try:
        return run(deps, dry_run=dry_run, judge=judge, force=force)
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        raise StoreError(
            f"consolidate: cannot write{where}: {exc.strerror or exc}; free some space "
            f"and run it again (what was stored stays)"
        ) from exc


# -- reading ---------------------------------------------------------------------------------------


def get_lesson(deps: Deps, ident: str) -> Lesson:
    """:meth:`Mimir.get_lesson`: the lesson as loaded (a failing signature quarantines it)."""
    from .lifecycle import load

    return load(deps, ident)[0]


def lesson_detail(deps: Deps, ident: str) -> LessonDetail:
    """:meth:`Mimir.lesson_detail`: the lesson with its evidence, provenance and audit trail."""
    from ..types import LessonDetail
    from .lifecycle import load
    from .team import provenance

    lesson, ok = load(deps, ident)
    got = {e.id: e for e in deps.get_many([*lesson.supporting_ids, *lesson.contradicting_ids])}
    return LessonDetail(
        lesson=lesson,
        signature_valid=ok,
        provenance=provenance(deps, lesson),
        supporting=[got[i] for i in lesson.supporting_ids if i in got],
        contradicting=[got[i] for i in lesson.contradicting_ids if i in got],
        audit=audit_log(deps.store, lesson.id, limit=200),
    )


def list_lessons(deps: Deps, *, status: str | None, scope: str | None, limit: int) -> list[Lesson]:
    """:meth:`Mimir.list_lessons`: newest first; ``untrusted`` is not a stored status, so it is
    answered from the trust view rather than the table."""
    from ..errors import InvalidInputError
    from ..ingest.validate import ALL_SCOPES, scope_key
    from ..store.filters import Eq, all_of
    from .lifecycle import STATUSES, load_many

    _limit(limit)
    by_status = by_scope = None
    if status == "untrusted":  # not a stored status: who signed it, or local evidence
        from .team import untrusted

        found = [u.lesson for u in untrusted(deps)]
        if scope is not None and scope != ALL_SCOPES:
            key = scope_key(scope, deps.redact_patterns)
            found = [le for le in found if le.scope == key]
        found.sort(key=lambda le: (le.updated_at, le.id), reverse=True)
        return found[:limit]
    if status is not None:
        if status not in STATUSES:
            raise InvalidInputError(
                "status",
                f"must be one of {', '.join(STATUSES)} or untrusted; got {status!r}",
            )
        by_status = Eq("status", status)
    if scope is not None and scope != ALL_SCOPES:  # the key as records store it
        by_scope = Eq("scope", scope_key(scope, deps.redact_patterns))
    found = [le for le, _ok in load_many(deps, all_of(by_status, by_scope))]
    if status is not None:  # a lesson quarantined on the way no longer has that status
        found = [le for le in found if le.status == status]
    found.sort(key=lambda le: (le.updated_at, le.id), reverse=True)
    return found[:limit]


def audit_log(store: Store, subject_id: str | None, *, limit: int) -> list[AuditEvent]:
    """:meth:`Mimir.audit_log`: the audit table needs only the store, not the facade."""
    import json
    from datetime import datetime, timezone

    from ..store.core import AUDIT
    from ..store.filters import Eq
    from ..types import AuditEvent

    _limit(limit)
    where = Eq("subject_id", subject_id) if subject_id is not None else None
    rows = store.select(AUDIT, where, ["id", "ts", "actor", "subject_id", "event", "detail"])
    rows.sort(key=lambda r: (float(r["ts"]), r["id"]), reverse=True)
    out = []
    for r in rows[:limit]:
        try:
            detail = json.loads(r.get("detail") or "{}")
        except ValueError:
            detail = {"raw": r.get("detail")}
        out.append(
            AuditEvent(
                id=r["id"],
                ts=datetime.fromtimestamp(float(r["ts"]), tz=timezone.utc),
                actor=r.get("actor") or "",
                subject_id=r.get("subject_id") or "",
                event=r.get("event") or "",
                detail=detail if isinstance(detail, dict) else {"value": detail},
            )
        )
    return out


# -- lifecycle -------------------------------------------------------------------------------------


def pin_lesson(deps: Deps, ident: str, *, pinned: bool, actor: str) -> Lesson:
    """:meth:`Mimir.pin_lesson`; pinning to the state it already has writes nothing."""
    from .lifecycle import load_valid, save

    actor = _actor(actor)
    lesson = load_valid(deps, ident, "pinned")
    if lesson.pinned == bool(pinned):
        return lesson
    lesson.pinned = bool(pinned)
    return save(
        deps,
        lesson,
        actor=actor,
        event="pinned" if pinned else "unpinned",
        detail={},
        was_active=lesson.status == "active",
    )


def stop_lesson(deps: Deps, ident: str, status: str, reason: object, actor: object) -> Lesson:
    """:meth:`Mimir.quarantine_lesson` and :meth:`Mimir.retire_lesson` (``status`` says which):
    the reason is checked and redacted before it reaches the audit log."""
    from .lifecycle import change_status, check_reason

    return change_status(
        deps,
        ident,
        status,
        actor=_actor(actor),
        reason=check_reason(reason, deps.redact_patterns),
        event=status,
    )


def lesson_feedback(
    deps: Deps,
    lesson_id: str,
    helped: bool,
    *,
    task: str | None,
    note: str | None,
    actor: str,
    session_id: str | None,
) -> None:
    """:meth:`Mimir.lesson_feedback`: agents send these inputs, so each is type-checked here,
    and task and note are redacted before they are stored."""
    from ..errors import InvalidInputError, short
    from ..ingest.validate import MAX_NOTE
    from ..observations.tally import source_key
    from ..redact.core import sanitize
    from .evidence import note_feedback
    from .lifecycle import load_valid, save
    from .review import review

    if not isinstance(helped, bool):
        raise InvalidInputError("helped", f"must be true or false; got {short(helped)}")
    for field, value in (("task", task), ("note", note), ("session_id", session_id)):
        if value is not None and not isinstance(value, str):
            raise InvalidInputError(field, f"must be a string; got {short(value)}")
    actor = _actor(actor)
    lesson = load_valid(deps, lesson_id, "given feedback")
    note_feedback(lesson, helped, source_key(session_id, None, actor))
    detail: dict[str, Any] = {"helped": helped}
    if task:
        detail["task"] = sanitize(task, limit=500, extra_patterns=deps.redact_patterns)
    if note:
        detail["note"] = sanitize(note, limit=MAX_NOTE, extra_patterns=deps.redact_patterns)
    saved = save(deps, lesson, actor=actor, event="feedback", detail=detail)
    if saved.status == "active":
        review(deps, saved, actor=actor, cause="feedback")
