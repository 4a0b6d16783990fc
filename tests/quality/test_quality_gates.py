"""CI gates on retrieval and recommendation quality (the labelled set, the real model).

The gates are judged on the held-out ``test`` part of the family split: the core's thresholds
were tuned on this set, so only families no threshold was chosen with say how it generalises.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench.quality import GATE_PART, GATES, build_store, evaluate_parts, gates, load, make_split

#: Gates the current core misses on the held-out test part: asserted as strict xfails (a fix
#: that makes one pass fails here until it is moved out). The reason carries the measured value.
KNOWN_MISSES: dict[str, str] = {}


@pytest.fixture(scope="module")
def per_part(fast_embedder: object) -> dict[str, dict[str, Any]]:
    data = load()
    with tempfile.TemporaryDirectory() as tmp:
        m, id_map = build_store(data, Path(tmp), fast_embedder)
        return evaluate_parts(m, data, id_map)


def test_labelled_set_is_big_enough() -> None:
    data = load()
    kinds: dict[str, int] = {}
    for q in data["queries"]:
        kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
    assert sum(kinds.values()) >= 150
    assert kinds["paraphrase"] >= 80 and kinds["identifier"] >= 40
    assert kinds["unanswerable"] >= 30 and kinds["non_english"] >= 15
    assert len(data["recommend"]) >= 40


def test_split_is_deterministic_and_by_family() -> None:
    data = load()
    split = data["split"]
    assert split == make_split(data)  # regenerate with: python -m bench.quality --write-split
    tune, test = set(split["tune"]), set(split["test"])
    assert not tune & test
    families = (
        {e["family"] for e in data["experiences"]}
        | {q["family"] for q in data["queries"]}
        | {r["family"] for r in data["recommend"]}
    )
    assert families == tune | test
    part = {f: "tune" for f in tune} | {f: "test" for f in test}
    fam_of = {e["id"]: e["family"] for e in data["experiences"]}
    # No leakage: whatever a query or case is judged against lies in its own part.
    for q in data["queries"]:
        assert {part[fam_of[i]] for i in q["relevant"]} <= {part[q["family"]]}, q["id"]
    for r in data["recommend"]:
        ids = r.get("family_ids", [])
        assert {part[fam_of[i]] for i in ids} <= {part[r["family"]]}, r["id"]
    # About 50/50 in families and in every query kind and recommend case.
    assert abs(len(tune) - len(test)) <= 0.1 * len(families)
    kinds = Counter((q["kind"], part[q["family"]]) for q in data["queries"])
    for kind in {k for k, _p in kinds}:
        n = kinds[(kind, "tune")] + kinds[(kind, "test")]
        assert abs(kinds[(kind, "tune")] - kinds[(kind, "test")]) <= 0.2 * n, kind
    rec = Counter(part[r["family"]] for r in data["recommend"])
    assert min(rec.values()) >= 0.4 * len(data["recommend"])


def test_every_part_is_measured(per_part: dict[str, dict[str, Any]]) -> None:
    assert set(per_part) == {"tune", "test", "all"}
    for part in ("tune", "test"):
        assert per_part[part]["paraphrase_n"] >= 40 and per_part[part]["recommend_n"] >= 20
    assert (
        per_part["tune"]["paraphrase_n"] + per_part["test"]["paraphrase_n"]
        == per_part["all"]["paraphrase_n"]
    )


@pytest.mark.parametrize(
    "gate",
    [
        pytest.param(g, marks=pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[g]))
        if g in KNOWN_MISSES
        else g
        for g in sorted(GATES)
    ],
)
def test_quality_gate_on_the_test_part(per_part: dict[str, dict[str, Any]], gate: str) -> None:
    value, threshold, passed = gates(per_part[GATE_PART])[gate]
    assert passed, f"{gate} = {value:.3f} < {threshold} on the {GATE_PART} part"


def test_the_hooks_pool_paraphrases_on_the_held_out_families(fast_embedder: object) -> None:
    """The hooks' keyword match plus topics find a same-family past task for most held-out
    tasks (keywords alone: about a third), with few tasks of other families pooled."""
    from bench.quality import load
    from bench.quality_pooling import evaluate

    data = load()
    test = evaluate(data, "test", fast_embedder)
    alone = evaluate(data, "test", fast_embedder, floor=0.5, loose=9.0, join=2.0)
    assert test["asked"] > 100
    assert test["found"] >= 0.75 and test["found"] >= alone["found"] + 0.3, (test, alone)
    assert test["wrong"] <= 0.12, test
