"""The kv table: namespaced documents, hybrid search, TTL, redaction, schema migration."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mimir_core import Mimir
from mimir_core.errors import InvalidInputError
from mimir_core.hosting.kv import KVPut, KVStore, document_text, matches_filter, validate_namespace
from mimir_core.store import core as store_mod


@pytest.fixture
def kv(hash_mimir: Mimir) -> KVStore:
    return KVStore(hash_mimir)


def test_put_get_update_delete_keep_created_at(kv: KVStore) -> None:
    kv.put(("u", "1"), "k", {"text": "prefers dark mode"})
    first = kv.get(("u", "1"), "k")
    assert first is not None and first.value == {"text": "prefers dark mode"}
    time.sleep(0.01)
    kv.put(("u", "1"), "k", {"text": "prefers light mode"})
    second = kv.get(("u", "1"), "k")
    assert second is not None and second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    kv.delete(("u", "1"), "k")
    assert kv.get(("u", "1"), "k") is None


def test_last_write_of_a_batch_wins_and_deletes_apply(kv: KVStore) -> None:
    kv.put_many(
        [
            KVPut(("a",), "k", {"v": 1}),
            KVPut(("a",), "k", {"v": 2}),
            KVPut(("a",), "gone", {"v": 3}),
            KVPut(("a",), "gone", None),
        ]
    )
    assert [(i.key, i.value) for i in kv.search(("a",))] == [("k", {"v": 2})]


def test_search_ranks_by_relevance_with_unindexed_last(kv: KVStore) -> None:
    kv.put(("m",), "a", {"text": "the deploy failed with ImagePullBackOff"})
    kv.put(("m",), "b", {"text": "lunch preferences: vegetarian"})
    kv.put(("m",), "c", {"text": "ImagePullBackOff again"}, texts=[])
    hits = kv.search(("m",), query="ImagePullBackOff on deploy")
    assert [h.key for h in hits] == ["a", "b", "c"]
    assert hits[0].score is not None and hits[0].score > (hits[1].score or 0)
    assert hits[2].score is None
    assert [h.key for h in kv.search(("m",), query="deploy", limit=1, offset=1)] == ["b"]


def test_texts_pick_what_a_document_is_found_by(kv: KVStore) -> None:
    kv.put(("d",), "x", {"title": "alpha", "body": "zebra"}, texts=["alpha"])
    kv.put(("d",), "y", {"title": "beta", "body": "alpha"}, texts=["beta"])
    assert kv.search(("d",), query="alpha")[0].key == "x"


def test_values_and_texts_are_redacted(kv: KVStore, hash_mimir: Mimir) -> None:
    token = "ghp_" + "Zq7Rm2Kx9Lp4Wt6Yv8Bn3Cd5Fg1Hj0Ms2Qa"
    kv.put(("s",), "k", {"note": f"use {token}", "password": "hunter2"}, texts=[token])
    item = kv.get(("s",), "k")
    assert item is not None and token not in str(item.value) and "hunter2" not in str(item.value)
    rows = hash_mimir.store.select(store_mod.KV, None, ["text", "value"])
    assert token not in str(rows)


def test_ttl_expiry_and_sweep(hash_mimir: Mimir) -> None:
    kv = KVStore(hash_mimir, default_ttl_minutes=0.005)  # 0.3 s
    kv.put(("t",), "short", {"v": 1})
    kv.put(("t",), "long", {"v": 2}, ttl_minutes=10)
    time.sleep(0.5)
    assert kv.get(("t",), "short") is None
    assert [i.key for i in kv.search(("t",))] == ["long"]
    assert kv.list_namespaces() == [("t",)]
    assert kv.sweep_expired() == 1


def test_bad_input_names_the_field(kv: KVStore) -> None:
    for bad, field in [
        ((), "namespace"),
        (("a.b",), "namespace"),
        (("",), "namespace"),
        ("ab", "namespace"),
    ]:
        with pytest.raises(InvalidInputError, match=field):
            kv.put(bad, "k", {"v": 1})  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="value"):
        kv.put(("a",), "k", ["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="value"):
        kv.put(("a",), "k", {"obj": object()})
    with pytest.raises(InvalidInputError, match="ttl"):
        kv.put(("a",), "k", {"v": 1}, ttl_minutes=-1)
    with pytest.raises(InvalidInputError, match="limit"):
        kv.search(("a",), limit=-1)
    kv.put(("a",), "k", {"v": 1})
    with pytest.raises(InvalidInputError, match="filter"):
        kv.search(("a",), filter={"v": {"$regex": "x"}})


def test_helpers() -> None:
    assert validate_namespace(["a", "b"]) == ("a", "b")
    text = document_text({"title": "Fix", "tags": ["ci", "flaky"], "meta": {"n": 2}, "e": None})
    assert text.splitlines() == ["title: Fix", "tags: ci, flaky", "meta.n: 2"]
    assert matches_filter({"a": {"b": 3}}, {"a.b": {"$gte": 3, "$lt": 4}})
    assert not matches_filter({"a": "x"}, {"a": {"$gt": 1}})


def test_a_schema_1_store_gains_the_kv_table(home: Path) -> None:
    m = Mimir(home, embedder="hash")
    m.record("t", "a", "success")
    m.store.db.drop_table(store_mod.KV)
    m.store.set_meta({"schema_version": "1"})
    m.close()
    reopened = Mimir(home, embedder="hash")
    assert reopened.stats().schema_version == store_mod.SCHEMA_VERSION  # and on through 3
    kv = KVStore(reopened)
    kv.put(("n",), "k", {"text": "after the migration"})
    assert kv.search(("n",), query="migration")[0].key == "k"
    assert reopened.stats().experiences == 1


GH_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.mark.parametrize(
    ("namespace", "key", "field"),
    [
        (("notes", GH_TOKEN), "k", "namespace"),
        (("notes",), f"token-{GH_TOKEN}", "key"),
        (("notes", "a\ud800"), "k", "namespace"),
        (("notes",), "k\udcff", "key"),
    ],
)
def test_a_label_or_key_holding_a_secret_or_a_lone_surrogate_is_refused(
    kv: KVStore, home: Path, namespace: tuple[str, ...], key: str, field: str
) -> None:
    # Labels and keys are identifiers, stored and listed in clear: redacting one would change
    # which item it names, so it is refused (without echoing the secret).
    with pytest.raises(InvalidInputError) as err:
        kv.put(namespace, key, {"v": 1})
    assert err.value.field == field and GH_TOKEN not in str(err.value)
    assert kv.list_namespaces() == []
    assert not any(GH_TOKEN.encode() in p.read_bytes() for p in home.rglob("*") if p.is_file())


def test_a_lone_surrogate_in_a_value_is_stored_as_a_replacement_character(kv: KVStore) -> None:
    kv.put(("notes",), "k", {"text": "cut \ud83d utf-16 and a pair \ud83d\ude00"})
    item = kv.get(("notes",), "k")
    assert item is not None and item.value == {"text": "cut \ufffd utf-16 and a pair \U0001f600"}
