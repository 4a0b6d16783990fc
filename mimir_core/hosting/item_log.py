"""A conversation's items in Mimir's store, for a framework whose sessions keep a list.

The OpenAI Agents SDK's ``Session`` (and any framework like it) reads, appends, pops and clears
one conversation's items. :class:`ItemLog` does that on the ``kv`` table, one document per
appended batch (keys in order, never embedded), so another process on the same store sees the
same conversation, and appending is one write whatever the conversation's length. It knows no
framework: items are plain JSON-ready dicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: The most batches one conversation is read with (far beyond any real one).
MAX_BATCHES = 1_000_000


class ItemLog:
    """The items of the conversation ``namespace`` (a tuple of strings) in ``mimir``'s store."""

    def __init__(self, mimir: Any, namespace: Sequence[str]) -> None:
        from .kv import KVStore

        self.namespace = tuple(namespace)
        self._kv = KVStore(mimir)

    def _batches(self) -> list[tuple[str, list[Any]]]:
        found = self._kv.search(self.namespace, limit=MAX_BATCHES)
        return sorted((i.key, list(i.value.get("items") or [])) for i in found)

    def items(self, limit: int | None = None) -> list[Any]:
        """Every item in order, or the last ``limit`` of them."""
        items = [item for _key, batch in self._batches() for item in batch]
        return items if limit is None else items[-limit:] if limit > 0 else []

    def append(self, items: Sequence[dict[str, Any]]) -> list[Any]:
        """Append ``items`` as one batch; the whole conversation after it."""
        batches = self._batches()
        nxt = int(batches[-1][0]) + 1 if batches else 0
        self._kv.put(self.namespace, f"{nxt:012d}", {"items": list(items)}, texts=[])
        return self.items()

    def pop(self) -> Any:
        """Remove and answer the last item (``None`` when there is none)."""
        batches = self._batches()
        while batches:
            key, batch = batches.pop()
            if batch:
                item = batch.pop()
                if batch:
                    self._kv.put(self.namespace, key, {"items": batch}, texts=[])
                else:
                    self._kv.delete(self.namespace, key)
                return item
            self._kv.delete(self.namespace, key)
        return None

    def clear(self) -> None:
        """Forget the whole conversation."""
        for key, _batch in self._batches():
            self._kv.delete(self.namespace, key)
