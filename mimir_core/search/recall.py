"""Hybrid recall: vector similarity fused with exact keyword evidence, with a relevance floor.

Candidates come from two searches (cosine over task vectors, BM25 over all text) and are scored
by the one hybrid score of every Mimir search (:mod:`mimir_core.search.scoring`): cosine, plus the
query's identifiers matched exactly, plus relative BM25. A hit must clear a floor, so recall
returns nothing when nothing is relevant. Near-identical hits (the same task, action and outcome)
are one hit with a count. Weights were tuned on the tuning part of
``bench/data/retrieval_set.json`` (see ``bench/quality.py``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..store.core import DOC, EXPERIENCES, Store, row_experience, row_text
from ..store.filters import Filter
from ..types import Hit
from .scoring import Scoring, Terms, hybrid_score, relevant, text_scores

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np
    import numpy.typing as npt

#: What a candidate is read with: its document (every field of the experience, one column, so a
#: hit needs no second read; its searchable text is made from it) and ``superseded_by``.
#: ``_rowid`` finds a row written without a document (see :meth:`Store.expand_docs`).
CANDIDATE_COLUMNS = ["_rowid", DOC, "superseded_by"]

_POOL: Any = None


def _forget_pool() -> None:
    global _POOL
    _POOL = None  # a forked child has none of its parent's threads


os.register_at_fork(after_in_child=_forget_pool)


def _background(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on a recall helper thread (a future)."""
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mimir-recall")
    return _POOL.submit(fn)


@dataclass(frozen=True)
class RecallTuning(Scoring):
    """The knobs of hybrid recall: the one score's (:class:`~mimir_core.search.scoring.Scoring`),
    tuned on the labelled set's tuning part, and the candidates looked at."""

    other_scope_factor: float = 0.85
    candidates: int = 20
    """Vector and full-text candidates each (at least 4 k): each costs a row read per search."""


DEFAULT_TUNING = RecallTuning()


@dataclass
class Candidate:
    """A row under consideration, with the evidence for it."""

    row: dict[str, Any]
    similarity: float
    bm25: float = 0.0
    matched: tuple[str, ...] = ()


def decay_factor(created_at: float, now: float, half_life_days: float | None) -> float:
    """``0.5 ** (age / half_life)``; 1 without a half-life."""
    if not half_life_days:
        return 1.0
    age_days = max(now - created_at, 0.0) / 86400.0
    return math.pow(0.5, age_days / half_life_days)


def text_candidates(store: Store, query: str, *, where: Filter | None, limit: int) -> list[Any]:
    """Full-text (BM25) candidates, with the columns scoring needs and their task vectors."""
    rows = store.text_search(
        EXPERIENCES, query, where=where, limit=limit, columns=[*CANDIDATE_COLUMNS, "vector"]
    )
    return store.expand_docs(rows)


def vector_candidates(
    store: Store, qvec: npt.NDArray[np.float32], *, where: Filter | None, limit: int
) -> list[dict[str, Any]]:
    """Nearest candidates by cosine, with the columns scoring needs."""
    rows = store.vector_search(
        EXPERIENCES, qvec, where=where, limit=limit, columns=CANDIDATE_COLUMNS
    )
    return store.expand_docs(rows)


def gather(
    store: Store,
    qvec: npt.NDArray[np.float32],
    query: str,
    *,
    where: Filter | None,
    limit: int,
    text_rows: list[dict[str, Any]] | None = None,
    vector_rows: list[dict[str, Any]] | None = None,
) -> list[Candidate]:
    """Union of vector and full-text candidates, each with its cosine similarity.

    ``text_rows`` / ``vector_rows``: the candidates when already fetched
    (:func:`text_candidates`, :func:`vector_candidates`)."""
    import numpy as np

    if vector_rows is None:
        vector_rows = vector_candidates(store, qvec, where=where, limit=limit)
    found: dict[str, Candidate] = {}
    for row in vector_rows:
        found[row["id"]] = Candidate(row, 1.0 - float(row["_distance"]))
    if text_rows is None:
        text_rows = text_candidates(store, query, where=where, limit=limit)
    for row in text_rows:
        cand = found.get(row["id"])
        if cand is None:
            vec = np.asarray(row["vector"], dtype=np.float32)
            cand = found[row["id"]] = Candidate(row, float(vec @ qvec))
        cand.bm25 = float(row.get("_score") or 0.0)
    return list(found.values())


