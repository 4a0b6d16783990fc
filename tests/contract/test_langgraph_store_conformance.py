"""MimirStore passes the assertions of LangGraph's own store tests.

Ported from the langgraph repository: ``libs/checkpoint/tests/test_store.py`` (the reference
suite of ``BaseStore`` behaviour, run there on ``InMemoryStore``) and the persistent-store cases
of ``libs/checkpoint-sqlite/tests/test_store.py`` (batches, filters, namespace boundaries, SQL
injection). Differences, all because Mimir embeds with its own offline model instead of the
tests' ``CharacterEmbeddings``: queries that only made sense for character n-gram vectors
(``"bbbbluuu"`` for "blue") use a word instead, and ``index={"dims", "embed"}`` is replaced by
Mimir's embedder (an ``embed`` is refused). Everything runs on a real LanceDB store in a temp dir
with the real MiniLM embedder.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.tools import ToolRuntime, tool
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchOp,
)
from langgraph.store.base.batch import AsyncBatchedBaseStore

from mimir_core import Mimir
from mimir_core.errors import InvalidInputError
from mimir_integrations.langgraph import MimirStore

pytestmark = pytest.mark.asyncio


@pytest.fixture
def mimir_home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def store(mimir_home: Path, fast_embedder: Any) -> Iterator[MimirStore]:
    m = Mimir(mimir_home, embedder=fast_embedder)
    yield MimirStore(m)
    m.close()


def make_store(mimir_home: Path, fast_embedder: Any, **kwargs: Any) -> MimirStore:
    return MimirStore(Mimir(mimir_home, embedder=fast_embedder), **kwargs)


class BatchedMimirStore(AsyncBatchedBaseStore):
    """LangGraph's async batching wrapper around MimirStore, counting the batches it sends."""

    def __init__(self, inner: MimirStore) -> None:
        super().__init__()
        self.inner = inner
        self.calls: list[list[Op]] = []

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self.inner.batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        self.calls.append(ops)
        return await self.inner.abatch(ops)


# -- list_namespaces (checkpoint/tests/test_store.py) -------------------------------------------


async def test_list_namespaces_basic(store: MimirStore) -> None:
    namespaces = [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
        ("users", "123"),
        ("users", "456", "settings"),
        ("admin", "users", "789"),
    ]
    for i, ns in enumerate(namespaces):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})

    result = store.list_namespaces(prefix=("a", "b"))
    expected = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")]
    assert sorted(result) == sorted(expected)

    result = store.list_namespaces(suffix=("f",))
    assert sorted(result) == sorted([("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")])

    result = store.list_namespaces(prefix=("a",), suffix=("f",))
    assert sorted(result) == sorted([("a", "b", "f"), ("a", "c", "f")])

    result = store.list_namespaces(prefix=("a", "b"), max_depth=3)
    assert sorted(result) == sorted([("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")])

    result = store.list_namespaces(prefix=("a", "b"), limit=2)
    assert result == [("a", "b", "c"), ("a", "b", "d", "e")]

    result = store.list_namespaces(prefix=("a", "b"), offset=2)
    assert result == [("a", "b", "d", "i"), ("a", "b", "f")]

    result = store.list_namespaces(prefix=("a", "*", "f"))
    assert sorted(result) == sorted([("a", "b", "f"), ("a", "c", "f")])

    result = store.list_namespaces(suffix=("*", "f"))
    assert sorted(result) == sorted([("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")])

    assert store.list_namespaces(prefix=("nonexistent",)) == []
    assert store.list_namespaces(prefix=("users", "123")) == [("users", "123")]


async def test_list_namespaces_with_wildcards(store: MimirStore) -> None:
    namespaces = [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
        ("admin", "users", "789"),
        ("guests", "123"),
        ("guests", "456", "preferences"),
    ]
    for i, ns in enumerate(namespaces):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})

    result = store.list_namespaces(prefix=("users", "*"))
    assert sorted(result) == sorted(
        [("users", "123"), ("users", "456"), ("users", "789", "settings")]
    )
    assert store.list_namespaces(suffix=("*", "preferences")) == [("guests", "456", "preferences")]
    assert store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []

    store.put(namespace=("admin", "users", "settings", "789"), key="foo", value={"data": "x"})
    result = store.list_namespaces(prefix=("*", "users"), suffix=("*", "789"))
    assert result == [("admin", "users", "789"), ("admin", "users", "settings", "789")]


