"""The conversational-retrieval part: the data set's integrity, the quick configuration's run
(Mimir's LangGraph store and the BM25 / dense / fusion baselines) and the issue's gate."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench import make_conversations as mk
from bench import quality_conversations as qc


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    return qc.load()


def _turns(conv: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["id"]: t for s in conv["sessions"] for t in s["turns"]}


def test_the_generator_reproduces_the_committed_file() -> None:
    # Seeded and pure: a changed generator must come with its regenerated data.
    assert mk.dumps(mk.build()) == qc.DATA.read_text(encoding="utf-8")


def test_dataset_is_big_enough_and_small_enough(data: dict[str, Any]) -> None:
    questions = [q for c in data["conversations"] for q in c["questions"]]
    assert len(questions) >= 300
    assert qc.DATA.stat().st_size < 2_000_000
    cats = Counter(q["category"] for q in questions)
    for cat in ("preference", "fact", "temporal", "update", "multi_hop", "identifier"):
        assert cats[cat] >= 40, cats
    assert cats["assistant"] >= 20 and cats["abstention"] >= 20, cats
    wording = Counter(q["wording"] for q in questions)
    assert wording["paraphrase"] >= 100 and wording["overlap"] >= 100, wording


def test_every_evidence_id_exists_and_labels_are_consistent(data: dict[str, Any]) -> None:
    mk.validate(data)
    seen_ids: set[str] = set()
    for conv in data["conversations"]:
        turns = _turns(conv)
        assert not seen_ids & turns.keys()
        seen_ids |= turns.keys()
        for s in conv["sessions"]:
            assert all(t["speaker"] in ("user", "assistant") and t["text"] for t in s["turns"])
        dates = [s["date"] for s in conv["sessions"]]
        assert dates == sorted(dates) and len(conv["sessions"]) >= 8
        for q in conv["questions"]:
            assert q["id"].startswith(conv["id"] + "-")
            assert all(e in turns for e in q["evidence"]), q["id"]
            if q["category"] == "abstention":
                assert q["evidence"] == [] and q["answer"] is None
                continue
            assert q["evidence"] and q["answer"]
            if q["category"] in ("update", "multi_hop"):
                # two turns in two different sessions
                sessions = {e.rsplit("-", 1)[0] for e in q["evidence"]}
                assert len(q["evidence"]) == 2 and len(sessions) == 2, q["id"]
            if q["category"] == "update":
                assert q["evidence"] == sorted(q["evidence"])  # the change comes later
            if q["category"] == "assistant":
                assert all(turns[e]["speaker"] == "assistant" for e in q["evidence"])
            # The question is not a copy of its evidence, and no other turn holds its answer.
            for e in q["evidence"]:
                assert q["question"].lower().rstrip("?") not in turns[e]["text"].lower()
            for term in q["terms"]:
                pattern = r"(?<!\w)" + re.escape(term.lower()) + r"(?!\w)"
                holders = {i for i, t in turns.items() if re.search(pattern, t["text"].lower())}
                assert holders <= set(q["evidence"]), (q["id"], term, holders)
            if q["wording"] == "identifier":
                assert q["terms"] and any(q["terms"])


def test_halves_are_disjoint_and_balanced(data: dict[str, Any]) -> None:
    halves: dict[str, set[str]] = {"tune": set(), "test": set()}
    for conv in data["conversations"]:
        halves[conv["split"]].add(conv["id"])
    assert not halves["tune"] & halves["test"]
    assert halves["tune"] | halves["test"] == {c["id"] for c in data["conversations"]}
    answerable = Counter(
        c["split"] for c in data["conversations"] for q in c["questions"] if q["evidence"]
    )
    assert min(answerable.values()) >= 140 and abs(answerable["tune"] - answerable["test"]) <= 20


def test_quick_configuration_covers_both_halves(data: dict[str, Any]) -> None:
    quick = qc.select(data, quick=True)
    n = sum(len(c["questions"]) for c in quick)
    assert 100 <= n <= 160
    assert {c["split"] for c in quick} == {"tune", "test"}


def test_bm25_matches_the_okapi_formula() -> None:
    docs = ["the cat sat on the mat", "a dog barked", "cat cat cat and a dog"]
    bm = qc.BM25(docs)
    scores = bm.scores("cat")
    n, df = 3, 2
    idf = math.log((n - df + 0.5) / (df + 0.5) + 1.0)
    lens = [3, 2, 4]  # stop words dropped: cat sat mat / dog barked / cat cat cat dog
    avg = sum(lens) / 3

    def okapi(f: int, length: int) -> float:
        return idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * length / avg))

    assert scores == pytest.approx([okapi(1, 3), 0.0, okapi(3, 4)])
    assert qc.top_k(scores, 2) == [2, 0]


@pytest.fixture(scope="module")
def quick(fast_embedder: object, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home: Path = tmp_path_factory.mktemp("conversations")
    return qc.run(quick=True, embedder=fast_embedder, home=home)


@pytest.mark.slow
def test_the_four_systems_produce_figures(quick: dict[str, Any]) -> None:
    assert quick["config"] == "quick" and quick["questions"] >= 100
    assert quick["answerable"]["tune"] >= 40 and quick["answerable"]["test"] >= 40
    for system in ("mimir", "bm25", "dense", "fusion"):
        for half in ("tune", "test", "all"):
            met = quick["metrics"][system][half]
            assert 0.0 <= met["recall@5"] <= met["any_hit@5"] <= 1.0, (system, half, met)
            assert met["n"] == quick["answerable"][half]
    assert quick["fusion_weight"] in qc.FUSION_GRID
    for system in qc.SYSTEMS:
        assert system in quick["seconds"]
    # Sanity: every system finds something, and nobody returns more than five turns.
    for row in quick["rows"]:
        assert all(len(row[s]) <= qc.K for s in qc.SYSTEMS)
    assert min(quick["metrics"][s]["all"]["any_hit@5"] for s in qc.SYSTEMS) > 0.2


@pytest.mark.slow
def test_gate_mimir_beats_bm25_on_the_test_half(quick: dict[str, Any]) -> None:
    """The issue's gate: Mimir's store finds an evidence turn in its top 5 at least 1.15 times
    as often as BM25 on the same documents, in the same run (the full test half: 0.917 /
    0.613 = 1.50; on the questions that share a word with their evidence the two are close,
    1.00 / 0.95: the gain is in the paraphrased questions)."""
    gate = quick["gate"]
    assert gate["ratio"] >= qc.GATE_RATIO, gate
