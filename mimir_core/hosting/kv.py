"""Namespaced key/value documents with semantic search, on the one Mimir store.

This is the store behind the LangGraph ``BaseStore`` adapter, kept framework-free: documents live
in the ``kv`` table of the same LanceDB store as experiences and lessons, so every process that
opens the store sees them.

* A document is a JSON object under ``(namespace, key)``; a namespace is a tuple of non-empty
  labels without ``.``. Values pass the write chokepoint: secrets and ``<private>`` spans are
  redacted before anything is stored or embedded. Labels and keys are identifiers, stored and
  listed as given: one holding a secret (or a lone surrogate) is refused.
* Each document is indexed by one or more texts (its whole content by default, or the fields the
  caller picked), each embedded by Mimir's own embedder. Search is hybrid, as in recall: the best
  cosine similarity over the document's texts plus the coverage bonus of exactly matched
  identifiers and words (weights of :class:`~mimir_core.search.recall.RecallTuning`). Unlike recall
  there is no relevance floor: a store search ranks every matching document.
* Time to live: a document written with ``ttl_minutes`` expires that long after its last write
  (or read, when reads refresh). Expired documents are never returned and are deleted by
  :meth:`KVStore.sweep_expired`.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError, short
from ..redact.core import redact_identifier, sanitize, sanitize_obj, well_formed
from ..search.scoring import Terms, hybrid_score, text_scores
from ..store.core import KV
from ..store.filters import And, Eq, Filter, In, Not, Or, Range, StartsWith
from ..text import fts_text, unfts_text

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..memory import Mimir
    from ..store.core import Store

Namespace = tuple[str, ...]

#: Largest stored document (its JSON encoding, after redaction).
MAX_VALUE_BYTES = 1_000_000
#: Largest text embedded for one field (longer texts are capped, like experience fields).
MAX_TEXT = 4000
#: Candidates fetched from each of the vector and full-text searches (at least).
CANDIDATES = 50
#: Between the indexed texts of a document in its ``text`` column (one text per vector), so that
#: :func:`reembed_rows` can re-embed each text after a change of embedder.
TEXT_SEP = "\n\x1e\n"

_ROW_COLUMNS = [
    "id",
    "namespace",
    "key",
    "value",
    "created_at",
    "updated_at",
    "expires_at",
    "ttl_minutes",
]


@dataclass(frozen=True)
class KVItem:
    """A stored document; ``score`` is set by a search with a query (``None`` if unindexed)."""

    namespace: Namespace
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    score: float | None = None


@dataclass(frozen=True)
class KVPut:
    """One write: ``value=None`` deletes.

    ``texts`` are what the document is found by: ``None`` indexes its whole content (see
    :func:`document_text`), an empty sequence does not index it (it is still listed and
    filtered, with a ``None`` score in searches with a query).
    """

    namespace: Namespace
    key: str
    value: Mapping[str, Any] | None
    texts: Sequence[str] | None = None
    ttl_minutes: float | None = None


@dataclass
class _Candidate:
    row: dict[str, Any]
    similarity: float
    score: float = 0.0
    bm25: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


# -- namespaces ------------------------------------------------------------------------------


def validate_namespace(
    namespace: object, *, field_name: str = "namespace", allow_empty: bool = False
) -> Namespace:
    """The namespace as a tuple, or :class:`InvalidInputError` naming the bad label."""
    if isinstance(namespace, str) or not isinstance(namespace, (tuple, list)):
        raise InvalidInputError(
            field_name, f"must be a tuple of strings; got {short(namespace)}", namespace
        )
    labels = tuple(namespace)
    if not labels and not allow_empty:
        raise InvalidInputError(field_name, "must not be empty", namespace)
    for label in labels:
        if not isinstance(label, str):
            raise InvalidInputError(
                field_name, f"labels must be strings; got {short(label)} in {labels!r}", labels
            )
        if not label:
            raise InvalidInputError(field_name, f"labels must not be empty; got {labels!r}")
        if "." in label or "\x00" in label:
            raise InvalidInputError(
                field_name, f"label {label!r} must not contain '.' or NUL; got {labels!r}"
            )
        check_identifier(field_name, label, "a namespace label")
    return labels


def check_identifier(field_name: str, text: str, what: str) -> None:
    """Refuse a namespace label or key that UTF-8 cannot carry or that holds a secret: they are
    stored, listed and searched in clear, and redacting one would change which item it names."""
    if well_formed(text) != text:
        raise InvalidInputError(field_name, f"{what} must be valid Unicode (a lone surrogate)")
    shown = redact_identifier(text)  # a uuid4 hex label is an id, not a bare secret
    if shown != text:
        raise InvalidInputError(
            field_name,
            f"{what} looks like it holds a secret ({shown}); it would be stored in clear",
        )


def _ns_text(namespace: Namespace) -> str:
    return ".".join(namespace)


def _ns_tuple(text: str) -> Namespace:
    return tuple(text.split(".")) if text else ()


def _prefix_clause(prefix: Namespace) -> Filter | None:
    """The filter for "namespace starts with these labels" (segment-aligned, case-sensitive)."""
    if not prefix:
        return None
    text = _ns_text(prefix)
    return Or(Eq("namespace", text), StartsWith("namespace", text + "."))


def _matches(namespace: Namespace, path: Sequence[str], *, suffix: bool) -> bool:
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(reversed(namespace), reversed(path), strict=False)
        if suffix
        else zip(namespace, path, strict=False)
    )
    return all(p == "*" or n == p for n, p in pairs)


def _item_id(namespace: Namespace, key: str) -> str:
    raw = json.dumps([list(namespace), key], ensure_ascii=False)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:32]


# -- values and their text -------------------------------------------------------------------


def _json_default(value: object) -> object:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _clean_value(key: str, value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInputError("value", f"must be a dict; got {short(value)} for key {key!r}")
    try:
        plain = json.loads(json.dumps(dict(value), default=_json_default, allow_nan=True))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError("value", f"of key {key!r} is not JSON data: {exc}") from exc
    clean = sanitize_obj(plain)
    assert isinstance(clean, dict)
    return clean


def document_text(value: Mapping[str, Any], *, limit: int = MAX_TEXT) -> str:
    """A document as the text it is indexed by: one ``path: value`` line per leaf."""
    lines: list[str] = []

    def walk(node: Any, path: str, depth: int) -> None:
        if depth > 8 or len(lines) > 400:
            return
        if isinstance(node, Mapping):
            for k, v in node.items():
                walk(v, f"{path}.{k}" if path else str(k), depth + 1)
        elif isinstance(node, (list, tuple)):
            if node and all(not isinstance(v, (Mapping, list, tuple)) for v in node):
                lines.append(f"{path}: " + ", ".join(str(v) for v in node))
            else:
                for v in node:
                    walk(v, path, depth + 1)
        elif node is not None and node != "":
            lines.append(f"{path}: {node}" if path else str(node))

    walk(value, "", 0)
    text = "\n".join(lines)
    return text[:limit]


def indexed_texts(row: Mapping[str, Any]) -> list[str]:
    """The texts a stored document was embedded from, one per vector (``[]``: not indexed).

    A row written before the texts were separated (several vectors, no separator) gives its
    whole text once: re-embedded, it keeps one vector for everything it is found by.
    """
    vectors = row.get("vectors") or []
    if not vectors:
        return []
    text = unfts_text(str(row.get("text") or ""))
    parts = text.split(TEXT_SEP)
    return parts if len(parts) == len(vectors) else [text]


def reembed_rows(rows: Sequence[dict[str, Any]], embedder: Any, *, batch: int = 256) -> None:
    """Re-embed the indexed texts of ``kv`` rows in place (``Mimir.reindex``)."""
    todo = [(row, indexed_texts(row)) for row in rows]
    todo = [(row, texts) for row, texts in todo if texts]
    for start in range(0, len(todo), batch):
        chunk = todo[start : start + batch]
        flat = [t for _row, texts in chunk for t in texts]
        vectors = embedder.embed(flat)
        at = 0
        for row, texts in chunk:
            row["vectors"] = [list(map(float, v)) for v in vectors[at : at + len(texts)]]
            row["text"] = fts_text(TEXT_SEP.join(texts))
            at += len(texts)


# -- filters -----------------------------------------------------------------------------------


def _lookup(value: Mapping[str, Any], key: str) -> Any:
    if key in value:
        return value[key]
    node: Any = value
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _apply_operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if operator in ("$gt", "$gte", "$lt", "$lte"):
        a, b = _number(value), _number(operand)
        if a is None or b is None or math.isnan(a) or math.isnan(b):
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[operator]
    raise InvalidInputError("filter", f"unsupported operator {operator!r}")


def _compare(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_apply_operator(value, str(op), arg) for op, arg in wanted.items())
        if not isinstance(value, Mapping):
            return False
        return all(_compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(wanted)
            and all(_compare(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def matches_filter(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """Whether a document passes a filter: ``{"field": v}`` equality (dotted paths reach into
    nested objects) or operators ``$eq $ne $gt $gte $lt $lte``; all conditions must hold."""
    if not flt:
        return True
    return all(_compare(_lookup(value, str(k)), v) for k, v in flt.items())


# -- the store ---------------------------------------------------------------------------------


def _ts(value: float) -> datetime:
    return datetime.fromtimestamp(float(value), tz=timezone.utc)


def _check_ttl(ttl: object) -> float | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:
        raise InvalidInputError("ttl", f"must be a positive number of minutes; got {short(ttl)}")
    return float(ttl)


class KVStore:
    """Namespaced JSON documents with hybrid search and TTL, in the ``kv`` table of a Mimir store.

    >>> kv = KVStore(Mimir("/tmp/mimir-doc", embedder="hash"))          # doctest: +SKIP
    >>> kv.put_many([KVPut(("memories", "u1"), "k1", {"text": "prefers dark mode"})])
    >>> kv.search(("memories",), query="what theme does the user like")[0].key
    'k1'
    """

    def __init__(
        self,
        mimir: Mimir,
        *,
        default_ttl_minutes: float | None = None,
        refresh_on_read: bool = True,
        sweep_interval_minutes: float | None = None,
    ) -> None:
        self.mimir = mimir
        self.default_ttl_minutes = _check_ttl(default_ttl_minutes)
        self.refresh_on_read = bool(refresh_on_read)
        self.sweep_interval_minutes = sweep_interval_minutes
        self._last_sweep = time.monotonic()

    @property
    def store(self) -> Store:
        """The Mimir store (opened on first use)."""
        return self.mimir.store

    def _alive(self, now: float) -> Filter:
        return Or(Eq("expires_at", None), Range("expires_at", gt=now))

    # -- reads ---------------------------------------------------------------------------------

    def get_many(
        self, refs: Sequence[tuple[Namespace, str]], *, refresh_ttl: bool | None = None
    ) -> list[KVItem | None]:
        """The documents at ``(namespace, key)`` refs, ``None`` where there is none."""
        if not refs:
            return []
        now = time.time()
        ids = [_item_id(validate_namespace(ns), str(key)) for ns, key in refs]
        rows = self.store.select(KV, And(In("id", set(ids)), self._alive(now)), _ROW_COLUMNS)
        by_id = {r["id"]: r for r in rows}
        self._refresh(rows, refresh_ttl, now)
        return [self._item(by_id[i]) if i in by_id else None for i in ids]

    def get(self, namespace: Namespace, key: str) -> KVItem | None:
        """The document at ``(namespace, key)``, or ``None``."""
        return self.get_many([(namespace, key)])[0]

    def search(
        self,
        prefix: Namespace = (),
        *,
        query: str | None = None,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[KVItem]:
        """Documents under ``prefix`` that pass ``filter``.

        With a ``query`` they are ranked by hybrid relevance (unindexed documents last, with a
        ``None`` score); without one, most recently updated first.
        """
        prefix = validate_namespace(prefix, field_name="namespace_prefix", allow_empty=True)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidInputError("limit", f"must be a non-negative integer; got {short(limit)}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidInputError(
                "offset", f"must be a non-negative integer; got {short(offset)}"
            )
        if filter is not None and not isinstance(filter, Mapping):
            raise InvalidInputError("filter", f"must be a dict; got {short(filter)}")
        now = time.time()
        under = _prefix_clause(prefix)
        where = self._alive(now) if under is None else And(under, self._alive(now))
        if limit == 0:
            return []
        if query is not None and query.strip():
            items, rows = self._ranked(where, query, filter, offset + limit)
        else:
            items, rows = self._recent(where, filter, offset + limit)
        page = items[offset : offset + limit]
        keep = {(i.namespace, i.key) for i in page}
        self._refresh(
            [r for r in rows if (_ns_tuple(r["namespace"]), r["key"]) in keep], refresh_ttl, now
        )
        return page

    def _recent(
        self, where: Filter, flt: Mapping[str, Any] | None, wanted: int
    ) -> tuple[list[KVItem], list[dict[str, Any]]]:
        if flt:
            rows = [
                r
                for r in self.store.select(KV, where, _ROW_COLUMNS)
                if matches_filter(json.loads(r["value"]), flt)
            ]
        else:
            slim = self.store.select(KV, where, ["id", "namespace", "key", "updated_at"])
            slim.sort(key=lambda r: (-float(r["updated_at"]), r["namespace"], r["key"]))
            ids = [r["id"] for r in slim[:wanted]]
            rows = self.store.select(KV, In("id", ids), _ROW_COLUMNS) if ids else []
        rows.sort(key=lambda r: (-float(r["updated_at"]), r["namespace"], r["key"]))
        rows = rows[:wanted]
        return [self._item(r) for r in rows], rows

    def _ranked(
        self, where: Filter, query: str, flt: Mapping[str, Any] | None, wanted: int
    ) -> tuple[list[KVItem], list[dict[str, Any]]]:
        import numpy as np

        qvec = self.mimir.embedder.embed_one(query)
        tuning = self.mimir.kv_scoring
        cols = [*_ROW_COLUMNS, "text"]
        n = max(CANDIDATES, 2 * wanted)
        while True:
            found: dict[str, _Candidate] = {}
            vec_rows = self.store.vector_search(
                KV, qvec, where=where, limit=n, columns=cols, column="vectors"
            )
            for row in vec_rows:
                found[row["id"]] = _Candidate(row, 1.0 - float(row["_distance"]))
            for row in self.store.text_search(
                KV, query, where=where, limit=n, columns=[*cols, "vectors"]
            ):
                cand = found.get(row["id"])
                if cand is None and row.get("vectors"):
                    vecs = np.asarray(row["vectors"], dtype=np.float32)
                    cand = found[row["id"]] = _Candidate(row, float(np.max(vecs @ qvec)))
                if cand is not None:
                    cand.bm25 = float(row.get("_score") or 0.0)
            cands = [c for c in found.values() if matches_filter(json.loads(c.row["value"]), flt)]
            exhausted = len(vec_rows) < n
            if len(cands) >= wanted or exhausted:
                break
            n *= 4
        terms = Terms(query)
        text = text_scores({c.row["id"]: c.bm25 for c in cands})
        for cand in cands:
            idents, _words = terms.match(unfts_text(str(cand.row.get("text") or "")))
            relative = text.get(cand.row["id"], 0.0)
            cand.score = hybrid_score(cand.similarity, idents, terms, relative, tuning)
        cands.sort(key=lambda c: (-c.score, c.row["namespace"], c.row["key"]))
        items = [self._item(c.row, round(c.score, 6)) for c in cands]
        rows = [c.row for c in cands]
        if exhausted and len(items) < wanted:
            rest, rest_rows = self._recent(
                And(where, Eq("vectors", None)), flt, wanted - len(items)
            )
            items += rest
            rows += rest_rows
        return items, rows

    def list_namespaces(
        self,
        *,
        prefix: Sequence[str] | None = None,
        suffix: Sequence[str] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Namespace]:
        """Namespaces holding documents, sorted; ``"*"`` in a prefix or suffix matches any one
        label; ``max_depth`` truncates deeper namespaces (and deduplicates them)."""
        if max_depth is not None and (isinstance(max_depth, bool) or max_depth < 1):
            raise InvalidInputError("max_depth", f"must be a positive integer; got {max_depth!r}")
        now = time.time()
        clauses: list[Filter] = [self._alive(now)]
        if prefix:
            literal: list[str] = []
            for label in prefix:
                if label == "*":
                    break
                literal.append(label)
            if literal:
                lead = validate_namespace(tuple(literal), field_name="prefix")
                under = _prefix_clause(lead)
                if under is not None:
                    clauses.append(under)
        table = self.store.column(KV, ["namespace"], And(*clauses))
        names = {_ns_tuple(t) for t in table.column("namespace").to_pylist()}
        chosen = [
            ns
            for ns in names
            if (not prefix or _matches(ns, tuple(prefix), suffix=False))
            and (not suffix or _matches(ns, tuple(suffix), suffix=True))
        ]
        if max_depth is not None:
            chosen = list({ns[:max_depth] for ns in chosen})
        chosen.sort()
        return chosen[offset : offset + limit]

    # -- writes --------------------------------------------------------------------------------

    def put_many(self, puts: Sequence[KVPut]) -> None:
        """Apply writes in one go (the last write of a key wins); ``value=None`` deletes."""
        latest: dict[str, tuple[Namespace, KVPut]] = {}
        for put in puts:
            ns = validate_namespace(put.namespace)
            if not isinstance(put.key, str):
                raise InvalidInputError("key", f"must be a string; got {short(put.key)}")
            check_identifier("key", put.key, "a key")
            latest[_item_id(ns, put.key)] = (ns, put)
        if not latest:
            return
        now = time.time()
        rows: list[dict[str, Any]] = []
        texts_of: list[list[str]] = []
        deletes: list[str] = []
        for ident, (ns, put) in latest.items():
            if put.value is None:
                deletes.append(ident)
                continue
            value = _clean_value(put.key, put.value)
            encoded = json.dumps(value, ensure_ascii=False, allow_nan=True)
            if len(encoded.encode("utf-8")) > MAX_VALUE_BYTES:
                raise InvalidInputError(
                    "value", f"of key {put.key!r} is larger than {MAX_VALUE_BYTES} bytes"
                )
            if put.texts is None:
                texts = [document_text(value)]
            else:
                texts = [sanitize(str(t), limit=MAX_TEXT) for t in put.texts]
            texts_of.append([t for t in texts if t.strip()])
            ttl = _check_ttl(put.ttl_minutes) if put.ttl_minutes is not None else None
            ttl = ttl if ttl is not None else self.default_ttl_minutes
            rows.append(
                {
                    "id": ident,
                    "namespace": _ns_text(ns),
                    "depth": len(ns),
                    "key": put.key,
                    "value": encoded,
                    "created_at": now,
                    "updated_at": now,
                    "expires_at": now + ttl * 60.0 if ttl else None,
                    "ttl_minutes": ttl,
                    "text": "",
                    "vectors": None,
                }
            )
        self._embed(rows, texts_of)
        store = self.store
        with store.writing():
            if rows:
                existing = store.select(KV, In("id", [r["id"] for r in rows]), ["id", "created_at"])
                created = {r["id"]: r["created_at"] for r in existing}
                for row in rows:
                    row["created_at"] = created.get(row["id"], row["created_at"])
                # New keys are appended (~2.5 ms); only replaced ones take a merge (~8 ms).
                store.append(KV, [r for r in rows if r["id"] not in created])
                store.upsert(KV, [r for r in rows if r["id"] in created])
            if deletes:
                store.delete(KV, In("id", deletes))
        self._maybe_sweep()

    def _embed(self, rows: list[dict[str, Any]], texts_of: list[list[str]]) -> None:
        texts_of = [[t.replace("\x1e", " ") for t in texts] for texts in texts_of]
        flat = [t for texts in texts_of for t in texts]
        if not flat:
            return
        vectors: npt.NDArray[np.float32] = self.mimir.embedder.embed(flat)
        at = 0
        for row, texts in zip(rows, texts_of, strict=True):
            if texts:
                row["vectors"] = [list(map(float, v)) for v in vectors[at : at + len(texts)]]
                row["text"] = fts_text(TEXT_SEP.join(texts))
            at += len(texts)

    def put(
        self,
        namespace: Namespace,
        key: str,
        value: Mapping[str, Any],
        *,
        texts: Sequence[str] | None = None,
        ttl_minutes: float | None = None,
    ) -> None:
        """Store one document (see :class:`KVPut`)."""
        self.put_many([KVPut(namespace, key, value, texts, ttl_minutes)])

    def delete(self, namespace: Namespace, key: str) -> None:
        """Delete one document (no error if there is none)."""
        self.put_many([KVPut(namespace, key, None)])

    # -- time to live --------------------------------------------------------------------------

    def _refresh(self, rows: list[dict[str, Any]], refresh: bool | None, now: float) -> None:
        if not (self.refresh_on_read if refresh is None else refresh):
            return
        groups: dict[float, list[str]] = {}
        for row in rows:
            ttl = row.get("ttl_minutes")
            if not ttl:
                continue
            seconds = float(ttl) * 60.0
            # Refresh only once the expiry would move noticeably: a read is not a write.
            if now + seconds - float(row.get("expires_at") or 0.0) > max(1.0, seconds * 0.01):
                groups.setdefault(float(ttl), []).append(row["id"])
        for ttl, ids in groups.items():
            self.store.update(KV, In("id", ids), {"expires_at": now + ttl * 60.0})

    def sweep_expired(self) -> int:
        """Delete expired documents; returns how many."""
        self._last_sweep = time.monotonic()
        where = And(Not(Eq("expires_at", None)), Range("expires_at", le=time.time()))
        count = self.store.count(KV, where)
        if count:
            self.store.delete(KV, where)
        return count

    def _maybe_sweep(self) -> None:
        interval = self.sweep_interval_minutes
        if interval and time.monotonic() - self._last_sweep >= interval * 60.0:
            self.sweep_expired()

    # -- rows ----------------------------------------------------------------------------------

    @staticmethod
    def _item(row: dict[str, Any], score: float | None = None) -> KVItem:
        return KVItem(
            namespace=_ns_tuple(row["namespace"]),
            key=row["key"],
            value=json.loads(row["value"]),
            created_at=_ts(row["created_at"]),
            updated_at=_ts(row["updated_at"]),
            score=score,
        )