async def test_list_namespaces_pagination(store: MimirStore) -> None:
    for i in range(20):
        store.put(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": f"value_{i:02d}"})
    for offset in (0, 5, 15):
        result = store.list_namespaces(prefix=("namespace",), limit=5, offset=offset)
        assert result == [("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)]


async def test_list_namespaces_max_depth(store: MimirStore) -> None:
    namespaces = [
        ("a", "b", "c", "d"),
        ("a", "b", "c", "e"),
        ("a", "b", "f"),
        ("a", "g"),
        ("h", "i", "j", "k"),
    ]
    for i, ns in enumerate(namespaces):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})
    assert sorted(store.list_namespaces(max_depth=2)) == [("a", "b"), ("a", "g"), ("h", "i")]


async def test_list_namespaces_no_conditions_and_empty_store(store: MimirStore) -> None:
    assert store.list_namespaces() == []
    namespaces = [("a", "b"), ("c", "d"), ("e", "f", "g")]
    for i, ns in enumerate(namespaces):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})
    assert sorted(store.list_namespaces()) == sorted(namespaces)


# -- namespace validation ------------------------------------------------------------------------


async def test_cannot_put_empty_namespace(store: MimirStore) -> None:
    doc = {"foo": "bar"}
    for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "foo", doc)
        with pytest.raises(InvalidNamespaceError):
            await store.aput(bad, "foo", doc)

    await store.aput(("foo", "langgraph", "foo"), "bar", doc)
    assert (await store.aget(("foo", "langgraph", "foo"), "bar")).value == doc  # type: ignore[union-attr]
    assert (await store.asearch(("foo", "langgraph", "foo")))[0].value == doc
    await store.adelete(("foo", "langgraph", "foo"), "bar")
    assert (await store.aget(("foo", "langgraph", "foo"), "bar")) is None
    store.put(("foo", "langgraph", "foo"), "bar", doc)
    assert store.get(("foo", "langgraph", "foo"), "bar").value == doc  # type: ignore[union-attr]
    assert store.search(("foo", "langgraph", "foo"))[0].value == doc
    store.delete(("foo", "langgraph", "foo"), "bar")
    assert store.get(("foo", "langgraph", "foo"), "bar") is None

    # Past the public put API, the "langgraph" root is allowed (as in LangGraph's stores).
    await store.abatch([PutOp(("langgraph", "foo"), "bar", doc)])
    assert (await store.aget(("langgraph", "foo"), "bar")).value == doc  # type: ignore[union-attr]
    assert (await store.asearch(("langgraph", "foo")))[0].value == doc
    await store.adelete(("langgraph", "foo"), "bar")
    assert (await store.aget(("langgraph", "foo"), "bar")) is None
    store.batch([PutOp(("langgraph", "foo"), "bar", doc)])
    assert store.get(("langgraph", "foo"), "bar").value == doc  # type: ignore[union-attr]
    store.delete(("langgraph", "foo"), "bar")
    assert store.get(("langgraph", "foo"), "bar") is None

    # ...but a label with a period never is: it would address another namespace.
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("foo.bar",), "k", doc)])

    batched = BatchedMimirStore(store)
    for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            await batched.aput(bad, "foo", doc)
    await batched.aput(("foo", "langgraph", "foo"), "bar", doc)
    val = await batched.aget(("foo", "langgraph", "foo"), "bar")
    assert val is not None and val.value == doc
    assert (await batched.asearch(("foo", "langgraph", "foo")))[0].value == doc
    await batched.adelete(("foo", "langgraph", "foo"), "bar")
    assert (await batched.aget(("foo", "langgraph", "foo"), "bar")) is None


async def test_async_batch_store_deduplication(store: MimirStore) -> None:
    batched = BatchedMimirStore(store)
    same_doc, diff_doc = {"value": "same"}, {"value": "different"}
    await asyncio.gather(
        batched.aput(namespace=("test",), key="same", value=same_doc),
        batched.aput(namespace=("test",), key="different", value=diff_doc),
    )
    batched.calls.clear()
    results = await asyncio.gather(
        batched.aget(namespace=("test",), key="same"),
        batched.aget(namespace=("test",), key="same"),
        batched.aget(namespace=("test",), key="different"),
    )
    assert results[0] == results[1]
    assert results[0] != results[2]
    assert results[0].value == same_doc  # type: ignore[union-attr]
    assert results[2].value == diff_doc  # type: ignore[union-attr]
    assert len(batched.calls) == 1
    assert sorted(batched.calls[0], key=str) == sorted(
        [GetOp(("test",), "same"), GetOp(("test",), "different")], key=str
    )

    batched.calls.clear()
    await asyncio.gather(
        batched.aput(namespace=("test",), key="key", value={"value": 1}),
        batched.aput(namespace=("test",), key="key", value={"value": 2}),
    )
    assert len(batched.calls) == 1 and len(batched.calls[0]) == 1
    result = await batched.aget(namespace=("test",), key="key")
    assert result is not None and result.value == {"value": 2}

    batched.calls.clear()
    results2 = await asyncio.gather(
        batched.asearch(("test",), filter={"value": 2}),
        batched.asearch(("test",), filter={"value": 2}),
    )
    assert len(batched.calls) == 1 and len(batched.calls[0]) == 1
    assert results2[0] == results2[1]
    assert len(results2[0]) == 1 and results2[0][0].value == {"value": 2}


