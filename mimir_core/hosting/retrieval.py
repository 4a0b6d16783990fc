"""Lessons and experiences as retrieval documents: one ranking and one wording for every
retriever adapter (LangChain ``BaseRetriever``, LlamaIndex ``BaseRetriever``).

Lessons come first (distilled, verified rules, ordered by relevance), then the recalled
experiences (hybrid recall, best first); the list is cut at ``k``. Each document has a text for
a prompt and metadata with its kind, id, outcome or confidence, and provenance.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError, short

if TYPE_CHECKING:
    from ..memory import Mimir
    from ..types import Hit, Lesson

KINDS = ("lessons", "experiences")


@dataclass(frozen=True)
class RetrievedDoc:
    """A lesson or an experience, ready to become a framework's document."""

    id: str
    kind: str
    """``lesson`` or ``experience``."""
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)


def experience_doc(hit: Hit) -> RetrievedDoc:
    """A recalled experience as a document."""
    exp = hit.experience
    lines = [f"Task: {exp.task}", f"Tried: {exp.action}", f"Outcome: {exp.outcome}"]
    if exp.reason:
        lines.append(f"Why: {exp.reason}")
    return RetrievedDoc(
        id=exp.id,
        kind="experience",
        text="\n".join(lines),
        score=hit.score,
        metadata={
            "kind": "experience",
            "id": exp.id,
            "outcome": exp.outcome,
            "outcome_score": exp.score,
            "relevance": hit.score,
            "why": hit.why,
            "count": hit.count,
            "task": exp.task,
            "action": exp.action,
            "source": exp.source,
            "scope": exp.scope,
            "created_at": exp.created_at.isoformat(),
        },
    )


def lesson_doc(lesson: Lesson, rank: int) -> RetrievedDoc:
    """A served lesson as a document (``rank`` 0 is the most relevant)."""
    return RetrievedDoc(
        id=lesson.id,
        kind="lesson",
        text=f"Lesson ({lesson.kind}): {lesson.rule}\nApplies when: {lesson.trigger}",
        score=round(lesson.confidence, 6),
        metadata={
            "kind": "lesson",
            "id": lesson.id,
            "lesson_kind": lesson.kind,
            "confidence": lesson.confidence,
            "rank": rank,
            "trigger": lesson.trigger,
            "scope": lesson.scope,
            "supporting_ids": list(lesson.supporting_ids),
            "successes": lesson.successes,
            "failures": lesson.failures,
        },
    )


def retrieve(
    mimir: Mimir,
    query: str,
    k: int = 4,
    *,
    include: Collection[str] = KINDS,
    scope: str | None = None,
    outcome: str | None = None,
) -> list[RetrievedDoc]:
    """Up to ``k`` documents for ``query``: relevant lessons first, then experiences.

    ``include`` picks ``lessons`` and/or ``experiences``; ``outcome`` filters experiences.
    Raises :class:`~mimir_core.errors.InvalidInputError` for a bad argument.
    """
    kinds = set(include)
    if not kinds or kinds - set(KINDS):
        raise InvalidInputError("include", f"must be some of {KINDS}; got {short(include)}")
    docs: list[RetrievedDoc] = []
    if "lessons" in kinds:
        lessons = mimir.lessons(query, k, scope=scope)
        docs += [lesson_doc(le, i) for i, le in enumerate(lessons)]
    if "experiences" in kinds and len(docs) < k:
        hits = mimir.recall(query, k - len(docs), outcome=outcome, scope=scope)
        docs += [experience_doc(h) for h in hits]
    return docs[:k]
