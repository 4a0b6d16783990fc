"""The recall read path: narrow candidate reads, full rows for the hits only, and the full-text
search running while the query is embedded."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest

from mimir_core import Mimir
from mimir_core.errors import EmbedderUnavailableError
from mimir_core.recall import recall
from mimir_core.store import EXPERIENCE_COLUMNS, EXPERIENCES

TASKS = [
    ("Fix the flaky login test in auth/session.py", "pin the clock in the fixture"),
    ("Speed up the invoice export job", "batch the SQL inserts"),
    ("Repair the broken docker build on ARM", "use the multi-arch base image"),
    ("Stop the E11000 duplicate key error on signup", "upsert on the email index"),
    ("Make the CSV importer accept UTF-16 files", "sniff the BOM before decoding"),
    ("Cut the cold start of the API server", "import pandas lazily"),
]


def _fill(m: Mimir) -> list[str]:
    return [
        m.record(task, action, "success", context={"file": f"src/mod_{i}.py"}).id
        for i, (task, action) in enumerate(TASKS)
    ]


def test_rows_by_id_survive_rows_moved_by_a_compaction(hash_mimir: Mimir) -> None:
    ids = _fill(hash_mimir)
    store = hash_mimir.store
    qvec = hash_mimir.embedder.embed_one("docker build ARM")
    found = store.vector_search(
        EXPERIENCES, qvec, where=None, limit=len(ids), columns=["id", "_rowid"]
    )
    want = [r["id"] for r in found]
    row_ids = [int(r["_rowid"]) for r in found]
    version = found[0]["_version"]
    fresh = store.rows_by_id(EXPERIENCES, want, EXPERIENCE_COLUMNS, row_ids, version)
    assert [r["id"] for r in fresh] == want
    assert all(r["task"] and r["action"] for r in fresh)

    hash_mimir.forget(want[0])  # rewrites the fragments: the old row ids point elsewhere now
    stale = store.rows_by_id(EXPERIENCES, want[1:], EXPERIENCE_COLUMNS, row_ids[1:], version)
    assert sorted(r["id"] for r in stale) == sorted(want[1:])
    by_id = {r["id"]: r for r in fresh}
    for row in stale:
        assert row["task"] == by_id[row["id"]]["task"]
        assert row["context"] == by_id[row["id"]]["context"]


def test_recall_with_a_lazy_query_vector_matches_an_eager_one(hash_mimir: Mimir) -> None:
    _fill(hash_mimir)
    query = "duplicate key E11000 at signup"
    qvec = hash_mimir.embedder.embed_one(query)
    now = datetime.now(timezone.utc)
    kw = {"where": None, "prefer_scope": None, "half_life_days": None, "now": now}
    eager = recall(hash_mimir.store, qvec, query, 3, **kw)  # type: ignore[arg-type]
    lazy = recall(hash_mimir.store, lambda: qvec, query, 3, **kw)  # type: ignore[arg-type]
    assert [h.experience for h in eager] == [h.experience for h in lazy]
    assert [h.score for h in eager] == [h.score for h in lazy]
    assert eager[0].experience.task.startswith("Stop the E11000")
    assert "e11000" in eager[0].matched_terms
    full = hash_mimir.get(eager[0].experience.id)
    assert eager[0].experience == full  # every field, not just the scoring columns


def test_an_embedding_failure_still_fails_recall(hash_mimir: Mimir) -> None:
    _fill(hash_mimir)

    def broken() -> np.ndarray:
        raise EmbedderUnavailableError("model missing")

    with pytest.raises(EmbedderUnavailableError, match="model missing"):
        recall(
            hash_mimir.store,
            broken,  # type: ignore[arg-type]
            "login test",
            3,
            where=None,
            prefer_scope=None,
            half_life_days=None,
            now=datetime.now(timezone.utc),
        )


def test_an_identifier_in_the_context_is_matched(hash_mimir: Mimir) -> None:
    _fill(hash_mimir)
    hits = hash_mimir.recall("src/mod_4.py", k=3)
    assert hits and hits[0].experience.context == {"file": "src/mod_4.py"}
    assert "src/mod_4.py" in hits[0].matched_terms
