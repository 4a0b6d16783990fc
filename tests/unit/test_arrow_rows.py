"""Whole-table reads turn vector columns into numpy rows, never into Python floats.

A 384-d vector as a Python list costs ~12 KB (a float object per component) against 1.5 KB as
float32; a full consolidation of 100k experiences peaked at 4 GB of resident memory that way
(1.4 GB since, measured by ``python -m bench.lessons``)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pyarrow as pa

from mimir_core import Mimir
from mimir_core.lessons.evidence import load_exps
from mimir_core.store.core import EXPERIENCES, arrow_rows


def test_vector_columns_become_float32_rows_of_one_matrix() -> None:
    vecs = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(12, dtype=np.float32)), 4)
    table = pa.table({"id": ["a", "b", "c"], "vector": vecs, "n": [1, 2, 3]})
    rows = arrow_rows(table)
    assert [r["id"] for r in rows] == ["a", "b", "c"] and [r["n"] for r in rows] == [1, 2, 3]
    for i, row in enumerate(rows):
        assert isinstance(row["vector"], np.ndarray) and row["vector"].dtype == np.float32
        assert row["vector"].tolist() == [4.0 * i + j for j in range(4)]
    assert rows[0]["vector"].base is not None  # a view, not a copy per row


def test_a_vector_column_with_nulls_and_an_empty_table_stay_plain() -> None:
    vecs = pa.array([[1.0, 2.0], None], type=pa.list_(pa.float32(), 2))
    rows = arrow_rows(pa.table({"id": ["a", "b"], "vector": vecs}))
    assert rows == [{"id": "a", "vector": [1.0, 2.0]}, {"id": "b", "vector": None}]
    assert arrow_rows(pa.table({"id": pa.array([], pa.string())})) == []


def test_loading_experiences_for_consolidation_costs_no_python_floats(hash_mimir: Mimir) -> None:
    n = 600
    hash_mimir.record_many(
        [
            {
                "task": f"task {i} about module m{i % 37}",
                "action": f"run fix {i % 11}",
                "outcome": "failure" if i % 3 else "success",
                "idempotency_key": f"k{i}",
            }
            for i in range(n)
        ]
    )
    hash_mimir.store.count(EXPERIENCES)  # open everything before measuring
    tracemalloc.start()
    try:
        exps = load_exps(hash_mimir.store, None)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(exps) == n
    assert isinstance(exps[0].vec, np.ndarray) and exps[0].avec.dtype == np.float32
    # Two 384-d vectors as Python lists are ~25 KB per experience; as numpy rows, ~3 KB.
    assert peak / n < 10_000, f"{peak / n:.0f} bytes per experience"
