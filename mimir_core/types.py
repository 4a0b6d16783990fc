"""Mimir's data model: experiences, lessons, recall hits and recommendations (pydantic v2)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Outcome = Literal["success", "failure", "partial"]
OUTCOMES: tuple[str, ...] = ("success", "failure", "partial")
#: The score an outcome stands for when the caller gives none.
DEFAULT_SCORES: dict[str, float] = {"success": 1.0, "failure": 0.0, "partial": 0.5}

LessonKind = Literal["avoid", "prefer", "procedure"]
LessonStatus = Literal["candidate", "active", "quarantined", "superseded", "retired"]


def utcnow() -> datetime:
    """Now, as an aware UTC datetime."""
    return datetime.now(timezone.utc)


class Experience(BaseModel):
    """One attempt of an agent: the task, what it tried, and how that turned out."""

    model_config = ConfigDict(extra="forbid")

    id: str
    task: str
    action: str
    outcome: Outcome
    score: float = Field(ge=0.0, le=1.0)
    reason: str = ""
    context: dict[str, Any] = Field(default_factory=dict)
    scope: str = ""
    source: str = "api"
    session_id: str | None = None
    thread_id: str | None = None
    recalled_lesson_ids: list[str] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=utcnow)
    superseded_by: str | None = None
    embed_model: str = ""
    idempotency_key: str | None = None


class Hit(BaseModel):
    """A recalled experience with its relevance score and why it matched."""

    experience: Experience
    score: float
    similarity: float
    matched_terms: list[str] = Field(default_factory=list)
    why: str = ""
    count: int = 1
    """How many near-identical experiences (same task, action and outcome, up to case and
    spacing) this hit stands for; the newest of them is ``experience``."""


class Alternative(BaseModel):
    """An action considered by :meth:`Mimir.recommend`, with its evidence."""

    action: str
    confidence: float
    successes: float
    failures: float
    evidence_ids: list[str] = Field(default_factory=list)
    variants: list[str] = Field(default_factory=list)


class Recommendation(BaseModel):
    """The best-supported action for a task, with an honest confidence.

    ``confidence`` is the 10% lower bound of the Beta(0.5 + successes, 0.5 + failures) posterior
    over on-topic evidence (each record counted by how likely it is the same kind of task): the
    success rate we are 90% sure the action beats (an honest floor, below the observed success
    rate by design). ``expected_success`` is the calibrated point
    estimate, what to expect on average: the posterior mean over this project's on-topic
    evidence (other projects' evidence counts as a small prior; older outcomes of the action
    fade as newer ones arrive).
    """

    task: str
    action: str
    confidence: float
    expected_success: float | None = None
    successes: float
    failures: float
    evidence_ids: list[str] = Field(default_factory=list)
    variants: list[str] = Field(default_factory=list)
    explored: bool = False
    alternatives: list[Alternative] = Field(default_factory=list)


class GateResult(BaseModel):
    """What the evidence gate measured for a lesson."""

    lift: float = 0.0
    noise: float = 0.0
    n_with: int = 0
    n_without: int = 0
    passed: bool = False
    needed: int = 0
    detail: str = ""


class Lesson(BaseModel):
    """A rule distilled from experiences, served to agents only when evidence says it helps."""

    model_config = ConfigDict(extra="forbid")

    id: str
    rule: str
    trigger: str
    scope: str = ""
    kind: LessonKind = "procedure"
    status: LessonStatus = "candidate"
    supporting_ids: list[str] = Field(default_factory=list)
    contradicting_ids: list[str] = Field(default_factory=list)
    successes: float = 0.0
    failures: float = 0.0
    confidence: float = 0.0
    gate: GateResult = Field(default_factory=GateResult)
    provenance: dict[str, Any] = Field(default_factory=dict)
    valid_from: datetime = Field(default_factory=utcnow)
    invalid_at: datetime | None = None
    superseded_by: str | None = None
    pinned: bool = False
    action: str = ""
    """The action the rule is about (what following it means, for the gate)."""
    feedback_helped: int = 0
    feedback_hurt: int = 0
    signature: str = ""
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class AuditEvent(BaseModel):
    """One entry of the audit log: who changed what, when and why."""

    id: str
    ts: datetime
    actor: str
    subject_id: str
    event: str
    detail: dict[str, Any] = Field(default_factory=dict)


class Stats(BaseModel):
    """A summary of a store."""

    store_uri: str
    schema_version: int
    embedder: str
    experiences: int
    by_outcome: dict[str, int]
    by_source: dict[str, int]
    by_scope: dict[str, int]
    lessons: dict[str, int]
    superseded: int
    table_version: int
    fragments: int
    disk_bytes: int | None


class LessonDetail(BaseModel):
    """A lesson with its evidence and audit trail (``mimir show ID``)."""

    lesson: Lesson
    signature_valid: bool
    provenance: dict[str, Any] = Field(default_factory=dict)
    """Who wrote and signed it, their trust status, where it was confirmed (team memory)."""
    supporting: list[Experience] = Field(default_factory=list)
    contradicting: list[Experience] = Field(default_factory=list)
    audit: list[AuditEvent] = Field(default_factory=list)


class ConsolidationReport(BaseModel):
    """What one consolidation run did."""

    dry_run: bool = False
    ran: bool = True
    reason: str = ""
    examined: int = 0
    clusters: int = 0
    candidates: list[Lesson] = Field(default_factory=list)
    admitted: list[str] = Field(default_factory=list)
    merged: list[str] = Field(default_factory=list)
    superseded: list[str] = Field(default_factory=list)
    quarantined: list[str] = Field(default_factory=list)
    faded: list[str] = Field(default_factory=list)
    """Active lessons whose action stopped behaving as they say: back to candidate."""
    pending: list[str] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)
    """Rules proposed but dropped (weak LLM rules, with why)."""
    llm_calls: int = 0
    llm_tokens: int = 0
    seconds: float = 0.0
