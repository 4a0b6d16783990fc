"""Serving lessons: the relevant, active, verified ones for a query, and the prompt block.

Relevance is the cosine between the query and the lesson: its trigger embedding, or the closest
of the experiences that are its evidence (a trigger is one task; the evidence is several, so a
paraphrase of any of them finds the lesson). Below a floor the answer is empty (abstain,
never pad). An exact identifier of the query found in the lesson (an error code, a path, a
flag) lets a lesson in from a lower floor, as in recall. Lessons from another project count, at
a discount, unless a scope is asked for.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError, short
from ..ingest.validate import ALL_SCOPES, scope_key
from ..search.scoring import Scoring, Terms, hybrid_score, relevant
from ..store.core import EXPERIENCES, LESSONS
from ..store.filters import LIVE, And, Eq, Filter, Or
from ..tools.digest import MAX_ITEMS, render_block
from ..types import Experience, Lesson
from . import trust
from .lifecycle import verified
from .revalidate import CONTRADICTED, here, verdicts
from .storage import LESSON_COLUMNS, heads

if TYPE_CHECKING:
    from ..deps import Deps

#: Minimum query–topic cosine for a lesson to be relevant.
RELEVANCE_FLOOR = 0.45
#: Lessons (nearest triggers) and experiences (nearest tasks) looked at per query.
CANDIDATES = 50
NEIGHBOURS = 40
#: ...or this, when an identifier of the query appears in the lesson.
IDENT_FLOOR = 0.25
#: The one hybrid score (:mod:`mimir_core.search.scoring`) with lesson serving's floors: a lesson
#: is a rule an agent may follow, so it needs more similarity than a recalled attempt.
SCORING = Scoring(
    vector_floor=RELEVANCE_FLOOR,
    word_floor=RELEVANCE_FLOOR,
    ident_floor=IDENT_FLOOR,
    ident_weight=0.25,
    text_weight=0.0,
)
#: Lessons below this confidence are not served unless asked for.
DEFAULT_MIN_CONFIDENCE = 0.2
OTHER_SCOPE_FACTOR = 0.85
#: A recommendation joins the prompt block only above this confidence (its 10% lower bound).
RECOMMEND_FLOOR = 0.5
#: ...and when its successes come from at least this many independent sessions (forged
#: records from one session must never become advice).
RECOMMEND_SOURCES = 2


def _check(query: object, k: object, min_confidence: object) -> None:
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query", f"must be a non-empty string; got {short(query)}", query)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 100:
        raise InvalidInputError("k", f"must be an integer from 1 to 100; got {short(k)}")
    if min_confidence is not None and (
        isinstance(min_confidence, bool)
        or not isinstance(min_confidence, (int, float))
        or not 0.0 <= float(min_confidence) <= 1.0
    ):
        raise InvalidInputError(
            "min_confidence", f"must be a number in [0, 1]; got {short(min_confidence)}"
        )


def relevant_lessons(
    deps: Deps,
    query: str,
    k: int = 5,
    *,
    scope: str | None = None,
    min_confidence: float | None = None,
) -> list[tuple[float, Lesson]]:
    """(relevance, lesson) of the active, verified lessons relevant to ``query``, best first."""
    _check(query, k, min_confidence)
    if scope is not None and not isinstance(scope, str):
        raise InvalidInputError("scope", f"must be a string; got {short(scope)}")
    store = deps.store
    where: Filter = Eq("status", "active")
    prefer = deps.scope if scope is None else None
    if scope not in (None, ALL_SCOPES):
        key = scope_key(str(scope), deps.redact_patterns)  # as records store it
        where = And(where, Or(Eq("scope", key), Eq("scope", "")))
    if store.count(LESSONS, where) == 0:
        return []  # nothing to serve: don't even embed the query
    qvec = deps.embedder.embed_one(query)
    rows = store.vector_search(
        LESSONS, qvec, where=where, limit=max(10 * k, CANDIDATES), columns=LESSON_COLUMNS
    )
    near = {
        r["id"]: 1.0 - float(r["_distance"])
        for r in store.vector_search(
            EXPERIENCES, qvec, where=LIVE, limit=NEIGHBOURS, columns=["id"]
        )
    }
    terms = Terms(query)
    floor_conf = DEFAULT_MIN_CONFIDENCE if min_confidence is None else float(min_confidence)
    ranked: list[tuple[float, Lesson]] = []
    hd = heads(store, [str(r["id"]) for r in rows]) if rows else {}
    trust.view(deps, fresh=True)  # a revocation takes effect at this read
    known = verdicts(deps)
    for row in rows:
        sim = max(1.0 - float(row["_distance"]), _member_sim(row, near))
        matched, words = terms.match(f"{row.get('trigger', '')} {row.get('rule', '')}")
        if not relevant(sim, matched, words, terms, SCORING):
            continue
        lesson, ok = verified(deps, row, known_heads=hd)
        if not ok or lesson.status != "active" or lesson.confidence < floor_conf:
            continue
        if _unsafe_advice(lesson):
            continue
        if here(deps, lesson, known)[0] == CONTRADICTED:  # local evidence contradicts it
            continue
        score = hybrid_score(sim, matched, terms, 0.0, SCORING)
        if prefer is not None and lesson.scope not in ("", prefer):
            score *= OTHER_SCOPE_FACTOR
        ranked.append((score, lesson))
    ranked.sort(key=lambda sl: (-sl[0], -sl[1].confidence, sl[1].id))
    return ranked[:k]


def _unsafe_advice(lesson: Lesson) -> bool:
    """A ``prefer`` or ``procedure`` lesson whose action or rule is a destructive or
    safety-disabling command that no person pinned: never served (evidence never makes such a
    command advice; a lesson written before that rule, or imported, is held back here too)."""
    from ..search.actions import destructive_reason

    if lesson.kind == "avoid" or lesson.pinned:
        return False
    return any(destructive_reason(t) for t in (lesson.action or "", lesson.rule) if t)


def _member_sim(row: dict[str, Any], near: dict[str, float]) -> float:
    """The query's best cosine to one of the lesson's own evidence (0 if none is near)."""
    if not near:
        return 0.0
    try:
        data = json.loads(row.get("payload") or "{}")
        ids = [*data.get("supporting_ids", []), *data.get("contradicting_ids", [])]
    except (ValueError, AttributeError, TypeError):
        return 0.0
    return max((near[i] for i in ids if isinstance(i, str) and i in near), default=0.0)


def context_block(
    deps: Deps, query: str, *, budget_chars: int = 2000, scope: str | None = None
) -> str:
    """The fenced prompt block for ``query`` (``""`` when nothing relevant clears the bar):
    the relevant lessons, then the observations of past attempts on tasks like it
    (:mod:`mimir_core.observations`), then a recommendation that is not yet a lesson."""
    from ..observations.from_store import context_lines
    from ..observations.policy import quoted
    from ..search.actions import destructive_reason, normalise_action

    if isinstance(budget_chars, bool) or not isinstance(budget_chars, int) or budget_chars < 1:
        raise InvalidInputError(
            "budget_chars", f"must be a positive integer; got {short(budget_chars)}"
        )
    found = [le for _s, le in relevant_lessons(deps, query, MAX_ITEMS, scope=scope)]
    known = verdicts(deps)
    items: list[dict[str, Any]] = [
        {
            "id": le.id,
            "kind": le.kind,
            "confidence": le.confidence,
            "rule": le.rule,
            "from": here(deps, le, known)[1],
        }
        for le in found
    ]
    covered = {normalise_action(le.action) for le in found if le.action}
    observed = context_lines(deps, query, scope=scope, skip=covered)
    shown = covered | {ln.key for ln in observed}
    extra: list[str] = []
    from ..ingest.record import drain_pending
    from ..search.recommend import recommend_in

    drain_pending(deps)  # as Mimir.recommend does
    rec = recommend_in(deps, query, scope=scope)
    wins = _successes(deps, rec.evidence_ids) if rec is not None else []
    if (
        rec is not None
        and rec.confidence >= RECOMMEND_FLOOR
        and normalise_action(rec.action) not in shown
        and destructive_reason(rec.action) is None
        and _independent_sessions(wins) >= RECOMMEND_SOURCES
    ):
        # Said where it worked when none of it was here: another project's fix is a lead, not
        # this project's record (the observations' "worked here" lines are only ever this one's).
        home = deps.scope if scope is None else None
        away = home is not None and all((e.scope or "") != home for e in wins)
        extra.append(
            f"past attempts suggest: {quoted(rec.action)} (worked {rec.successes:g} of "
            f"{rec.successes + rec.failures:g} times on similar tasks"
            f"{' in other projects' if away else ''}; "
            f"confidence {rec.confidence:.2f}; not yet a lesson)"
        )
    return render_block(items, budget_chars, extra=extra, observations=[ln.text for ln in observed])


def _successes(deps: Deps, ids: list[str]) -> list[Experience]:
    """The successful experiences among ``ids`` (a recommendation's evidence)."""
    return [e for e in deps.get_many(ids) if e.outcome == "success"]


def _independent_sessions(wins: list[Experience]) -> int:
    """How many independent sources (sessions; a host's records without one count as one) the
    successful experiences ``wins`` come from."""
    from ..observations.tally import source_key

    return len({source_key(e.session_id, e.thread_id, e.source) for e in wins})
