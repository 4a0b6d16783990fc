"""Maintenance covers every table the store owns: reindex, compact (kv documents included)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mimir_core import Mimir
from mimir_core.embed.core import HashEmbedder
from mimir_core.errors import EmbedderMismatchError
from mimir_core.hosting.kv import KVPut, KVStore, indexed_texts
from mimir_core.store.core import KV, TABLES


class OtherEmbedder(HashEmbedder):
    """A different model: another name, another dimension, other vectors."""

    name = "hash-other-test"

    def __init__(self) -> None:
        super().__init__(dim=128)


DOCS = [
    KVPut(("memories", "u1"), "theme", {"text": "prefers dark mode in every editor"}),
    KVPut(
        ("memories", "u1"),
        "food",
        {"likes": "spicy ramen noodles", "dislikes": "olives", "note": "multi\nline"},
        texts=["spicy ramen noodles", "olives on pizza\nnever", "拉面 很 好吃"],
    ),
    KVPut(("memories", "u2"), "raw", {"blob": "not indexed"}, texts=[]),
]


def test_reindex_with_a_new_embedder_keeps_kv_search_working(home: Path) -> None:
    m = Mimir(home, embedder="hash")
    KVStore(m).put_many(DOCS)
    m.record("run the payments integration tests", "pytest tests/integration", "failure",
             reason="UndefinedTable")  # fmt: skip
    m.close()

    new = Mimir(home, embedder=OtherEmbedder())
    with pytest.raises(EmbedderMismatchError):
        new.recall("payments tests")
    new.close()
    assert new.reindex() == 1

    kv = KVStore(new)
    found = kv.search(("memories",), query="ramen noodles")
    assert found and found[0].key == "food"
    assert kv.search(("memories",), query="dark mode editor")[0].key == "theme"
    # Each indexed text got its own vector from the new model; the texts survived the round trip.
    rows = {r["key"]: r for r in new.store.select(KV, None, ["key", "text", "vectors"])}
    texts = indexed_texts(rows["food"])
    assert texts == ["spicy ramen noodles", "olives on pizza\nnever", "拉面 很 好吃"]
    got = np.asarray(rows["food"]["vectors"], dtype=np.float32)
    assert got.shape == (3, 128)
    assert np.allclose(got, OtherEmbedder().embed(texts), atol=1e-6)
    assert indexed_texts(rows["raw"]) == [] and not rows["raw"]["vectors"]
    assert kv.get(("memories", "u2"), "raw") is not None
    # Experiences still work with the new model too.
    assert new.recall("payments integration tests")


def test_a_legacy_row_without_separators_keeps_one_vector_for_its_whole_text() -> None:
    row = {"text": "first text\nsecond text", "vectors": [[0.0] * 4, [0.0] * 4]}
    assert indexed_texts(row) == ["first text\nsecond text"]
    assert indexed_texts({"text": "one\ntext", "vectors": [[0.0] * 4]}) == ["one\ntext"]


def test_compact_covers_every_table(hash_mimir: Mimir) -> None:
    m = hash_mimir
    kv = KVStore(m)
    for i in range(3):  # three small appends: three fragments in each table
        kv.put(("notes",), f"k{i}", {"text": f"note {i}"})
        m.record(f"task {i}", f"action {i}", "success")
    assert m.store.fragments(KV) > 1
    m.compact()
    for name in TABLES:
        assert m.store.fragments(name) <= 1, name


def test_reindex_works_when_some_tables_are_empty(home: Path) -> None:
    # A store with experiences but no lessons and no kv documents: lancedb cannot build a table
    # from an empty Arrow table, so the backups of empty tables must be made from their schema.
    m = Mimir(home, embedder="hash")
    m.record(task="build the project", action="make all", outcome="success")
    m.close()
    m = Mimir(home, embedder=OtherEmbedder())
    assert m.reindex() == 1
    assert [h.experience.action for h in m.recall("build the project", k=1)] == ["make all"]
    assert m.reindex() == 1  # and again, now that every table exists


def test_reindex_holds_the_new_vectors_compactly(home: Path) -> None:
    """Re-embedded rows wait for the swap as Arrow (float32), not as row dicts of Python floats
    (~25 KB per experience: 4 GB of memory for a 100k-experience store)."""
    import tracemalloc

    n = 600
    m = Mimir(home, embedder="hash", auto_consolidate=False)
    m.record_many(
        [
            {
                "task": f"task {i} of module m{i % 37}",
                "action": f"fix {i % 11}",
                "outcome": "success",
            }
            for i in range(n)
        ]
    )
    m.reindex()  # the first run opens and warms every table
    tracemalloc.start()
    try:
        assert m.reindex(batch=50) == n  # one batch of row dicts at a time: 50 of 600
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak / n < 15_000, f"{peak / n:.0f} bytes per experience"
    hits = m.recall("task 5 of module m5", k=1)
    assert hits and hits[0].experience.task == "task 5 of module m5"
