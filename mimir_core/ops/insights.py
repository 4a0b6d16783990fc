"""Read-only summaries of a store for people looking at it (``mimir ui``).

Every function takes a :class:`~mimir_core.deps.Deps` (``m.deps``) and explicit arguments,
reads through the store and returns small pydantic models; nothing here writes. Bad arguments raise
:class:`~mimir_core.errors.InvalidInputError` naming the field.

* :func:`activity`: experiences per day, by outcome and by source.
* :func:`family_success`: success rate per task family (the topics consolidation mines).
* :func:`recent_injections`: the latest experiences recorded with lessons in context.
* :func:`attribution`: a lesson's outcomes with it in context versus its topic without it.
* :func:`search_text`: experiences whose task, action or reason contains a text.
* :func:`search_lessons`: lessons of a status whose id, rule, trigger or action has a text.
* :func:`pulse`: counts and newest timestamps, cheap enough to poll for live pages.
* :func:`learning_curve`: the newest ``learning*.json`` of the learning benchmark, if any.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ..errors import InvalidInputError, short
from ..lessons import api as _lessons
from ..store.core import EXPERIENCES, LESSONS
from ..store.filters import LIVE, And, Range
from ..types import OUTCOMES, Experience, Lesson

if TYPE_CHECKING:
    from ..deps import Deps


class Activity(BaseModel):
    """Experiences per UTC day (oldest first), split by outcome and by source."""

    days: list[str]
    by_outcome: dict[str, list[int]]
    by_source: dict[str, list[int]]
    total: int


class FamilyRate(BaseModel):
    """How a family of similar tasks has gone."""

    label: str
    n: int
    successes: int
    failures: int
    partial: int
    rate: float
    """Mean score (success 1, partial by its score, failure 0)."""


class Injection(BaseModel):
    """An experience recorded with lessons in its context."""

    experience_id: str
    task: str
    outcome: str
    created_at: datetime
    lesson_ids: list[str] = Field(default_factory=list)


class Attribution(BaseModel):
    """A lesson's outcomes with it in context against its topic's outcomes without it."""

    n_with: int
    with_rate: float | None
    n_without: int
    without_rate: float | None
    helped: int
    hurt: int
    lift: float
    noise: float
    detail: str


class Pulse(BaseModel):
    """What changed: counts and the newest timestamps (epoch seconds, 0 when empty)."""

    experiences: int
    lessons: int
    newest_experience: float
    newest_lesson: float


class LearningCurve(BaseModel):
    """Success per window for each arm of the learning benchmark (mean over seeds)."""

    source: str
    created: str
    window: int
    arms: dict[str, list[float]]


def _int(field: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInputError(
            field, f"must be an integer from {low} to {high}; got {short(value)}"
        )
    return value


def activity(deps: Deps, *, days: int = 30, now: datetime | None = None) -> Activity:
    """Experiences of the last ``days`` UTC days (today included), by outcome and source."""
    _int("days", days, 1, 3650)
    end = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).date()
    start = end - timedelta(days=days - 1)
    labels = [(start + timedelta(days=i)).isoformat() for i in range(days)]
    since = datetime(start.year, start.month, start.day, tzinfo=timezone.utc).timestamp()
    cols = deps.store.column(
        EXPERIENCES, ["created_at", "outcome", "source"], Range("created_at", ge=since)
    )
    by_outcome = {o: [0] * days for o in OUTCOMES}
    by_source: dict[str, list[int]] = {}
    total = 0
    for ts, outcome, source in zip(
        cols.column("created_at").to_pylist(),
        cols.column("outcome").to_pylist(),
        cols.column("source").to_pylist(),
        strict=True,
    ):
        i = (datetime.fromtimestamp(float(ts), tz=timezone.utc).date() - start).days
        if not 0 <= i < days:
            continue
        total += 1
        by_outcome.setdefault(str(outcome), [0] * days)[i] += 1
        by_source.setdefault(str(source or "api"), [0] * days)[i] += 1
    return Activity(days=labels, by_outcome=by_outcome, by_source=by_source, total=total)


def family_success(deps: Deps, *, limit: int = 8, max_experiences: int = 1000) -> list[FamilyRate]:
    """Success rate per task family, the largest families first.

    Families are the topics consolidation mines (average-linkage of task embeddings) over the
    newest ``max_experiences`` experiences; each is labelled by its most central task.
    """
    from ..lessons.evidence import load_exps
    from ..lessons.mine import medoid, topics

    _int("limit", limit, 1, 100)
    _int("max_experiences", max_experiences, 1, 20_000)
    where = LIVE
    stamps = deps.store.column(EXPERIENCES, ["created_at"], where).column("created_at").to_pylist()
    if len(stamps) > max_experiences:  # load the newest only (vectors are the heavy part)
        floor = sorted((float(t) for t in stamps), reverse=True)[max_experiences - 1]
        where = And(LIVE, Range("created_at", ge=floor))
    exps = load_exps(deps.store, where)
    exps.sort(key=lambda e: (e.created_at, e.id), reverse=True)
    exps = exps[:max_experiences]
    if not exps:
        return []
    out = []
    for group in topics(exps):
        n = len(group)
        out.append(
            FamilyRate(
                label=medoid(group).task,
                n=n,
                successes=sum(e.outcome == "success" for e in group),
                failures=sum(e.outcome == "failure" for e in group),
                partial=sum(e.outcome == "partial" for e in group),
                rate=sum(e.score for e in group) / n,
            )
        )
    out.sort(key=lambda f: (-f.n, f.label))
    return out[:limit]


def recent_injections(deps: Deps, *, limit: int = 10) -> list[Injection]:
    """The newest experiences recorded with lessons in context (what agents were told)."""
    _int("limit", limit, 1, 1000)
    cols = deps.store.column(
        EXPERIENCES,
        ["id", "task", "outcome", "created_at", "recalled_lesson_ids"],
        "array_length(recalled_lesson_ids) > 0",
    )
    rows = sorted(cols.to_pylist(), key=lambda r: (float(r["created_at"]), r["id"]), reverse=True)
    return [
        Injection(
            experience_id=r["id"],
            task=r["task"],
            outcome=r["outcome"],
            created_at=datetime.fromtimestamp(float(r["created_at"]), tz=timezone.utc),
            lesson_ids=list(r["recalled_lesson_ids"] or []),
        )
        for r in rows[:limit]
    ]


def attribution(deps: Deps, lesson_id: str) -> Attribution:
    """Outcomes with the lesson in context (and feedback) against its topic without it.

    Raises :class:`~mimir_core.errors.NotFoundError` for an unknown lesson."""
    from ..lessons.evidence import feedback_scores, topic_of
    from ..lessons.gate import breaker
    from ..lessons.review import attributed

    lesson = _lessons.get_lesson(deps, lesson_id)
    with_exps = attributed(deps, lesson.id)
    with_scores = [e.score for e in with_exps]
    with_scores += feedback_scores(lesson)
    with_ids = {e.id for e in with_exps}
    _cen, topic = topic_of(deps.store, lesson, deps.embedder.embed_one(lesson.trigger))
    without = [e.score for e in topic if e.id not in with_ids and lesson.id not in e.recalled]
    _trip, result = breaker(with_scores, without)
    return Attribution(
        n_with=len(with_scores),
        with_rate=sum(with_scores) / len(with_scores) if with_scores else None,
        n_without=len(without),
        without_rate=sum(without) / len(without) if without else None,
        helped=lesson.feedback_helped,
        hurt=lesson.feedback_hurt,
        lift=result.lift,
        noise=result.noise,
        detail=result.detail,
    )


def search_text(deps: Deps, text: str, *, limit: int = 50) -> list[Experience]:
    """Experiences whose task, action or reason contains ``text`` (case-insensitive), newest
    first."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInputError("text", f"must be a non-empty string; got {short(text)}")
    _int("limit", limit, 1, 1000)
    needle = text.strip().lower()
    cols = deps.store.column(EXPERIENCES, ["id", "task", "action", "reason", "created_at"])
    found = [
        (float(r["created_at"]), r["id"])
        for r in cols.to_pylist()
        if needle in f"{r['task']}\n{r['action']}\n{r['reason'] or ''}".lower()
    ]
    ids = [i for _t, i in sorted(found, reverse=True)[:limit]]
    return _experiences(deps, ids)


