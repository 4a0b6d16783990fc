"""The recall read path: candidates read with their whole experience as one document column (and
rows written without one), and the full-text search running while the query is embedded."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from mimir_core import Mimir
from mimir_core.errors import EmbedderUnavailableError
from mimir_core.search.recall import recall
from mimir_core.store import core as store_mod
from mimir_core.store.core import DOC, EXPERIENCE_COLUMNS, EXPERIENCES

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


def _strip_docs(m: Mimir) -> None:
    """Make the store what schema 2 wrote: no ``doc`` column."""
    ds = m.store.table(EXPERIENCES).to_lance()
    ds.drop_columns([DOC])
    m.store._datasets.clear()


def test_hits_and_recommendations_are_whole_experiences_read_from_one_column(
    hash_mimir: Mimir,
) -> None:
    ids = _fill(hash_mimir)
    hash_mimir.supersede(ids[0], ids[1])
    store = hash_mimir.store
    row = store.select(EXPERIENCES, f"id = '{ids[2]}'", [DOC, *EXPERIENCE_COLUMNS])[0]
    assert set(json.loads(row[DOC])) == set(EXPERIENCE_COLUMNS) - {"superseded_by"}
    hits = hash_mimir.recall("flaky login test auth/session.py", k=6, include_superseded=True)
    assert hits and all(h.experience == hash_mimir.get(h.experience.id) for h in hits)
    assert {h.experience.id: h.experience.superseded_by for h in hits}.get(ids[0]) == ids[1]
    rec = hash_mimir.recommend("Repair the broken docker build on ARM")
    assert rec is not None and rec.action == "use the multi-arch base image"


def test_a_schema_2_store_gets_its_documents_and_keeps_its_indexes(home: Path) -> None:
    m = Mimir(home, embedder="hash")
    ids = _fill(m)
    before = {i: m.get(i) for i in ids}
    _strip_docs(m)
    m.store.set_meta({"schema_version": "2"})
    indexes = sorted(str(i.columns) for i in m.store.table(EXPERIENCES).list_indices())
    m.close()

    reopened = Mimir(home, embedder="hash")
    assert reopened.stats().schema_version == store_mod.SCHEMA_VERSION == 3
    table = reopened.store.table(EXPERIENCES)
    assert sorted(str(i.columns) for i in table.list_indices()) == indexes
    rows = reopened.store.select(EXPERIENCES, None, [DOC, "id"])
    assert len(rows) == len(ids) and all(r[DOC] for r in rows)
    hits = reopened.recall("duplicate key E11000 at signup", k=3)
    assert hits[0].experience == before[hits[0].experience.id]
    reopened.close()


def test_a_row_written_without_a_document_is_read_from_its_columns(hash_mimir: Mimir) -> None:
    """As a Mimir older than schema 3, still running, writes it (also after a compaction moved
    the rows the search found: read at the version it was found in)."""
    ids = _fill(hash_mimir)
    store = hash_mimir.store
    rows = store.select(EXPERIENCES, None, [*EXPERIENCE_COLUMNS, "text", "vector", "action_vector"])
    store.delete(EXPERIENCES, "true")
    store.append(EXPERIENCES, [{k: v for k, v in r.items()} for r in rows])  # no doc
    assert not any(r[DOC] for r in store.select(EXPERIENCES, None, [DOC]))
    hits = hash_mimir.recall("Stop the E11000 duplicate key error on signup", k=2)
    assert hits[0].experience.id == ids[3] and hits[0].experience == hash_mimir.get(ids[3])

    qvec = hash_mimir.embedder.embed_one("docker build ARM")
    cols = ["_rowid", DOC, "superseded_by"]
    found = store.vector_search(EXPERIENCES, qvec, where=None, limit=6, columns=cols)
    store.delete(EXPERIENCES, f"id = '{ids[0]}'")
    store.optimize(EXPERIENCES)  # rewrites the fragment: the row ids found point elsewhere now
    expanded = store.expand_docs([dict(r) for r in found])
    assert sorted(r["id"] for r in expanded) == sorted(ids)  # as the search saw the table
    for r in expanded:
        assert json.loads(r["context"])["file"] == f"src/mod_{ids.index(r['id'])}.py"
    hash_mimir.forget(ids[1])  # a privacy delete drops the old versions: nothing read from them
    assert store.expand_docs([dict(r) for r in found]) == []


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