# -- vector search (checkpoint/tests/test_store.py) --------------------------------------------


async def test_index_config(mimir_home: Path, fast_embedder: Any) -> None:
    store = make_store(mimir_home, fast_embedder, index={"fields": ["text"]})
    assert store.index_config == {"fields": ["text"]}
    with pytest.raises(InvalidInputError, match="embed"):
        make_store(mimir_home, fast_embedder, index={"dims": 8, "embed": lambda t: [[0.0] * 8]})


DOCS = [
    ("doc1", {"text": "short text"}),
    ("doc2", {"text": "longer text document"}),
    ("doc3", {"text": "longest text document here"}),
    ("doc4", {"description": "text in description field"}),
    ("doc5", {"content": "text in content field"}),
    ("doc6", {"body": "text in body field"}),
]


async def test_vector_insert_with_auto_embedding(store: MimirStore) -> None:
    for key, value in DOCS:
        store.put(("test",), key, value)
    keys = [r.key for r in store.search(("test",), query="long text")]
    assert "doc2" in keys and "doc3" in keys
    for key, value in DOCS:
        await store.aput(("atest",), key, value)
    keys = [r.key for r in await store.asearch(("atest",), query="long text")]
    assert "doc2" in keys and "doc3" in keys


async def test_vector_update_with_embedding(store: MimirStore) -> None:
    store.put(("test",), "doc1", {"text": "zany zebra Xerxes"})
    store.put(("test",), "doc2", {"text": "something about dogs"})
    await store.aput(("test",), "doc3", {"text": "text about birds"})

    initial = store.search(("test",), query="Zany Xerxes")
    assert initial[0].key == "doc1"
    initial_score = initial[0].score
    assert initial_score is not None

    await store.aput(("test",), "doc1", {"text": "new text about dogs"})
    after = await store.asearch(("test",), query="Zany Xerxes")
    after_score = next((r.score for r in after if r.key == "doc1"), 0.0)
    assert after_score is not None and after_score < initial_score

    for r in store.search(("test",), query="new text about dogs"):
        if r.key == "doc1":
            assert r.score is not None and r.score > after_score

    store.put(("test",), "doc4", {"text": "new text about dogs"}, index=False)
    results = store.search(("test",), query="new text about dogs", limit=3)
    assert not any(r.key == "doc4" for r in results)


FILTER_DOCS = [
    ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
    ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
    ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
    ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
]