def search_lessons(
    deps: Deps, text: str | None = None, *, status: str | None = None, limit: int = 500
) -> list[Lesson]:
    """Lessons (newest first) of a status, optionally only those whose id, rule, trigger,
    action or scope contains ``text`` (case-insensitive)."""
    if text is not None and not isinstance(text, str):
        raise InvalidInputError("text", f"must be a string; got {short(text)}")
    limit = _int("limit", limit, 1, 10_000)
    needle = (text or "").strip().lower()
    if not needle:
        return _lessons.list_lessons(deps, status=status or None, scope=None, limit=limit)
    every = _lessons.list_lessons(
        deps, status=status or None, scope=None, limit=10_000
    )  # search all, then limit
    return [
        le
        for le in every
        if needle in f"{le.id}\n{le.rule}\n{le.trigger}\n{le.action}\n{le.scope}".lower()
    ][:limit]


def _experiences(deps: Deps, ids: Sequence[str]) -> list[Experience]:
    if not ids:
        return []
    got = {e.id: e for e in deps.get_many(ids)}
    return [got[i] for i in ids if i in got]


def pulse(deps: Deps) -> Pulse:
    """Counts and newest timestamps of experiences and lessons (for polling pages)."""
    exp = deps.store.column(EXPERIENCES, ["created_at"]).column("created_at").to_pylist()
    les = deps.store.column(LESSONS, ["updated_at"]).column("updated_at").to_pylist()
    return Pulse(
        experiences=len(exp),
        lessons=len(les),
        newest_experience=max((float(t) for t in exp), default=0.0),
        newest_lesson=max((float(t) for t in les), default=0.0),
    )


def learning_curve(results_dir: str | Path) -> LearningCurve | None:
    """The learning curves of the newest ``learning*.json`` in ``results_dir``; ``None`` when
    there is none or it cannot be read."""
    paths = sorted(Path(results_dir).glob("learning*.json"), key=lambda p: p.name, reverse=True)
    for path in paths:
        try:
            data: Any = json.loads(path.read_text(encoding="utf-8"))
            arms = {
                str(name): [float(p["mean"]) for p in arm["curve"]]
                for name, arm in data["figures"]["arms"].items()
            }
            return LearningCurve(
                source=path.name,
                created=str(data.get("created", "")),
                window=int(data.get("config", {}).get("window", 0)),
                arms=arms,
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return None