def score_candidates(
    cands: list[Candidate], query: str, tuning: RecallTuning
) -> list[tuple[float, Candidate]]:
    """Hybrid scores (:func:`mimir_core.search.scoring.score`) of the candidates that clear the
    relevance floor."""
    terms = Terms(query)
    text = text_scores({c.row["id"]: c.bm25 for c in cands})
    kept: list[tuple[float, Candidate]] = []
    for cand in cands:
        idents, words = terms.match(row_text(cand.row))
        cand.matched = tuple(dict.fromkeys(idents + words))
        if relevant(cand.similarity, idents, words, terms, tuning):
            hybrid = hybrid_score(
                cand.similarity, idents, terms, text.get(cand.row["id"], 0.0), tuning
            )
            kept.append((hybrid, cand))
    return kept


def explain(cand: Candidate) -> str:
    """Why a hit matched, in a few words."""
    parts = [f"semantic {cand.similarity:.2f}"]
    if cand.matched:
        parts.append("matched: " + ", ".join(cand.matched[:6]))
    return "; ".join(parts)


def recall(
    store: Store,
    qvec: npt.NDArray[np.float32] | Callable[[], npt.NDArray[np.float32]],
    query: str,
    k: int,
    *,
    where: Filter | None,
    prefer_scope: str | None,
    half_life_days: float | None,
    now: datetime,
    tuning: RecallTuning = DEFAULT_TUNING,
) -> list[Hit]:
    """The top ``k`` relevant experiences for ``query`` (possibly none).

    ``qvec`` is the query's vector, or a function computing it: then the full-text search runs
    on a helper thread meanwhile, and the vector search starts as soon as the vector is there
    (the embedding model and LanceDB both release the GIL; at 1M rows the full-text search
    takes longer than the embedding)."""
    limit = max(tuning.candidates, 4 * k)
    if callable(qvec):
        pending = _background(lambda: text_candidates(store, query, where=where, limit=limit))
        try:
            vec = qvec()
            vector_rows = vector_candidates(store, vec, where=where, limit=limit)
        finally:
            text_rows: list[dict[str, Any]] = pending.result()
        cands = gather(
            store,
            vec,
            query,
            where=where,
            limit=limit,
            text_rows=text_rows,
            vector_rows=vector_rows,
        )
    else:
        cands = gather(store, qvec, query, where=where, limit=limit)
    ts_now = now.timestamp()
    ranked: list[tuple[float, Candidate]] = []
    for score, cand in score_candidates(cands, query, tuning):
        score *= decay_factor(float(cand.row["created_at"]), ts_now, half_life_days)
        if prefer_scope is not None and (cand.row.get("scope") or "") != prefer_scope:
            score *= tuning.other_scope_factor
        ranked.append((score, cand))
    ranked.sort(key=lambda sc: (-sc[0], sc[1].row["id"]))
    return [
        Hit(
            experience=row_experience(c.row),
            score=round(s, 6),
            similarity=round(c.similarity, 6),
            matched_terms=list(c.matched),
            why=explain(c) if n == 1 else f"{explain(c)}; {n} alike",
            count=n,
        )
        for s, c, n in collapse(ranked)[:k]
    ]


def collapse(ranked: list[tuple[float, Candidate]]) -> list[tuple[float, Candidate, int]]:
    """Near-identical hits (the same task, action and outcome, up to case and spacing) as one,
    at the best one's rank, shown by the newest of them, with how many there are: five hits
    must not be three copies of one attempt."""
    from .actions import normalise_action

    groups: dict[tuple[str, str, str], list[Any]] = {}
    order: list[tuple[str, str, str]] = []
    for score, cand in ranked:
        row = cand.row
        key = (normalise_action(row["task"]), normalise_action(row["action"]), row["outcome"])
        if key not in groups:
            groups[key] = [score, cand, 0]
            order.append(key)
        group = groups[key]
        group[2] += 1
        if float(row["created_at"]) > float(group[1].row["created_at"]):
            group[1] = cand
    return [(groups[k][0], groups[k][1], groups[k][2]) for k in order]