async def test_vector_search_with_filters(store: MimirStore) -> None:
    for key, value in FILTER_DOCS:
        await store.aput(("test",), key, value)

    results = store.search(("test",), query="apple", filter={"color": "red"})
    assert [r.key for r in results][:1] == ["doc1"] and len(results) == 2
    results = await store.asearch(("test",), query="car", filter={"color": "red"})
    assert [r.key for r in results][:1] == ["doc2"] and len(results) == 2
    results = store.search(("test",), query="blue", filter={"score": {"$gt": 3.2}})
    assert len(results) == 3 and results[0].key == "doc4"
    results = await store.asearch(
        ("test",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"}
    )
    assert [r.key for r in results] == ["doc3"]


async def test_async_batched_vector_search_concurrent(store: MimirStore) -> None:
    batched = BatchedMimirStore(store)
    colors = ["red", "blue", "green", "yellow", "purple"]
    items = ["apple", "car", "house", "book", "phone"]
    scores = [3.0, 3.5, 4.0, 4.5, 5.0]
    docs = [
        (
            f"doc{i}",
            {
                "text": f"{colors[i % 5]} {items[i % 5]}",
                "color": colors[i % 5],
                "score": scores[i % 5],
                "index": i,
            },
        )
        for i in range(50)
    ]
    await asyncio.gather(
        *[batched.aput(("test",), k, v) for k, v in docs],
        *[batched.adelete(("test",), k) for k, _ in docs],
        *[batched.aput(("test",), k, v) for k, v in docs],
    )
    queries: list[tuple[str, dict[str, Any]]] = [
        ("apple", {"color": "red"}),
        ("car", {"color": "blue"}),
        ("house", {"color": "green"}),
        ("phone", {"score": {"$gt": 4.99}}),
        ("book", {"score": {"$lte": 3.5}}),
        ("apple", {"score": {"$gte": 3.0}, "color": "red"}),
        ("car", {"score": {"$lt": 5.1}, "color": "blue"}),
        ("house", {"index": {"$gt": 25}}),
        ("phone", {"index": {"$lte": 10}}),
    ]
    all_results = await asyncio.gather(
        *[batched.asearch(("test",), query=q, filter=f) for q, f in queries]
    )
    ops = {"$gt": float.__gt__, "$gte": float.__ge__, "$lt": float.__lt__, "$lte": float.__le__}
    for results, (query, flt) in zip(all_results, queries, strict=True):
        assert results, f"no results for {query!r} with {flt}"
        for r in results:
            if "color" in flt:
                assert r.value["color"] == flt["color"]
            for name in ("score", "index"):
                for op, bound in flt.get(name, {}).items():
                    assert ops[op](float(r.value[name]), float(bound))


async def test_vector_search_pagination(store: MimirStore) -> None:
    for i in range(5):
        store.put(("test",), f"doc{i}", {"text": f"test document number {i}"})
    page1 = store.search(("test",), query="test", limit=2)
    page2 = await store.asearch(("test",), query="test", limit=2, offset=2)
    assert len(page1) == 2 and len(page2) == 2
    assert {r.key for r in page1}.isdisjoint(r.key for r in page2)
    assert len(store.search(("test",), query="test", limit=10)) == 5


async def test_vector_search_edge_cases(store: MimirStore) -> None:
    store.put(("test",), "doc1", {"text": "test document"})
    for query in ["", None, "test " * 100, "test!@#$%^&*()"]:
        assert len(store.search(("test",), query=query)) == 1
        assert len(await store.asearch(("test",), query=query)) == 1


async def test_embed_with_path(mimir_home: Path, fast_embedder: Any) -> None:
    store = make_store(mimir_home, fast_embedder, index={"fields": ["key0", "key1", "key3"]})
    await store.aput(("test",), "doc1", {"key1": "xxx", "key2": "yyy", "key3": "zzz"})
    await store.aput(
        ("test",), "doc2", {"key0": "uuu", "key1": "vvv", "key2": "www", "key3": "xxx"}
    )

    results = await store.asearch(("test",), query="xxx")
    assert len(results) == 2 and results[0].key != results[1].key
    ascore, bscore = results[0].score, results[1].score
    assert ascore is not None and bscore is not None
    assert ascore == pytest.approx(bscore, abs=1e-5)

    results = await store.asearch(("test",), query="uuu")
    assert results[0].key == "doc2"
    assert results[0].score is not None and results[1].score is not None
    assert results[0].score > results[1].score
    assert ascore == pytest.approx(results[0].score, abs=1e-5)

    results = await store.asearch(("test",), query="www")  # key2 is not indexed
    assert len(results) == 2
    assert all(r.score is not None and r.score < ascore for r in results)

    store.put(
        ("ops",), "doc3", {"key0": "aaa", "key1": "bbb", "key2": "ccc"}, index=["key0", "key1"]
    )
    store.put(
        ("ops",), "doc4", {"key0": "eee", "key1": "bbb", "key3": "ggg"}, index=["key1", "key3"]
    )
    results = store.search(("ops",), query="aaa")
    assert results[0].key == "doc3" and results[0].score > results[1].score  # type: ignore[operator]
    results = store.search(("ops",), query="ggg")
    assert results[0].key == "doc4" and results[0].score > results[1].score  # type: ignore[operator]
    results = store.search(("ops",), query="bbb")
    assert results[0].key != results[1].key and results[0].score == results[1].score
    results = store.search(("ops",), query="ccc")
    assert all(r.score is not None and r.score < ascore for r in results)

    store.put(("ops",), "doc5", {"key0": "hhh", "key1": "iii"}, index=False)
    results = store.search(("ops",), query="hhh")
    assert len(results) == 3
    assert next(r for r in results if r.key == "doc5").score is None


async def test_non_ascii(store: MimirStore) -> None:
    texts = ["这是中文", "これは日本語です", "이건 한국어야", "Это русский", "यह रूसी है"]
    for i, text in enumerate(texts, 1):
        store.put(("user_123", "memories"), str(i), {"text": text})
    for i, text in enumerate(texts, 1):
        assert store.search(("user_123", "memories"), query=text)[0].key == str(i)


# -- batches (checkpoint-sqlite/tests/test_store.py) -------------------------------------------


async def test_batch_order(store: MimirStore) -> None:
    store.put(("test", "foo"), "key1", {"data": "value1"})
    store.put(("test", "bar"), "key2", {"data": "value2"})
    results = store.batch(
        [
            GetOp(namespace=("test", "foo"), key="key1"),
            PutOp(namespace=("test", "bar"), key="key2", value={"data": "value2"}),
            SearchOp(namespace_prefix=("test",), filter={"data": "value1"}, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            GetOp(namespace=("test",), key="key3"),
        ]
    )
    assert len(results) == 5
    assert isinstance(results[0], Item) and results[0].value == {"data": "value1"}
    assert results[0].key == "key1" and results[0].namespace == ("test", "foo")
    assert results[1] is None
    assert isinstance(results[2], list) and [r.key for r in results[2]] == ["key1"]
    assert isinstance(results[3], list)
    assert ("test", "foo") in results[3] and ("test", "bar") in results[3]
    assert results[4] is None

    reordered = store.batch(
        [
            SearchOp(namespace_prefix=("test",), filter=None, limit=5, offset=0),
            GetOp(namespace=("test", "bar"), key="key2"),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=5, offset=0),
            PutOp(namespace=("test",), key="key3", value={"data": "value3"}),
            GetOp(namespace=("test", "foo"), key="key1"),
        ]
    )
    assert isinstance(reordered[0], list) and len(reordered[0]) >= 2
    assert isinstance(reordered[1], Item) and reordered[1].value == {"data": "value2"}
    assert isinstance(reordered[2], list) and reordered[2]
    assert reordered[3] is None
    assert isinstance(reordered[4], Item) and reordered[4].key == "key1"
    assert store.get(("test",), "key3").value == {"data": "value3"}  # type: ignore[union-attr]


async def test_batch_put_get_search_list_ops(store: MimirStore) -> None:
    results = store.batch(
        [
            PutOp(namespace=("test",), key="key1", value={"data": "value1"}),
            PutOp(namespace=("test",), key="key2", value={"data": "value2"}),
            PutOp(namespace=("test",), key="key3", value=None),
        ]
    )
    assert results == [None, None, None]
    got = store.batch(
        [GetOp(("test",), "key1"), GetOp(("test",), "key2"), GetOp(("test",), "key3")]
    )
    assert [g.key if g else None for g in got] == ["key1", "key2", None]  # type: ignore[union-attr]

    for ns, key, value in [
        (("s", "foo"), "k1", {"data": "value1", "tag": "a"}),
        (("s", "bar"), "k2", {"data": "value2", "tag": "a"}),
        (("s", "baz"), "k3", {"data": "value3", "tag": "b"}),
    ]:
        store.put(ns, key, value)
    found = store.batch(
        [
            SearchOp(namespace_prefix=("s",), filter={"tag": "a"}, limit=10, offset=0),
            SearchOp(namespace_prefix=("s",), filter=None, limit=2, offset=0),
            SearchOp(namespace_prefix=("s", "foo"), filter=None, limit=10, offset=0),
        ]
    )
    assert len(found[0]) == 2 and all(i.value["tag"] == "a" for i in found[0])  # type: ignore[union-attr]
    assert len(found[1]) == 2  # type: ignore[arg-type]
    assert [i.namespace for i in found[2]] == [("s", "foo")]  # type: ignore[union-attr]

    for ns in [
        ("t", "documents", "public"),
        ("t", "documents", "private"),
        ("t", "images", "public"),
    ]:
        store.put(ns, "d", {"content": "x"})
    listed = store.batch(
        [
            ListNamespacesOp(match_conditions=None, max_depth=2, limit=10, offset=0),
            ListNamespacesOp(
                match_conditions=(MatchCondition("suffix", ("public",)),),
                max_depth=None,
                limit=10,
                offset=0,
            ),
        ]
    )
    assert all(len(ns) <= 2 for ns in listed[0])  # type: ignore[union-attr]
    assert sorted(listed[1]) == [("t", "documents", "public"), ("t", "images", "public")]  # type: ignore[arg-type]


async def test_basic_store_operations(store: MimirStore) -> None:
    uid = uuid.uuid4().hex
    namespace = (uid, "test", "documents")
    assert store.search((uid,)) == []
    store.put(namespace, "doc1", {"title": "Test Document", "content": "Hello, World!"})
    item = store.get(namespace, "doc1")
    assert item is not None and item.namespace == namespace and item.key == "doc1"
    assert item.value == {"title": "Test Document", "content": "Hello, World!"}
    time.sleep(0.01)
    store.put(namespace, "doc1", {"title": "Updated", "content": "Hello, LangGraph!"})
    updated = store.get(namespace, "doc1")
    assert updated is not None and updated.value["title"] == "Updated"
    assert updated.updated_at > item.updated_at and updated.created_at == item.created_at
    assert store.get((uid, "test", "other_documents"), "doc1") is None
    store.put(namespace, "doc2", {"title": "Another Document", "content": "Greetings!"})
    assert {i.key for i in store.search((uid, "test"), limit=10)} == {"doc1", "doc2"}
    assert (uid, "test", "documents") in store.list_namespaces(prefix=(uid, "test"))
    store.delete(namespace, "doc1")
    store.delete(namespace, "doc2")
    assert store.get(namespace, "doc1") is None and store.search((uid, "test")) == []


async def test_search_items_filters_and_pages(store: MimirStore) -> None:
    base = "test_search_items"
    namespaces = [
        (base, "documents", "user1"),
        (base, "documents", "user2"),
        (base, "reports", "department1"),
        (base, "reports", "department2"),
    ]
    items = [
        {"title": "Doc 1", "author": "John Doe", "tags": ["important"]},
        {"title": "Doc 2", "author": "Jane Smith", "tags": ["draft"]},
        {"title": "Report A", "author": "John Doe", "tags": ["final"]},
        {"title": "Report B", "author": "Alice Johnson", "tags": ["draft"]},
    ]
    for ns, item in zip(namespaces, items, strict=True):
        store.put(ns, f"item_{ns[-1]}", item)
    assert all(i.namespace[1] == "documents" for i in store.search((base, "documents")))
    assert len(store.search((base, "reports"))) == 2
    first, second = store.search((base,), limit=2), store.search((base,), limit=2, offset=2)
    assert len(first) == 2 and len(second) == 2
    assert {i.key for i in first}.isdisjoint({i.key for i in second})
    assert len(store.search((base,))) == 4
    assert len(store.search((base,), filter={"author": "John Doe"})) == 2
    assert len(store.search((base,), filter={"tags": ["draft"]})) == 2


async def test_filter_injection_is_inert(store: MimirStore) -> None:
    store.put(("docs",), "public", {"access": "public", "data": "public info"})
    store.put(("docs",), "private", {"access": "private", "data": "secret"})
    assert [r.key for r in store.search(("docs",), filter={"access": "public"})] == ["public"]
    malicious_key = "access') = 'public' OR '1'='1' OR json_extract(value, '$."
    assert store.search(("docs",), filter={malicious_key: "dummy"}) == []
    for value in [
        "public' OR '1'='1",
        "public'; --",
        "public' UNION SELECT * FROM store --",
        "public\x00' OR '1'='1",
        "''''",
        "public' OR 'א'='א",
    ]:
        assert store.search(("docs",), filter={"access": value}) == []
    store.put(("docs",), "doc4", {"title": "O'Brien's Document", "access": "public"})
    found = store.search(("docs",), filter={"title": "O'Brien's Document"})
    assert [r.key for r in found] == ["doc4"]
    # Quotes in namespaces and keys are data too.
    store.put(("it's",), "k'1", {"v": 1})
    assert store.get(("it's",), "k'1").value == {"v": 1}  # type: ignore[union-attr]
    assert store.list_namespaces(prefix=("it's",)) == [("it's",)]


async def test_numeric_and_boolean_filters(store: MimirStore) -> None:
    store.put(("items",), "item1", {"price": 10, "quantity": 5})
    store.put(("items",), "item2", {"price": 20, "quantity": 3})
    store.put(("items",), "item3", {"price": 30, "quantity": 1})
    assert len(store.search(("items",), filter={"price": {"$gt": 15}})) == 2
    assert len(store.search(("items",), filter={"price": {"$lt": float("inf")}})) == 3
    assert len(store.search(("items",), filter={"price": {"$gt": float("-inf")}})) == 3
    assert store.search(("items",), filter={"price": {"$eq": math.nan}}) == []
    assert len(store.search(("items",), filter={"price": {"$lt": 10**100}})) == 3
    store.put(("items",), "item4", {"price": -10, "quantity": 0})
    assert [r.key for r in store.search(("items",), filter={"price": {"$lt": 0}})] == ["item4"]
    assert len(store.search(("items",), filter={"price": {"$ne": 10}})) == 3

    store.put(("flags",), "flag1", {"active": True, "name": "Feature A"})
    store.put(("flags",), "flag2", {"active": False, "name": "Feature B"})
    store.put(("flags",), "flag3", {"active": True, "name": "Feature C"})
    assert len(store.search(("flags",), filter={"active": True})) == 2
    assert [r.key for r in store.search(("flags",), filter={"active": False})] == ["flag2"]


async def test_filter_keys_with_hyphens_digits_and_dotted_paths(store: MimirStore) -> None:
    store.put(("docs",), "hyphen", {"access-level": "public", "user": {"access-level": "nested"}})
    store.put(("docs",), "digit", {"123abc": "ok", "user": {"123abc": "ok2"}})
    assert [r.key for r in store.search(("docs",), filter={"access-level": "public"})] == ["hyphen"]
    assert [r.key for r in store.search(("docs",), filter={"user.access-level": "nested"})] == [
        "hyphen"
    ]
    assert [r.key for r in store.search(("docs",), filter={"123abc": "ok"})] == ["digit"]
    assert [r.key for r in store.search(("docs",), filter={"user.123abc": "ok2"})] == ["digit"]
    assert [r.key for r in store.search(("docs",), filter={"user": {"123abc": "ok2"}})] == ["digit"]


# -- namespace boundaries (checkpoint-sqlite/tests/test_store.py) -----------------------------


def _spaces(store: MimirStore, prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
    return {item.namespace for item in store.search(prefix, limit=100)}


async def test_search_namespace_segment_boundary_and_literals(store: MimirStore) -> None:
    for ns in [
        ("foo",),
        ("foo", "child"),
        ("foo", "child", "deep"),
        ("foobar",),
        ("foobar", "baz"),
    ]:
        store.put(ns, "k", {"v": 1})
    for ns in [("foo2",), ("user_1",), ("user_1", "child"), ("userX1",), ("a%b",), ("axxb",)]:
        store.put(ns, "k", {"v": 1})
    store.put(("star*",), "k", {"v": 1})
    store.put(("starX",), "k", {"v": 1})
    assert _spaces(store, ("foo",)) == {("foo",), ("foo", "child"), ("foo", "child", "deep")}
    assert _spaces(store, ("foobar",)) == {("foobar",), ("foobar", "baz")}
    assert _spaces(store, ("foo2",)) == {("foo2",)}
    assert _spaces(store, ("fo",)) == set()
    assert _spaces(store, ("user_1",)) == {("user_1",), ("user_1", "child")}
    assert _spaces(store, ("a%b",)) == {("a%b",)}
    assert _spaces(store, ("star*",)) == {("star*",)}
    assert len(_spaces(store, ())) == 13  # an empty prefix constrains nothing


async def test_search_namespace_is_case_sensitive(store: MimirStore) -> None:
    store.put(("Foo",), "k", {"v": "upper"})
    store.put(("foo",), "k", {"v": "lower"})
    assert _spaces(store, ("foo",)) == {("foo",)}
    assert _spaces(store, ("Foo",)) == {("Foo",)}


async def test_list_namespaces_segment_boundary_and_newlines(store: MimirStore) -> None:
    for ns in [
        ("foo",),
        ("foo", "child"),
        ("foobar",),
        ("foobar", "baz"),
        ("uid", "users", "alice"),
        ("uid", "users", "malice"),
        ("uid", "a", "b", "alice"),
        ("users", "alice"),
        ("users", "alice\n"),
    ]:
        store.put(ns, "k", {"v": 1})
    assert set(store.list_namespaces(prefix=["foo"], limit=100)) == {("foo",), ("foo", "child")}
    assert set(store.list_namespaces(suffix=["alice"], limit=100)) == {
        ("uid", "users", "alice"),
        ("uid", "a", "b", "alice"),
        ("users", "alice"),
    }
    assert set(store.list_namespaces(prefix=["uid", "*", "alice"], limit=100)) == {
        ("uid", "users", "alice")
    }
    assert len(store.list_namespaces(prefix=["uid"], limit=100)) == 3
    assert set(store.list_namespaces(prefix=["users", "alice"], limit=100)) == {("users", "alice")}


async def test_list_namespaces_metacharacter_labels(store: MimirStore) -> None:
    pairs = [
        ("star*", "starX"),
        ("q?m", "qXm"),
        ("br[ack]et", "brXacXket"),
        ("user_1", "userX1"),
        ("a%b", "axxb"),
        ("plus+", "plusX"),
    ]
    for label, decoy in pairs:
        store.put((label,), "k", {"v": 1})
        store.put((decoy,), "k", {"v": 1})
        store.put((label, "child"), "k", {"v": 1})
    for label, decoy in pairs:
        found = set(store.list_namespaces(prefix=[label], limit=100))
        assert found == {(label,), (label, "child")}
        assert (decoy,) not in found
        assert set(store.list_namespaces(prefix=[label, "child"], limit=100)) == {(label, "child")}


# -- TTL (modelled on the TTL tests of LangGraph's persistent stores) --------------------------


async def test_ttl_expires_refreshes_and_sweeps(mimir_home: Path, fast_embedder: Any) -> None:
    ttl_s = 2.4
    store = make_store(mimir_home, fast_embedder, ttl={"default_ttl": ttl_s / 60})
    assert store.supports_ttl
    store.put(("ttl",), "long", {"v": 2}, ttl=10)
    store.put(("ttl",), "forever", {"v": 3}, ttl=None)
    written = time.monotonic()
    store.put(("ttl",), "default", {"v": 1})

    def wait_until(t: float) -> None:
        time.sleep(max(0.0, t - time.monotonic()))

    wait_until(written + ttl_s * 0.6)
    read = time.monotonic()
    assert store.get(("ttl",), "default") is not None  # a read refreshes it...
    wait_until(written + ttl_s * 1.15)  # past the first expiry
    assert store.get(("ttl",), "default", refresh_ttl=False) is not None  # ...from the read on
    wait_until(read + ttl_s * 1.2)
    assert store.get(("ttl",), "default") is None  # expired: never returned
    assert {i.key for i in store.search(("ttl",))} == {"long", "forever"}
    assert {i.key for i in store.search(("ttl",), query="v")} == {"long", "forever"}
    assert store.sweep_ttl() == 1
    assert store.sweep_ttl() == 0
    assert store.get(("ttl",), "long").value == {"v": 2}  # type: ignore[union-attr]


async def test_expired_namespaces_are_not_listed(mimir_home: Path, fast_embedder: Any) -> None:
    store = make_store(mimir_home, fast_embedder)
    store.put(("gone",), "k", {"v": 1}, ttl=0.005)  # 0.3 s
    store.put(("kept",), "k", {"v": 1})
    time.sleep(0.5)
    assert store.list_namespaces() == [("kept",)]


# -- one store: persistence, other instances, LangGraph runtimes -------------------------------


async def test_items_persist_for_another_instance(mimir_home: Path, fast_embedder: Any) -> None:
    first = make_store(mimir_home, fast_embedder)
    first.put(("memories", "u1"), "theme", {"text": "prefers dark mode in every editor"})
    second = make_store(mimir_home, fast_embedder)
    hits = second.search(("memories",), query="which colour scheme does the user like?")
    assert [h.key for h in hits] == ["theme"] and hits[0].namespace == ("memories", "u1")


async def test_values_are_redacted_before_storage(store: MimirStore) -> None:
    store.put(("cfg",), "db", {"host": "db.internal", "password": "hunter2-very-secret"})
    item = store.get(("cfg",), "db")
    assert item is not None and item.value["host"] == "db.internal"
    assert "hunter2" not in str(item.value)
    assert store.search(("cfg",), query="hunter2-very-secret")[0].score is not None


async def test_graph_nodes_use_the_store(store: MimirStore) -> None:
    from typing import TypedDict

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime

    class State(TypedDict, total=False):
        text: str
        found: list[str]

    def remember(state: State, runtime: Runtime) -> dict[str, Any]:
        assert runtime.store is not None
        runtime.store.put(("memories", "u1"), "fact", {"text": state["text"]})
        return {}

    def recall(state: State, runtime: Runtime) -> dict[str, Any]:
        assert runtime.store is not None
        hits = runtime.store.search(("memories",), query="what does the user eat?")
        return {"found": [h.value["text"] for h in hits]}

    g = StateGraph(State)
    g.add_node("remember", remember)
    g.add_node("recall", recall)
    g.add_edge(START, "remember")
    g.add_edge("remember", "recall")
    g.add_edge("recall", END)
    app = g.compile(checkpointer=InMemorySaver(), store=store)
    out = app.invoke({"text": "the user is vegetarian"}, {"configurable": {"thread_id": "t"}})
    assert out["found"] == ["the user is vegetarian"]
    out = await app.ainvoke({"text": "the user is vegan"}, {"configurable": {"thread_id": "t2"}})
    assert out["found"] == ["the user is vegan"]


async def test_create_agent_tools_use_the_store(store: MimirStore) -> None:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage

    class ScriptedModel(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    @tool
    def save_memory(text: str, runtime: ToolRuntime) -> str:
        """Save a memory about the user."""
        assert runtime.store is not None
        runtime.store.put(("memories", "u1"), runtime.tool_call_id or "k", {"text": text})
        return "saved"

    @tool
    def search_memory(query: str, runtime: ToolRuntime) -> str:
        """Search memories about the user."""
        assert runtime.store is not None
        return "; ".join(h.value["text"] for h in runtime.store.search(("memories",), query=query))

    model = ScriptedModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[{"name": "save_memory", "args": {"text": "likes hiking"}, "id": "c1"}],
            ),
            AIMessage(
                "", tool_calls=[{"name": "search_memory", "args": {"query": "hobbies"}, "id": "c2"}]
            ),
            AIMessage("You like hiking."),
        ]
    )
    agent = create_agent(model, tools=[save_memory, search_memory], store=store)
    out = agent.invoke({"messages": [{"role": "user", "content": "remember I like hiking"}]})
    tool_outputs = [m.content for m in out["messages"] if m.type == "tool"]
    assert tool_outputs == ["saved", "likes hiking"]
    assert store.get(("memories", "u1"), "c1").value == {"text": "likes hiking"}  # type: ignore[union-attr]
