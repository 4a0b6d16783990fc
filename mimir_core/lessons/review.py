"""Re-examining an admitted lesson against new evidence: confidence and the circuit breaker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..store.filters import Has
from ..types import GateResult, Lesson
from .evidence import Exp, apply_evidence, feedback_scores, load_exps, topic_of
from .gate import breaker
from .lifecycle import save

if TYPE_CHECKING:
    from ..deps import Deps


def attributed(deps: Deps, lesson_id: str) -> list[Exp]:
    """Experiences recorded with the lesson in context (``recalled_lesson_ids``)."""
    return load_exps(deps.store, Has("recalled_lesson_ids", lesson_id))


def measure(deps: Deps, lesson: Lesson) -> tuple[Lesson, bool, GateResult]:
    """(lesson with fresh evidence, should trip?, breaker measurement); nothing is written."""
    trigger_vec = deps.embedder.embed_one(lesson.trigger)
    avec = deps.embedder.embed_one(lesson.action or lesson.rule)
    key = str(lesson.provenance.get("action_key") or "")
    _cen, topic = topic_of(deps.store, lesson, trigger_vec)
    fresh = apply_evidence(lesson.model_copy(deep=True), key, avec, topic)
    attr = attributed(deps, lesson.id)
    with_ids = {e.id for e in attr}
    with_scores = [e.score for e in attr]
    with_scores += feedback_scores(lesson)
    without = [e.score for e in topic if e.id not in with_ids and lesson.id not in e.recalled]
    trip, result = breaker(with_scores, without)
    return fresh, trip, result


def review(deps: Deps, lesson: Lesson, *, actor: str, cause: str) -> tuple[Lesson, bool]:
    """Update an admitted lesson's evidence; quarantine it if it credibly hurts (unless pinned).

    Returns (the saved lesson, whether it was quarantined now).
    """
    fresh, trip, result = measure(deps, lesson)
    changed = (
        fresh.supporting_ids != lesson.supporting_ids
        or fresh.contradicting_ids != lesson.contradicting_ids
        or fresh.confidence != lesson.confidence
    )
    if trip and not fresh.pinned and fresh.status == "active":
        fresh.status = "quarantined"
        saved = save(
            deps,
            fresh,
            actor=actor,
            event="quarantined",
            detail={
                "reason": f"circuit breaker: outcomes with this lesson in context are worse "
                f"than without it ({result.detail})",
                "cause": cause,
                "lift": result.lift,
                "noise": result.noise,
                "was": "active",
            },
            was_active=True,
        )
        return saved, True
    if trip and fresh.pinned:
        deps.audit(
            actor, fresh.id, "breaker_ignored", {"reason": "pinned", "measured": result.detail}
        )
    if changed:
        return (
            save(
                deps,
                fresh,
                actor=actor,
                event="evidence_updated",
                detail={"cause": cause, "confidence": fresh.confidence},
            ),
            False,
        )
    return lesson, False
