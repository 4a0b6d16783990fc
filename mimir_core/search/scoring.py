"""The one hybrid relevance score of every search: recall, the key-value store's search and
lesson serving (stdlib only).

A candidate comes from the vector search (its cosine to the query) or the full-text search
(its BM25 score, and its cosine computed from its stored vector). Its score is

    cosine + ident_weight * (share of the query's identifiers found in it, exactly)
           + text_weight * (its BM25 score / the best BM25 score among the candidates)

so the embedding model keeps its paraphrase quality (a rank fusion of the two lists halves it),
exact identifiers (error codes, paths, flags) still win, and shared words count by how rare
they are (BM25's inverse document frequency), not by how many there are. A candidate is
relevant when it is similar enough, holds an identifier of the query, or holds all of the
query's words and is at least loosely similar: below that, a search returns nothing rather
than padding its answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..text import query_terms, word_set


@dataclass(frozen=True)
class Scoring:
    """The knobs of the hybrid score (each search passes its own, tuned on the labelled set's
    tuning part: see ``bench/quality.py``)."""

    vector_floor: float = 0.38
    """Minimum cosine similarity for a hit without an exact identifier match."""
    word_floor: float = 0.20
    """Minimum cosine for a hit that holds every content word of the query."""
    ident_floor: float = -1.0
    """Minimum cosine for a hit held up by an identifier of the query alone."""
    ident_weight: float = 0.45
    """Weight of the share of the query's identifiers the candidate holds."""
    text_weight: float = 0.06
    """Weight of the candidate's BM25 score relative to the best candidate's."""


#: The key-value store's search (LangGraph's ``BaseStore``): conversational documents, where
#: the words shared with a question say more than in a short task (tuned on the tuning half of
#: ``bench/data/conversations.json``).
KV_SCORING = Scoring(vector_floor=-1.0, text_weight=0.06)


class Terms:
    """A query's identifiers and content words, found once and matched against many texts."""

    __slots__ = ("idents", "words")

    def __init__(self, query: str) -> None:
        self.idents, self.words = query_terms(query)

    def match(self, text: str) -> tuple[list[str], list[str]]:
        """(the identifiers, the content words) of the query that ``text`` holds."""
        low = text.lower()
        doc_words = word_set(low)
        return [i for i in self.idents if i in low], [w for w in self.words if w in doc_words]


def text_scores(bm25: Mapping[str, float]) -> dict[str, float]:
    """BM25 scores as shares of the best one (``{}`` when there are none)."""
    best = max(bm25.values(), default=0.0)
    if best <= 0:
        return {}
    return {key: max(value, 0.0) / best for key, value in bm25.items()}


def hybrid_score(
    similarity: float, idents: Iterable[str], terms: Terms, text: float, tuning: Scoring
) -> float:
    """The hybrid score of a candidate: its cosine, the identifiers of ``terms`` it holds
    (``idents``), and its relative BM25 score ``text``."""
    ident_cov = len(list(idents)) / len(terms.idents) if terms.idents else 0.0
    if len(terms.words) < 2:  # one word: BM25 would only rank documents by their length
        text = 0.0
    return similarity + tuning.ident_weight * ident_cov + tuning.text_weight * text


def relevant(
    similarity: float, idents: list[str], words: list[str], terms: Terms, tuning: Scoring
) -> bool:
    """Whether a candidate clears the relevance floor (see the module doc)."""
    if similarity >= tuning.vector_floor or (idents and similarity >= tuning.ident_floor):
        return True
    every_word = len(terms.words) >= 2 and len(words) == len(terms.words)
    return every_word and similarity >= tuning.word_floor


__all__ = ["KV_SCORING", "Scoring", "Terms", "hybrid_score", "relevant", "text_scores"]
