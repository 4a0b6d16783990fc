"""Hybrid recall: vector similarity fused with exact keyword evidence, with a relevance floor.

Candidates come from two searches (cosine over task vectors, BM25 over all text). They are scored
by their cosine similarity plus weighted *coverage* of the query's identifiers (error codes, paths,
function names: matched exactly) and content words. This keeps the embedding model's paraphrase
quality (a plain RRF fusion of vector and BM25 ranks halves it) while exact identifiers still win.
A hit must clear a floor: enough semantic similarity, or an exactly matched identifier, so recall
returns nothing when nothing is relevant. Weights were tuned on ``bench/data/retrieval_set.json``
(see ``bench/quality.py``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .store import DOC, EXPERIENCES, Store, row_experience, row_text
from .text import query_terms, word_set
from .types import Hit

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
class RecallTuning:
    """The knobs of hybrid recall (defaults tuned on the labelled set)."""

    vector_floor: float = 0.38
    """Minimum cosine similarity for a hit without an exact identifier match."""
    word_floor: float = 0.20
    """Minimum cosine for a hit whose content words all match (a keyword-only hit)."""
    ident_weight: float = 0.45
    word_weight: float = 0.06
    other_scope_factor: float = 0.85
    candidates: int = 20
    """Vector and full-text candidates each (at least 4 k): each costs a row read per search."""


DEFAULT_TUNING = RecallTuning()


@dataclass
class Candidate:
    """A row under consideration, with the evidence for it."""

    row: dict[str, Any]
    similarity: float
    ident_cov: float = 0.0
    word_cov: float = 0.0
    matched: tuple[str, ...] = ()


def decay_factor(created_at: float, now: float, half_life_days: float | None) -> float:
    """``0.5 ** (age / half_life)``; 1 without a half-life."""
    if not half_life_days:
        return 1.0
    age_days = max(now - created_at, 0.0) / 86400.0
    return math.pow(0.5, age_days / half_life_days)


def text_candidates(store: Store, query: str, *, where: str | None, limit: int) -> list[Any]:
    """Full-text (BM25) candidates, with the columns scoring needs and their task vectors."""
    rows = store.text_search(
        EXPERIENCES, query, where=where, limit=limit, columns=[*CANDIDATE_COLUMNS, "vector"]
    )
    return store.expand_docs(rows)


def vector_candidates(
    store: Store, qvec: npt.NDArray[np.float32], *, where: str | None, limit: int
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
    where: str | None,
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
        if row["id"] not in found:
            vec = np.asarray(row["vector"], dtype=np.float32)
            found[row["id"]] = Candidate(row, float(vec @ qvec))
    return list(found.values())


def score_candidates(
    cands: list[Candidate], query: str, tuning: RecallTuning
) -> list[tuple[float, Candidate]]:
    """Fused scores for the candidates that clear the relevance floor."""
    idents, words = query_terms(query)
    kept: list[tuple[float, Candidate]] = []
    for cand in cands:
        text = row_text(cand.row).lower()
        matched_idents = [i for i in idents if i in text]
        doc_words = word_set(text)
        matched_words = [w for w in words if w in doc_words]
        cand.ident_cov = len(matched_idents) / len(idents) if idents else 0.0
        cand.word_cov = len(matched_words) / len(words) if words else 0.0
        cand.matched = tuple(dict.fromkeys(matched_idents + matched_words))
        relevant = (
            cand.similarity >= tuning.vector_floor
            or bool(matched_idents)
            or (len(words) >= 2 and cand.word_cov >= 0.999 and cand.similarity >= tuning.word_floor)
        )
        if not relevant:
            continue
        score = (
            cand.similarity
            + tuning.ident_weight * cand.ident_cov
            + tuning.word_weight * cand.word_cov
        )
        kept.append((score, cand))
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
    where: str | None,
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
            why=explain(c),
        )
        for s, c in ranked[:k]
    ]
