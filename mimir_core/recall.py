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
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .store import EXPERIENCE_COLUMNS, EXPERIENCES, Store, row_experience
from .text import query_terms, word_set
from .types import Hit

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


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


def gather(
    store: Store,
    qvec: npt.NDArray[np.float32],
    query: str,
    *,
    where: str | None,
    limit: int,
) -> list[Candidate]:
    """Union of vector and full-text candidates, each with its cosine similarity."""
    import numpy as np

    cols = EXPERIENCE_COLUMNS  # the FTS text column is not needed to score
    found: dict[str, Candidate] = {}
    for row in store.vector_search(EXPERIENCES, qvec, where=where, limit=limit, columns=cols):
        found[row["id"]] = Candidate(row, 1.0 - float(row["_distance"]))
    for row in store.text_search(
        EXPERIENCES, query, where=where, limit=limit, columns=[*cols, "vector"]
    ):
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
        row = cand.row
        text = " ".join(
            str(row.get(col) or "") for col in ("task", "action", "reason", "context")
        ).lower()
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
    qvec: npt.NDArray[np.float32],
    query: str,
    k: int,
    *,
    where: str | None,
    prefer_scope: str | None,
    half_life_days: float | None,
    now: datetime,
    tuning: RecallTuning = DEFAULT_TUNING,
) -> list[Hit]:
    """The top ``k`` relevant experiences for ``query`` (possibly none)."""
    limit = max(tuning.candidates, 4 * k)
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
