"""The one hybrid score of every search (recall, the key-value store, lesson serving), and
recall's collapsing of near-identical hits."""

from __future__ import annotations

from typing import Any

from mimir_core.search.scoring import Scoring, Terms, hybrid_score, relevant, text_scores


def test_identifiers_match_exactly_and_words_by_bm25_share() -> None:
    terms = Terms("ERR_OSSL_EVP_UNSUPPORTED when building the frontend")
    idents, words = terms.match("npm run build fails: ERR_OSSL_EVP_UNSUPPORTED (frontend)")
    assert idents == ["err_ossl_evp_unsupported"] and "frontend" in words
    tuning = Scoring()
    assert hybrid_score(0.3, idents, terms, 0.0, tuning) == 0.3 + tuning.ident_weight
    with_text = hybrid_score(0.3, idents, terms, 1.0, tuning)
    assert with_text == 0.3 + tuning.ident_weight + tuning.text_weight


def test_bm25_counts_only_for_queries_of_two_words_or_more() -> None:
    """With one word BM25 only ranks documents by their length: it must not break ties that
    the embedding says are ties (LangGraph's store conformance asks exactly that)."""
    one = Terms("xxx")
    assert hybrid_score(0.5, [], one, 1.0, Scoring()) == hybrid_score(0.5, [], one, 0.3, Scoring())


def test_text_scores_are_shares_of_the_best() -> None:
    assert text_scores({"a": 4.0, "b": 1.0, "c": 0.0}) == {"a": 1.0, "b": 0.25, "c": 0.0}
    assert text_scores({"a": 0.0}) == {} and text_scores({}) == {}


def test_the_relevance_floor() -> None:
    tuning = Scoring(vector_floor=0.4, word_floor=0.2, ident_floor=0.25)
    terms = Terms("payments integration tests")
    assert relevant(0.45, [], [], terms, tuning)
    assert not relevant(0.3, [], ["payments"], terms, tuning)
    assert relevant(0.3, [], ["payments", "integration", "tests"], terms, tuning)
    assert not relevant(0.1, [], ["payments", "integration", "tests"], terms, tuning)
    ident = Terms("E1234 in the build")
    assert relevant(0.3, ["e1234"], [], ident, tuning)
    assert not relevant(0.2, ["e1234"], [], ident, tuning)  # below the identifier floor


def test_recall_collapses_near_identical_hits(hash_mimir: Any) -> None:
    task = "run the payments integration tests"
    for i in range(3):
        hash_mimir.record(task, "pytest tests/integration", "failure", reason=f"flaky {i}")
    hash_mimir.record(task.upper(), "PYTEST  tests/integration", "failure", reason="again")
    hash_mimir.record(task, "alembic upgrade head && pytest tests/integration", "success")
    hash_mimir.record(task, "pytest tests/integration", "success")
    hits = hash_mimir.recall(task, k=5)
    counts = sorted((h.experience.action.lower(), h.experience.outcome, h.count) for h in hits)
    assert counts == [
        ("alembic upgrade head && pytest tests/integration", "success", 1),
        ("pytest  tests/integration", "failure", 4),
        ("pytest tests/integration", "success", 1),
    ]
    failed = next(h for h in hits if h.count == 4)
    assert failed.experience.reason == "again"  # the newest of the four stands for them
    assert failed.why.endswith("4 alike")
