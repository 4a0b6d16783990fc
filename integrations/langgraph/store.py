"""``MimirStore``: a LangGraph ``BaseStore`` on the Mimir LanceDB store
(:mod:`mimir_core.hosting.kv`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from mimir_core.errors import InvalidInputError
from mimir_core.extras import requires_extra
from mimir_core.hosting.agent_run import open_mimir as open_mimir  # the adapters' one opener
from mimir_core.hosting.kv import KVItem, KVPut, KVStore, document_text

with requires_extra("mimir_integrations.langgraph", "langgraph"):
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        get_text_at_path,
        tokenize_path,
        validate_op_namespace,
    )


class MimirStore(BaseStore):
    """LangGraph long-term memory on Mimir: namespaced documents in the shared LanceDB store.

    ``search(query=...)`` is Mimir's hybrid search (its offline embedder plus exact terms);
    ``index={"fields": [...]}`` picks the JSON paths a document is found by (default: all of it),
    ``put(..., index=False)`` stores without indexing. ``ttl={"default_ttl": minutes,
    "refresh_on_read": True, "sweep_interval_minutes": n}`` expires documents; expired ones are
    never returned. Values are redacted of secrets before they are stored.
    """

    supports_ttl: bool = True

    def __init__(
        self,
        mimir: Any = None,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        self.mimir = open_mimir(mimir)
        config: dict[str, Any] = dict(index or {})
        if config.get("embed") is not None:
            raise InvalidInputError(
                "index.embed", "Mimir embeds with its own offline model; leave 'embed' out"
            )
        self.ttl_config = ttl
        ttl = ttl or {}
        self.kv = KVStore(  # BaseStore.put applies the default TTL itself (None = never)
            self.mimir,
            refresh_on_read=ttl.get("refresh_on_read", True),
            sweep_interval_minutes=ttl.get("sweep_interval_minutes"),
        )
        self._fields = [(p, tokenize_path(p)) for p in (config.get("fields") or ["$"])]
        self.index_config = config or None

    # -- the two abstract methods ----------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ops in order; consecutive writes are applied together (last write of a key wins)."""
        results: list[Result] = []
        puts: list[KVPut] = []
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, PutOp):
                puts.append(self._put(op))
                results.append(None)
                continue
            self._flush(puts)
            results.append(self._read(op))
        self._flush(puts)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (the core is synchronous)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, list(ops))

    def sweep_ttl(self) -> int:
        """Delete expired items now; returns how many."""
        return self.kv.sweep_expired()

    # -- translation -----------------------------------------------------------------------------

    def _flush(self, puts: list[KVPut]) -> None:
        if puts:
            self.kv.put_many(puts)
            puts.clear()

    def _put(self, op: PutOp) -> KVPut:
        if op.value is None:
            return KVPut(op.namespace, op.key, None)
        texts: list[str] | None
        if op.index is False:
            texts = []
        else:
            fields = self._fields if op.index is None else [(p, tokenize_path(p)) for p in op.index]
            texts = []
            for path, tokens in fields:
                if path == "$":
                    texts.append(document_text(op.value))
                else:
                    texts.extend(get_text_at_path(op.value, tokens))
        return KVPut(op.namespace, op.key, op.value, texts, op.ttl)

    def _read(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            found = self.kv.get_many([(op.namespace, op.key)], refresh_ttl=op.refresh_ttl)[0]
            return None if found is None else _item(found)
        if isinstance(op, SearchOp):
            hits = self.kv.search(
                op.namespace_prefix,
                query=op.query,
                filter=op.filter,
                limit=op.limit,
                offset=op.offset,
                refresh_ttl=op.refresh_ttl,
            )
            return [_search_item(h) for h in hits]
        if isinstance(op, ListNamespacesOp):
            prefix = suffix = None
            for cond in op.match_conditions or ():
                if cond.match_type == "prefix":
                    prefix = cond.path
                elif cond.match_type == "suffix":
                    suffix = cond.path
                else:
                    raise InvalidInputError("match_type", f"unknown: {cond.match_type!r}")
            return self.kv.list_namespaces(
                prefix=prefix,
                suffix=suffix,
                max_depth=op.max_depth,
                limit=op.limit,
                offset=op.offset,
            )
        raise InvalidInputError("op", f"unknown store operation {type(op).__name__}")


_ITEM_FIELDS = ("namespace", "key", "value", "created_at", "updated_at")


def _item(found: KVItem) -> Item:
    return Item(**{f: getattr(found, f) for f in _ITEM_FIELDS})


def _search_item(found: KVItem) -> SearchItem:
    return SearchItem(**{f: getattr(found, f) for f in _ITEM_FIELDS}, score=found.score)
