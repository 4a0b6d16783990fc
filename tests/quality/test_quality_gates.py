"""CI gates on retrieval and recommendation quality (the labelled set, the real model)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from bench.quality import GATES, build_store, evaluate, gates, load


@pytest.fixture(scope="module")
def metrics(fast_embedder: object) -> dict[str, object]:
    data = load()
    with tempfile.TemporaryDirectory() as tmp:
        m, id_map = build_store(data, Path(tmp), fast_embedder)
        return evaluate(m, data, id_map)


def test_labelled_set_is_big_enough() -> None:
    data = load()
    kinds: dict[str, int] = {}
    for q in data["queries"]:
        kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
    assert sum(kinds.values()) >= 150
    assert kinds["paraphrase"] >= 80 and kinds["identifier"] >= 40
    assert kinds["unanswerable"] >= 30 and kinds["non_english"] >= 15
    assert len(data["recommend"]) >= 40


@pytest.mark.parametrize("gate", sorted(GATES))
def test_quality_gate(metrics: dict[str, object], gate: str) -> None:
    value, threshold, passed = gates(metrics)[gate]
    assert passed, f"{gate} = {value:.3f} < {threshold}"
