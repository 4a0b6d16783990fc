"""Store-level rules: schema versions, migrations, reindex recovery."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mimir_core import Mimir
from mimir_core.errors import SchemaVersionError, StoreError
from mimir_core.store import core as store_mod


def test_a_store_from_a_newer_schema_is_refused(home: Path) -> None:
    m = Mimir(home, embedder="hash")
    m.record("t", "a", "success")
    m.store.set_meta({"schema_version": str(store_mod.SCHEMA_VERSION + 1)})
    m.close()
    with pytest.raises(SchemaVersionError, match="newer"):
        Mimir(home, embedder="hash").stats()


def test_migrations_run_in_order_and_bump_the_version(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = Mimir(home, embedder="hash")
    m.record("t", "a", "success")
    m.close()
    ran: list[int] = []
    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", store_mod.SCHEMA_VERSION + 2)
    monkeypatch.setattr(
        store_mod,
        "MIGRATIONS",
        {
            store_mod.SCHEMA_VERSION - 2: lambda s: ran.append(1),
            store_mod.SCHEMA_VERSION - 1: lambda s: ran.append(2),
        },
    )
    reopened = Mimir(home, embedder="hash")
    assert reopened.stats().schema_version == store_mod.SCHEMA_VERSION
    assert ran == [1, 2]


def test_an_interrupted_reindex_is_restored_from_its_backup(home: Path) -> None:
    m = Mimir(home, embedder="hash")
    for i in range(3):
        m.record(f"task {i}", "a", "success")
    s = m.store
    data = s.table("experiences").to_arrow()
    s.db.create_table("experiences__backup", data=data)  # as if a reindex died mid-way
    s.db.drop_table("experiences")
    m.close()
    assert Mimir(home, embedder="hash").stats().experiences == 3


def test_an_unwritable_store_location_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    m = Mimir(tmp_path / "h", store_uri=str(blocker / "store"), embedder="hash")
    with pytest.raises(StoreError, match="store"):
        m.stats()


def test_sql_literals_are_escaped(hash_mimir: Mimir) -> None:
    exp = hash_mimir.record("it's a task with 'quotes'", "a", "success", scope="o'brien")
    assert (
        hash_mimir.recall("it's a task with 'quotes'", scope="o'brien")[0].experience.id == exp.id
    )


def test_a_large_table_gets_key_and_vector_indexes_and_still_dedups(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without BTREE indexes every write's idempotency check scans the whole key column.
    monkeypatch.setattr(store_mod, "INDEX_ROWS", 300)
    m = Mimir(home, embedder="hash")
    items = [
        {
            "task": f"build module {i} of the payments service",
            "action": f"make build-{i % 7}",
            "outcome": "success" if i % 3 else "failure",
            "idempotency_key": f"key-{i}",
        }
        for i in range(320)
    ]
    first = m.record_many(items)
    m.compact()
    indexed = {tuple(i.columns) for i in m.store.table(store_mod.EXPERIENCES).list_indices()}
    assert {("id",), ("idem_key",), ("vector",)} <= indexed
    again = m.record_many(items[:50])  # the same keys: the same experiences, nothing new
    assert [e.id for e in again] == [e.id for e in first[:50]]
    assert m.stats().experiences == 320
    hit = m.recall("build module 17 of the payments service", k=1)[0]
    assert hit.experience.id == first[17].id


def test_bulk_writes_keep_the_indexes_current_without_a_compaction(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A few large writes leave few fragments: upkeep used to wait for 24 of them, so a store
    # filled by bulk writes (an import, record_many) had every row outside the full-text index
    # (scanned on every search: ~150 ms a recall at 20k rows) and no vector index.
    monkeypatch.setattr(store_mod, "INDEX_ROWS", 400)
    monkeypatch.setattr(store_mod, "UNINDEXED_ROWS", 150)
    m = Mimir(home, embedder="hash")

    def write(start: int, n: int) -> None:
        items = [
            {"task": f"migrate table {i} of the ledger", "action": f"alembic upgrade r{i % 9}"}
            for i in range(start, start + n)
        ]
        m.record_many([{**it, "outcome": "success"} for it in items])
        assert m.store.upkeep.wait(120)  # its upkeep runs on the store's upkeep thread

    def indexed() -> dict[str, int]:
        ds = m.store._dataset(store_mod.EXPERIENCES)
        return {d.field_names[0]: d.num_rows_indexed for d in ds.describe_indices()}

    write(0, 100)
    assert indexed() == {"text": 0}  # below the threshold: no upkeep on this write
    write(100, 100)
    assert indexed() == {"text": 200}  # 200 rows outside: folded in
    write(200, 250)
    assert indexed() == {"text": 450, "vector": 450, "id": 450, "idem_key": 450}
    assert store_mod.COMPACT_FRAGMENTS > 3  # it was the row count, not the fragment count
    hits = m.recall("migrate table 321 of the ledger", k=1)
    assert hits and hits[0].experience.action == "alembic upgrade r6"
    m.close()


def test_a_search_that_ran_out_of_matches_skips_the_prefilter(
    hash_mimir: Mimir, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A rare identifier matches a few rows: the post-filtered search returns fewer rows than
    # asked, and every match is among them. Running it again prefiltered cost ~40 ms at 1M rows.
    store = hash_mimir.store
    for i in range(30):
        hash_mimir.record(f"tune the cache of service {i}", f"set ttl {i}", "success")
    old = hash_mimir.record("signup fails with E11000", "drop the index", "failure")
    new = hash_mimir.record("signup still fails with E11000", "upsert on email", "success")
    hash_mimir.supersede(old.id, new.id)
    prefiltered: list[bool] = []
    real = store._read

    def read(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        prefiltered.append(args[3])
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "_read", read)
    where = "superseded_by IS NULL"
    rows = store.text_search(store_mod.EXPERIENCES, "E11000", where=where, limit=20, columns=["id"])
    assert [r["id"] for r in rows] == [new.id] and prefiltered == [False]
    assert [h.experience.id for h in hash_mimir.recall("E11000", k=5)] == [new.id]


def test_null_columns_reads_only_is_null_tests() -> None:
    assert store_mod.null_columns("superseded_by IS NULL") == ["superseded_by"]
    assert store_mod.null_columns("a IS NULL AND b IS NULL") == ["a", "b"]
    assert store_mod.null_columns("scope = 'x' AND superseded_by IS NULL") is None
    assert store_mod.null_columns("superseded_by IS NOT NULL") is None
    assert store_mod.null_columns("a IS NULL OR b IS NULL") is None


def test_live_searches_leave_out_what_was_superseded_on_the_post_filtered_path(
    hash_mimir: Mimir,
) -> None:
    """Enough live rows for the post-filter (no prefilter fallback): superseded ones still go."""
    exps = hash_mimir.record_many(
        [
            {
                "task": f"deploy the billing service to staging {i}",
                "action": f"a{i}",
                "outcome": "success",
            }
            for i in range(60)
        ]
    )
    gone = exps[:30]
    for old in gone:
        hash_mimir.supersede(old.id, exps[-1].id)
    gone_ids = {e.id for e in gone}
    store = hash_mimir.store
    vec = hash_mimir.embedder.embed(["deploy the billing service to staging"])[0]
    where = "superseded_by IS NULL"
    rows = store.vector_search(store_mod.EXPERIENCES, vec, where=where, limit=20, columns=["id"])
    assert len(rows) == 20 and not gone_ids & {r["id"] for r in rows}
    assert where not in store._selective  # answered by the post-filter, not the prefilter
    text = store.text_search(
        store_mod.EXPERIENCES, "billing staging", where=where, limit=20, columns=["id"]
    )
    assert len(text) == 20 and not gone_ids & {r["id"] for r in text}
    hits = hash_mimir.recall("deploy the billing service to staging", k=10)
    assert hits and not gone_ids & {h.experience.id for h in hits}
    assert len(hash_mimir.recall("deploy the billing service", k=10, include_superseded=True)) == 10


def test_tables_are_written_in_the_2_1_file_format(hash_mimir: Mimir) -> None:
    """Format 2.2 makes reads from single-valued columns ~8x slower at 1M rows."""
    hash_mimir.record("t", "a", "success")
    for name in store_mod.TABLES:
        ds = hash_mimir.store.table(name).to_lance()
        assert ds.data_storage_version == store_mod.DATA_STORAGE_VERSION == "2.1", name


def test_reindex_rewrites_a_2_2_table_in_the_2_1_format(home: Path) -> None:
    m = Mimir(home, embedder="hash")
    m.record("deploy the billing service", "helm upgrade billing", "success")
    store = m.store
    data = store.table(store_mod.EXPERIENCES).to_arrow()
    store.db.drop_table(store_mod.EXPERIENCES)
    store.db.create_table(store_mod.EXPERIENCES, data=data, data_storage_version="2.2")
    m.close()
    m = Mimir(home, embedder="hash")  # a store made before: it opens and reads as it is
    assert m.store.table(store_mod.EXPERIENCES).to_lance().data_storage_version == "2.2"
    assert m.recall("billing deploy")
    assert m.reindex() == 1
    assert m.store.table(store_mod.EXPERIENCES).to_lance().data_storage_version == "2.1"
    assert m.recall("billing deploy")[0].experience.action == "helm upgrade billing"
