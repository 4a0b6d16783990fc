"""The lesson methods of the :class:`~mimir_core.Mimir` facade.

INTERFACE CONTRACT (other adapters code against these signatures):

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
imported when a method is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from ..memory import Mimir
    from ..types import AuditEvent, ConsolidationReport, Lesson, LessonDetail


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


class LessonsMixin:
    """Lesson methods; mixed into :class:`mimir_core.memory.Mimir`."""

    def _mimir(self) -> Mimir:
        return cast("Mimir", self)

    # -- serving -------------------------------------------------------------------------------

    def lessons(
        self,
        query: str,
        k: int = 5,
        *,
        scope: str | None = None,
        min_confidence: float | None = None,
    ) -> list[Lesson]:
        """Active, verified lessons relevant to ``query``; empty when none clears the bar.

        ``scope``: ``None`` serves every project's lessons but prefers this instance's scope,
        ``"*"`` every project alike, any other string that project's lessons and global ones.
        ``min_confidence`` defaults to 0.2 (the 5% lower bound of the lesson's claim).
        """
        from .serve import relevant_lessons

        ranked = relevant_lessons(
            self._mimir(), query, k, scope=scope, min_confidence=min_confidence
        )
        return [lesson for _score, lesson in ranked]

    def context(self, query: str, *, budget_chars: int = 2000, scope: str | None = None) -> str:
        """The block every adapter injects into a prompt: relevant lessons fenced as data.

        Each lesson is shown with its id and confidence inside ``<mimir-memory>`` ...
        ``</mimir-memory>`` with a note that it is recalled memory, not instructions (plus, when
        the evidence is strong, a recommendation that is not yet a lesson). Never longer than
        ``budget_chars``; ``""`` when nothing relevant clears the bar.
        """
        from .serve import context_block

        return context_block(self._mimir(), query, budget_chars=budget_chars, scope=scope)

    # -- consolidation ---------------------------------------------------------------------------

    def consolidate(
        self, *, dry_run: bool = False, judge: Any = None, force: bool = False
    ) -> ConsolidationReport:
        """Distil new experiences into candidate lessons, gate, sign and admit them.

        Without ``judge`` it is deterministic and needs no LLM. It only looks at what changed
        since the last run (``force=True``: everything); when another process is consolidating
        the same store it returns at once with ``ran=False``. ``dry_run`` writes nothing.
        """
        from .consolidate import run

        return run(self._mimir(), dry_run=dry_run, judge=judge, force=force)

    # -- reading ---------------------------------------------------------------------------------

    def get_lesson(self, ident: str) -> Lesson:
        """The lesson with this id (signature verified: a failing one comes back quarantined)."""
        from .lifecycle import load

        return load(self._mimir(), ident)[0]

    def lesson_detail(self, ident: str) -> LessonDetail:
        """The lesson, its supporting and contradicting experiences and its audit trail."""
        from ..types import LessonDetail
        from .lifecycle import load

        m = self._mimir()
        lesson, ok = load(m, ident)
        got = {e.id: e for e in m._get_many([*lesson.supporting_ids, *lesson.contradicting_ids])}
        from .team import provenance

        return LessonDetail(
            lesson=lesson,
            signature_valid=ok,
            provenance=provenance(m, lesson),
            supporting=[got[i] for i in lesson.supporting_ids if i in got],
            contradicting=[got[i] for i in lesson.contradicting_ids if i in got],
            audit=self.audit_log(lesson.id, limit=200),
        )

    def list_lessons(
        self, *, status: str | None = None, scope: str | None = None, limit: int = 100
    ) -> list[Lesson]:
        """Lessons, newest first, optionally filtered by status and scope."""
        from ..errors import InvalidInputError
        from ..store import sql_str
        from ..validate import ALL_SCOPES, scope_key
        from .lifecycle import STATUSES, load_many

        _limit(limit)
        clauses = []
        if status == "untrusted":  # not a stored status: who signed it, or local evidence
            from .team import untrusted

            found = [u.lesson for u in untrusted(self._mimir())]
            if scope is not None and scope != ALL_SCOPES:
                key = scope_key(scope, self._mimir().redact_patterns)
                found = [le for le in found if le.scope == key]
            found.sort(key=lambda le: (le.updated_at, le.id), reverse=True)
            return found[:limit]
        if status is not None:
            if status not in STATUSES:
                raise InvalidInputError(
                    "status",
                    f"must be one of {', '.join(STATUSES)} or untrusted; got {status!r}",
                )
            clauses.append(f"status = {sql_str(status)}")
        if scope is not None and scope != ALL_SCOPES:  # the key as records store it
            clauses.append(f"scope = {sql_str(scope_key(scope, self._mimir().redact_patterns))}")
        found = [le for le, _ok in load_many(self._mimir(), " AND ".join(clauses) or None)]
        if status is not None:  # a lesson quarantined on the way no longer has that status
            found = [le for le in found if le.status == status]
        found.sort(key=lambda le: (le.updated_at, le.id), reverse=True)
        return found[:limit]

    def audit_log(self, subject_id: str | None = None, *, limit: int = 100) -> list[AuditEvent]:
        """Audit entries, newest first (all of them, or one subject's)."""
        import json
        from datetime import datetime, timezone

        from ..store import AUDIT, sql_str
        from ..types import AuditEvent

        _limit(limit)
        where = f"subject_id = {sql_str(subject_id)}" if subject_id is not None else None
        rows = self._mimir().store.select(
            AUDIT, where, ["id", "ts", "actor", "subject_id", "event", "detail"]
        )
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

    # -- lifecycle -------------------------------------------------------------------------------

    def pin_lesson(self, ident: str, *, pinned: bool = True, actor: str = "api") -> Lesson:
        """Pin (or unpin) a lesson: pinned lessons are never quarantined automatically."""
        from .lifecycle import load_valid, save

        m = self._mimir()
        actor = _actor(actor)
        lesson = load_valid(m, ident, "pinned")
        if lesson.pinned == bool(pinned):
            return lesson
        lesson.pinned = bool(pinned)
        return save(
            m,
            lesson,
            actor=actor,
            event="pinned" if pinned else "unpinned",
            detail={},
            was_active=lesson.status == "active",
        )

    def quarantine_lesson(self, ident: str, reason: str, *, actor: str = "api") -> Lesson:
        """Stop serving a lesson (kept on record, with the reason in the audit log)."""
        return self._stop_lesson(ident, "quarantined", reason, actor)

    def retire_lesson(self, ident: str, reason: str, *, actor: str = "api") -> Lesson:
        """Retire a lesson for good (kept on record, invalid from now on)."""
        return self._stop_lesson(ident, "retired", reason, actor)

    def _stop_lesson(self, ident: str, status: str, reason: object, actor: object) -> Lesson:
        from .lifecycle import change_status, check_reason

        m = self._mimir()
        return change_status(
            m,
            ident,
            status,
            actor=_actor(actor),
            reason=check_reason(reason, m.redact_patterns),
            event=status,
        )

    def lesson_feedback(
        self,
        lesson_id: str,
        helped: bool,
        *,
        task: str | None = None,
        note: str | None = None,
        actor: str = "api",
        session_id: str | None = None,
    ) -> None:
        """Evidence from an agent on whether a recalled lesson helped (for the circuit breaker).

        It moves the lesson's confidence, and a lesson that credibly hurts is quarantined at
        once (unless pinned). Feedback on a lesson that is not active is recorded only.
        Feedback counts by independent source (``session_id``, else ``actor``): however often
        one session or client says a lesson hurt, that is one outcome, not many.
        """
        from ..errors import InvalidInputError, short
        from ..observations.tally import source_key
        from ..redact import sanitize
        from ..validate import MAX_NOTE
        from .evidence import note_feedback
        from .lifecycle import load_valid, save
        from .review import review

        if not isinstance(helped, bool):
            raise InvalidInputError("helped", f"must be true or false; got {short(helped)}")
        for field, value in (("task", task), ("note", note), ("session_id", session_id)):
            if value is not None and not isinstance(value, str):
                raise InvalidInputError(field, f"must be a string; got {short(value)}")
        m = self._mimir()
        actor = _actor(actor)
        lesson = load_valid(m, lesson_id, "given feedback")
        note_feedback(lesson, helped, source_key(session_id, None, actor))
        detail: dict[str, Any] = {"helped": helped}
        if task:
            detail["task"] = sanitize(task, limit=500, extra_patterns=m.redact_patterns)
        if note:
            detail["note"] = sanitize(note, limit=MAX_NOTE, extra_patterns=m.redact_patterns)
        saved = save(m, lesson, actor=actor, event="feedback", detail=detail)
        if saved.status == "active":
            review(m, saved, actor=actor, cause="feedback")
