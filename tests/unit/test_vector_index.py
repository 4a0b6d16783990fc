"""The vector index: IVF_SQ, its distances, its upkeep over many writes, older indexes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mimir_core import Mimir
from mimir_core.store import core as store_mod
from mimir_core.store.core import EXPERIENCES, TRAINED_KEY

SERVICES = ["billing", "auth", "search", "ledger", "mailer", "gateway", "reports"]


def _fill(m: Mimir, n: int, start: int = 0) -> None:
    m.record_many(
        [
            {
                "task": f"refactor module {i} of the {SERVICES[i % 7]} service, step {i % 13}",
                "action": f"run make target-{i % 11}",
                "outcome": "success",
            }
            for i in range(start, start + n)
        ]
    )
    assert m.store.upkeep.wait(120)  # the write's upkeep runs on the store's upkeep thread


def _vector_index(m: Mimir) -> Any:
    return store_mod._vector_index_description(m.store._dataset(EXPERIENCES))


@pytest.fixture
def small_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """Index at 300 rows, fold in every 100 rows, partitions of 100 rows."""
    monkeypatch.setattr(store_mod, "INDEX_ROWS", 300)
    monkeypatch.setattr(store_mod, "UNINDEXED_ROWS", 100)
    monkeypatch.setattr(store_mod, "INDEX_PARTITION_ROWS", 100)
    monkeypatch.setattr(store_mod, "COMPACT_FRAGMENTS", 5)
    monkeypatch.setattr(store_mod, "FRAGMENT_ROWS", 350)


class DenseEmbedder:
    """Deterministic dense unit vectors, near for texts that share their first words (the hash
    embedder's sparse vectors are not what an 8-bit index is made for)."""

    name = "test-dense-384"
    dim = 384

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        def gauss(text: str) -> np.ndarray:
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            return np.random.default_rng(seed).standard_normal(self.dim)

        out = np.stack([gauss(" ".join(t.split()[:3])) + 0.8 * gauss(t) for t in texts])
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def _exact(m: Mimir, q: np.ndarray, rows: list[dict[str, Any]]) -> list[float]:
    vectors = {r["id"]: r["vector"] for r in m.store.select(EXPERIENCES, None, ["id", "vector"])}
    return [1.0 - float(np.asarray(vectors[r["id"]]) @ q) for r in rows]


def test_distances_from_the_8_bit_codes_are_the_cosine_on_the_same_scale_as_exact_ones(
    home: Path, small_index: None
) -> None:
    # On the cosine metric LanceDB gives the codes' distances as 2 - 2 cos, and the exact
    # 1 - cos of every row found once some rows are outside the index.
    m = Mimir(home, embedder=DenseEmbedder())  # type: ignore[arg-type]
    _fill(m, 400)
    m.compact()
    assert m.store._vector_index(EXPERIENCES) == (store_mod.VECTOR_INDEX, 400, True)
    q = m.embedder.embed(["refactor module 17 of the auth service"])[0]
    rows = m.store.vector_search(EXPERIENCES, q, where=None, limit=20, columns=["id"])
    assert len(rows) == 20
    distances = [r["_distance"] for r in rows]
    assert distances == sorted(distances) and distances[0] < 0.5
    assert distances == pytest.approx(_exact(m, q, rows), abs=0.005)

    m.record("refactor module 17 of the auth service", "outside the index", "success")
    assert not m.store._vector_index(EXPERIENCES).whole  # one row outside: exact distances
    rows = m.store.vector_search(EXPERIENCES, q, where=None, limit=20, columns=["id", "action"])
    assert rows[0]["action"] == "outside the index" and rows[0]["_distance"] == pytest.approx(0)
    assert [r["_distance"] for r in rows] == pytest.approx(_exact(m, q, rows), abs=1e-5)
    m.close()


def _exact_top(m: Mimir, q: np.ndarray, k: int) -> list[float]:
    """The ``k`` smallest exact cosine distances to ``q`` (the hash embedder makes many ties,
    so rows are compared by distance)."""
    table = m.store.column(EXPERIENCES, ["vector"])
    mat = np.stack(table.column("vector").to_numpy(zero_copy_only=False)).astype(np.float32)
    sims = (mat @ q) / (np.linalg.norm(mat, axis=1) * np.linalg.norm(q))
    return sorted((1.0 - sims).tolist())[:k]


def test_upkeep_keeps_one_index_segment_so_the_table_stays_compact(
    home: Path, small_index: None
) -> None:
    # LanceDB indexed each upkeep's new rows as one more delta segment and would not compact
    # fragments covered by different segments: both piled up and every search visited each
    # (1.6 -> 20 ms over 40 upkeeps of 1,000 rows).
    m = Mimir(home, embedder="hash")
    for batch in range(12):
        _fill(m, 100, batch * 100)
        if batch >= 2:  # indexed from 300 rows on
            assert len(_vector_index(m).segments) == 1
    index = _vector_index(m)
    ds = m.store._dataset(EXPERIENCES)
    assert len(ds.get_fragments()) < store_mod.COMPACT_FRAGMENTS == 5
    assert int(index.num_rows_indexed) >= 1_100  # every upkeep folded its rows in
    hit = m.recall("refactor module 1104 of the reports service, step 12", k=1)[0]
    assert hit.experience.task.startswith("refactor module 1104 ")
    m.close()


def test_compaction_leaves_full_fragments_alone(home: Path, small_index: None) -> None:
    # LanceDB's own compaction merges every fragment under 1M rows: each upkeep rewrote the
    # whole table (a 1M-row load wrote ~50 GB).
    m = Mimir(home, embedder="hash")
    full: dict[int, int] = {}  # fragment id -> rows, once it holds FRAGMENT_ROWS or more
    compactions = 0
    for batch in range(20):
        before = {f.fragment_id for f in m.store._dataset(EXPERIENCES).get_fragments()}
        _fill(m, 100, batch * 100)
        now = {f.fragment_id: f.count_rows() for f in m.store._dataset(EXPERIENCES).get_fragments()}
        compactions += not before <= set(now)
        for frag, rows in full.items():
            assert now.get(frag) == rows, f"full fragment {frag} was rewritten"
        full.update({f: r for f, r in now.items() if r >= store_mod.FRAGMENT_ROWS})
        assert len(now) <= len(full) + store_mod.COMPACT_FRAGMENTS
    assert compactions >= 3 and len(full) >= 3
    assert m.stats().experiences == 2_000
    m.close()


def test_the_index_is_trained_again_once_its_table_has_doubled(
    home: Path, small_index: None
) -> None:
    m = Mimir(home, embedder="hash")
    _fill(m, 300)
    m.compact()
    assert int(m.store.meta()[TRAINED_KEY.format(EXPERIENCES)]) == 300
    partitions = _partitions(m)
    _fill(m, 200, 300)  # 500 rows: merged into the old partitions
    assert int(m.store.meta()[TRAINED_KEY.format(EXPERIENCES)]) == 300
    _fill(m, 200, 500)  # 700 rows, over twice 300: new centroids, partitions of ~100 rows
    assert int(m.store.meta()[TRAINED_KEY.format(EXPERIENCES)]) == 700
    assert len(_vector_index(m).segments) == 1
    assert _partitions(m) > partitions
    m.close()


def _partitions(m: Mimir) -> int:
    stats = m.store._dataset(EXPERIENCES).stats.index_stats(_vector_index(m).name)
    return int(stats["indices"][0]["num_partitions"])


def test_an_older_ivf_rq_index_is_searched_with_a_re_rank_then_rebuilt(
    home: Path, small_index: None
) -> None:
    from lancedb.index import IvfRq

    m = Mimir(home, embedder="hash")
    _fill(m, 400)
    m.compact()
    m.store.table(EXPERIENCES).create_index(
        "vector", config=IvfRq(distance_type="cosine"), replace=True
    )
    assert m.store._vector_index(EXPERIENCES).kind == "IVF_RQ"
    q = m.embedder.embed(["refactor module 33 of the search service"])[0]
    rows = m.store.vector_search(EXPERIENCES, q, where=None, limit=5, columns=["id"])
    assert [r["_distance"] for r in rows] == pytest.approx(_exact_top(m, q, 5), abs=1e-5)
    _fill(m, 10, 400)  # any write's upkeep moves it to the current index
    assert m.store._vector_index(EXPERIENCES).kind == "IVF_SQ"
    m.close()


def test_probes_grow_with_the_table() -> None:
    assert store_mod.probes(0) == store_mod.probes(100_000) == store_mod.MIN_PROBES == 20
    assert store_mod.probes(1_000_000) == 30
    assert store_mod.probes(2_000_000) == 60


def test_the_searchable_text_is_made_from_the_document_as_the_column_holds_it(
    hash_mimir: Mimir,
) -> None:
    from mimir_core.store.core import DOC, row_text
    from mimir_core.text import fts_text

    hash_mimir.record(
        "部署失败 after the E11000 fix in src/app.py",
        "重启服务",
        "failure",
        reason="the cache kept the old index",
        context={"file": "src/app.py", "n": 3, "deep": {"k": ["x", 1.5, True]}},
    )
    hash_mimir.record("plain task", "plain action", "success")
    for row in hash_mimir.store.select(EXPERIENCES, None, [DOC, "text"]):
        assert fts_text(row_text(json.loads(row[DOC]))) == row["text"]


def test_searches_on_other_threads_run_through_every_upkeep_step(
    home: Path, small_index: None
) -> None:
    # Upkeep's steps mutate the dataset they run on: run on the one the searches share, a
    # search on another thread met "RuntimeError: Already mutably borrowed" (MCP server's
    # upkeep thread beside its tool calls).
    import threading

    m = Mimir(home, embedder="hash")
    _fill(m, 400)
    q = m.embedder.embed(["refactor module 17 of the auth service"])[0]
    stop, errors, searches = threading.Event(), [], [0]

    def search() -> None:
        while not stop.is_set():
            try:
                rows = m.store.vector_search(
                    EXPERIENCES, q, where="superseded_by IS NULL", limit=20, columns=["_rowid"]
                )
                assert len(rows) == 20
                m.store.text_search(
                    EXPERIENCES, "auth service", where=None, limit=5, columns=["id"]
                )
                searches[0] += 1
            except Exception as exc:  # any failure is the finding
                errors.append(exc)
                return

    readers = [threading.Thread(target=search) for _ in range(3)]
    for t in readers:
        t.start()
    try:
        for batch in range(8):
            _fill(m, 60, 400 + batch * 60)
            m.store.optimize(EXPERIENCES, compact=True)
    finally:
        stop.set()
        for t in readers:
            t.join()
    assert not errors, errors[:3]
    assert searches[0] > 8
    m.close()


def test_the_index_description_is_read_once_per_version_and_follows_other_writers(
    home: Path, small_index: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    describe = store_mod._vector_index_description
    monkeypatch.setattr(
        store_mod, "_vector_index_description", lambda ds: reads.append(ds.version) or describe(ds)
    )
    m = Mimir(home, embedder=DenseEmbedder())  # type: ignore[arg-type]
    other = Mimir(home, embedder=DenseEmbedder())  # type: ignore[arg-type]
    _fill(m, 400)
    m.compact()
    q = m.embedder.embed(["refactor module 17 of the auth service"])[0]
    assert m.store._vector_index(EXPERIENCES) == (store_mod.VECTOR_INDEX, 400, True)
    reads.clear()
    for _ in range(3):
        m.store.vector_search(EXPERIENCES, q, where=None, limit=5, columns=["id"])
    assert len(reads) <= 1  # one version: read once, whatever the number of searches

    # Another writer adds a row outside the index: the next search reads the new version's.
    other.record("refactor module 17 of the auth service", "outside the index", "success")
    assert not m.store._vector_index(EXPERIENCES).whole
    rows = m.store.vector_search(EXPERIENCES, q, where=None, limit=5, columns=["action"])
    assert rows[0]["action"] == "outside the index" and rows[0]["_distance"] == pytest.approx(0)
    other.compact()  # folds the row in
    assert m.store._vector_index(EXPERIENCES) == (store_mod.VECTOR_INDEX, 401, True)
    other.close()
    m.close()
