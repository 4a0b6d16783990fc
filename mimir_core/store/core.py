"""The LanceDB store: the only module that imports lancedb.

One store holds every table (experiences, lessons, audit, meta) and is shared by every process
and adapter. Rules it keeps:

* Readers always see the latest commit (``read_consistency_interval=0``).
* Writes that must not duplicate (insert-if-absent by idempotency key) hold an inter-process file
  lock and re-read the latest version inside it: LanceDB's ``merge_insert`` alone duplicates
  under a race.
* Small appends fragment a table and slow every query, so after writes the store compacts
  once fragments pile up, cleans old versions, and builds a vector index once a table is large
  enough for exact search to be slow. A write only asks for that upkeep; it runs on the store's
  upkeep thread (:mod:`.upkeep`), off the writer's path.
* Threads of one process writing experiences at the same moment share one commit
  (:meth:`Store.insert_grouped`, :mod:`.group_commit`); every write returns once committed, so
  every reader, in any process, sees it then.
* The schema is versioned; a store written by a newer Mimir is refused, an older one migrated.
  The embedding model is recorded, and opening with another model is refused.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager, contextmanager, suppress
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from ..errors import EmbedderMismatchError, SchemaVersionError, StoreError
from ..store import upkeep as _upkeep
from ..text import context_text, fts_groups, fts_text
from ..types import Experience
from . import compaction
from .engine_log import quiet_lost_commits
from .filters import Filter
from .group_commit import GroupCommit
from .locking import FileLock
from .native_memory import release_free_memory
from .sql import compile_where
from .sql import sql_in as sql_in
from .sql import sql_str as sql_str
from .table_scan import is_error
from .upkeep import Upkeep

quiet_lost_commits()  # before this module first loads the engine

Row = dict[str, Any]
#: What a read or write selects: a typed filter, or ``None`` for every row (a raw SQL string
#: only from tests and benchmarks; see :func:`~mimir_core.store.sql.compile_where`).
Where = Filter | str | None

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

log = logging.getLogger("mimir.store")

SCHEMA_VERSION = 3
EXPERIENCES = "experiences"
LESSONS = "lessons"
AUDIT = "audit"
META = "meta"
#: Namespaced key/value documents (the LangGraph store; :mod:`mimir_core.hosting.kv`). Schema 2.
KV = "kv"
#: Every table the store owns (compaction), and those holding embeddings (reindex).
TABLES = (EXPERIENCES, LESSONS, AUDIT, META, KV)
EMBEDDED_TABLES = (EXPERIENCES, LESSONS, KV)

#: Compact once a table has this many small fragments (each append makes one).
COMPACT_FRAGMENTS = 24
#: Compaction merges fragments of fewer rows than this into fragments of up to this many; larger
#: ones are left as they are, so a row is rewritten a few times over its life, not once per
#: upkeep. A 1M-row table keeps ~8 of them (each fragment adds ~0.03 ms to a search).
FRAGMENT_ROWS = 128 * 1024
#: Fold new rows into the indexes once this many are outside them, whatever the fragment count
#: (one bulk write can add thousands): a row outside the full-text index is scanned on every
#: search, ~7 us a row (20k such rows made a recall ~150 ms).
UNINDEXED_ROWS = 1_000
#: Build an approximate vector index at this many rows; below it exact search is fast enough
#: (a flat LanceDB scan costs ~2.5 ms per 1k rows, so 10k rows is already ~25 ms on 2 cores).
INDEX_ROWS = 10_000
#: Rows per IVF partition of the vector index. LanceDB's ``optimize`` splits and merges partitions
#: towards this size as the table grows (it ignores the partition count given at build time and
#: defaults to ~8k rows: 7 partitions at 100k, 116 at 1M, so 40 probes scanned all of them at
#: 100k and a third of the table at 1M).
INDEX_PARTITION_ROWS = 1000
#: IVF partitions probed per query: 3% of them (:data:`PROBE_SHARE`), and at least
#: :data:`MIN_PROBES`. Measured on 100k real MiniLM task vectors (IVF_SQ, 100 partitions): the
#: share of the exact top 10 found by a search for 24 rows in its first 10 and in all 24 (a
#: recall asks for 24 and keeps the best 20 that pass its filter), and the search's p50. 12
#: probes: 0.975 / 0.984 / 2.7 ms; 20 probes: 0.983 / 0.992 / 3.7 ms; 40 probes: 0.989 / 0.998 /
#: 5.3 ms. With 30 probes of 1,000 partitions (a 1M store's count, each partition then spanning
#: more of the space than at 1M): 0.982 / 0.991. In a whole recall at 100k, 12 probes saved only
#: ~0.25 ms p50 of ~11 (the rest is the query's fixed cost).
MIN_PROBES = 20
PROBE_SHARE = 0.03
#: The vector index: IVF with 8-bit scalar quantization. Its codes give a row's cosine within
#: ~0.003, so there is no re-rank pass and no vector is read back: the 1-bit IVF_RQ index of
#: stores made before needed LanceDB's re-rank of 3x the rows, which read each one's vector again
#: (~2.3 of the ~6 ms a 100k-row search took). Upkeep rebuilds an older index as this one.
VECTOR_INDEX = "IVF_SQ"
#: Candidates LanceDB re-ranks after the scan of an older IVF_RQ index: at least this many, and
#: at least twice the limit (on 30k real MiniLM task vectors, 3x a limit of 24 finds 0.9993 of the
#: exact top 10; no re-rank: 0.80).
REFINE_ROWS = 64
#: Key columns of the experiences table given a BTREE index at ``INDEX_ROWS`` rows and up.
KEY_COLUMNS = ("id", "idem_key")
#: The same for the other tables whose writes look rows up by key.
TABLE_KEYS = {EXPERIENCES: KEY_COLUMNS, KV: ("id",)}
#: Tables searched with :meth:`Store._filtered` (post-filter first) and the vector index knobs.
SEARCHED = frozenset({EXPERIENCES, LESSONS})
#: Lance file format of the tables Mimir creates. Format 2.2 stores a column holding one value
#: throughout a page (one embedder, one source, one project) as a constant, and reading rows back
#: from such a column costs ~1.5 ms per column at 1M rows (0.2 ms in 2.1), on every search.
DATA_STORAGE_VERSION = "2.1"
#: Tries of a compaction that concurrent writes keep preempting.
OPTIMIZE_ATTEMPTS = 3
#: The vector index is trained again (new centroids) once its table has grown this many times
#: since it was trained: LanceDB puts new rows in the old partitions, splitting only the largest.
RETRAIN_GROWTH = 2.0
#: Meta key of the row count a table's vector index was trained on.
TRAINED_KEY = "vector_index_rows:{}"
#: Capacity of the LanceDB caches of an open store (one session for all of its dataset objects).
#: LanceDB's defaults are 6 GB of index cache and 1 GB of metadata cache, per dataset object
#: opened without a session: the metadata cache kept the manifest of every version a
#: long-lived process wrote, and a process writing one by one grew by ~60 MB per 1k writes.
#: The index cache holds the index pages searches read, and each index fold writes new index
#: files while the old ones' pages stay cached until evicted. A 1M-row store's vector index is
#: ~400 MB: at this cap its searches read some pages again from the page cache (not measured
#: at 1M yet; raise it for a large store that must stay fast).
INDEX_CACHE_BYTES = 256 * 1024 * 1024
#: Reads need only the latest version's metadata (manifest, the live files' footers: well under
#: 1 MB per table even at 1M rows, in fragments of :data:`FRAGMENT_ROWS`); what fills this cache
#: is the ~45 KB each single write's new version adds, never read again. At 32 MB (two sessions:
#: LanceDB's and Lance's) a process writing one by one held ~60 MB more at 4k writes (469 vs
#: 406 MB), and recall at 30k rows was no faster (p50 10-14 ms at both caps, noisy machine).
METADATA_CACHE_BYTES = 4 * 1024 * 1024
#: Versions older than this are removed after compaction (readers always use the latest; a
#: read started on a version this old while a compaction replaced its files would fail). It was
#: 5 minutes, and 10k single writes then held ~3.4 GB of old index and data copies on disk for
#: a 41 MB store; at 10 s, a process writing one by one still held each compaction's old
#: copies for 10 s, and 3k single writes peaked at several times the settled size. Every read
#: opens the latest version first (:meth:`Store._dataset`) and takes milliseconds; only a row
#: of an older Mimir without its document is read again at the version it was found in, and
#: is left out if that version is gone (:meth:`Store.expand_docs`).
CLEANUP_AFTER = timedelta(seconds=1)
#: Rows outside the indexes that an upkeep merging small fragments folds in (a row outside the
#: indexes costs a search ~7 us of full-text scan and a flat vector comparison).
FOLD_ROWS = 256
#: Fragment sizes small fragments are merged up to by an upkeep (:meth:`Store._compact_tail`).
TAIL_TIERS = (1024, 8192, 65536)


_NULL_TEST = re.compile(r"\s*([A-Za-z_]\w*) IS NULL\s*")


def null_columns(where: str) -> list[str] | None:
    """The columns of a where clause made of ``<column> IS NULL`` tests joined by ``AND`` only,
    else ``None``."""
    columns: list[str] = []
    for clause in where.split(" AND "):
        test = _NULL_TEST.fullmatch(clause)
        if test is None:
            return None
        columns.append(test.group(1))
    return columns


def _grouped_query(text: str, column: str) -> Any:
    """The full-text query of ``text`` over ``column``: any of :func:`~mimir_core.text.fts_groups`
    with all its terms (``None`` when there is nothing to search for)."""
    from lance.query import BooleanQuery, FullTextOperator, MatchQuery, Occur

    groups = [MatchQuery(g, column, operator=FullTextOperator.AND) for g in fts_groups(text)]
    if len(groups) < 2:
        return groups[0] if groups else None
    return BooleanQuery([(Occur.SHOULD, g) for g in groups])


def arrow_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows of an Arrow table as dicts, vector columns (fixed-size lists without nulls) as
    float32 numpy rows: views into one matrix per column.

    ``to_pylist`` would make a Python float object per component, ~12 KB per 384-d vector
    instead of 1.5 KB: a full consolidation of 100k experiences peaked at 4 GB that way.
    """
    import pyarrow as pa

    vectors = [
        f.name
        for f in table.schema
        if pa.types.is_fixed_size_list(f.type) and table.column(f.name).null_count == 0
    ]
    if not table.num_rows or not vectors:
        return list(table.to_pylist())
    rows: list[dict[str, Any]] = table.drop_columns(vectors).to_pylist()
    for col in vectors:
        flat = table.column(col).combine_chunks().flatten().to_numpy(zero_copy_only=False)
        for row, vec in zip(rows, flat.reshape(len(rows), -1), strict=True):
            row[col] = vec
    return rows


class VectorIndex(NamedTuple):
    """A table's vector index at one version: its type (``None`` without one), the rows it
    holds, and whether it holds every fragment of that version."""

    kind: str | None
    rows: int
    whole: bool


def probes(indexed_rows: int) -> int:
    """IVF partitions to probe in a vector index over ``indexed_rows`` rows: :data:`PROBE_SHARE`
    of its partitions (~one per :data:`INDEX_PARTITION_ROWS` rows), at least :data:`MIN_PROBES`."""
    return max(MIN_PROBES, math.ceil(PROBE_SHARE * indexed_rows / INDEX_PARTITION_ROWS))


def _vector_index_description(ds: Any) -> Any:
    """pylance's description of the dataset's index on ``vector`` (``None`` without one)."""
    return next((i for i in ds.describe_indices() if list(i.field_names) == ["vector"]), None)


def _schemas(dim: int) -> dict[str, pa.Schema]:
    import pyarrow as pa

    vec = pa.list_(pa.float32(), dim)
    return {
        EXPERIENCES: pa.schema(
            [
                pa.field("id", pa.string(), nullable=False),
                pa.field("idem_key", pa.string()),
                pa.field("task", pa.string()),
                pa.field("action", pa.string()),
                pa.field("outcome", pa.string()),
                pa.field("score", pa.float32()),
                pa.field("reason", pa.string()),
                pa.field("context", pa.string()),
                pa.field("scope", pa.string()),
                pa.field("source", pa.string()),
                pa.field("session_id", pa.string()),
                pa.field("thread_id", pa.string()),
                pa.field("recalled_lesson_ids", pa.list_(pa.string())),
                pa.field("created_at", pa.float64()),
                pa.field("superseded_by", pa.string()),
                pa.field("embed_model", pa.string()),
                pa.field("text", pa.string()),
                pa.field("vector", vec),
                pa.field("action_vector", vec),
                pa.field(DOC, pa.string()),  # schema 3; last, where adding a column puts it
            ]
        ),
        LESSONS: pa.schema(
            [
                pa.field("id", pa.string(), nullable=False),
                pa.field("status", pa.string()),
                pa.field("scope", pa.string()),
                pa.field("kind", pa.string()),
                pa.field("trigger", pa.string()),
                pa.field("rule", pa.string()),
                pa.field("payload", pa.string()),
                pa.field("signature", pa.string()),
                pa.field("updated_at", pa.float64()),
                pa.field("text", pa.string()),
                pa.field("vector", vec),
            ]
        ),
        AUDIT: pa.schema(
            [
                pa.field("id", pa.string(), nullable=False),
                pa.field("ts", pa.float64()),
                pa.field("actor", pa.string()),
                pa.field("subject_id", pa.string()),
                pa.field("event", pa.string()),
                pa.field("detail", pa.string()),
            ]
        ),
        META: pa.schema([pa.field("key", pa.string()), pa.field("value", pa.string())]),
        KV: pa.schema(
            [
                pa.field("id", pa.string(), nullable=False),
                pa.field("namespace", pa.string()),  # labels joined by "." (labels have none)
                pa.field("depth", pa.int32()),
                pa.field("key", pa.string()),
                pa.field("value", pa.string()),  # JSON
                pa.field("created_at", pa.float64()),
                pa.field("updated_at", pa.float64()),
                pa.field("expires_at", pa.float64()),  # null: never expires
                pa.field("ttl_minutes", pa.float64()),
                pa.field("text", pa.string()),  # the indexed text, for full-text search
                pa.field("vectors", pa.list_(vec)),  # one per indexed field; null: not indexed
            ]
        ),
    }


def _add_kv_table(store: Store) -> None:
    """Schema 1 -> 2: the ``kv`` table of namespaced documents (and its full-text index)."""
    if KV not in store._table_names():
        store.create_table(KV, schema=_schemas(store.dim)[KV], exist_ok=True)
    store._ensure_fts(KV)


def _add_experience_docs(store: Store) -> None:
    """Schema 2 -> 3: each experience's :data:`DOC`, made from its columns (a column added to
    every fragment: the vectors and indexes stay as they are)."""
    import pyarrow as pa

    ds = store.lance_dataset(EXPERIENCES)
    if DOC in ds.schema.names:
        return

    def docs(batch: pa.RecordBatch) -> pa.RecordBatch:
        values = [json.dumps(r, ensure_ascii=False) for r in batch.to_pylist()]
        return pa.RecordBatch.from_arrays([pa.array(values, pa.string())], names=[DOC])

    ds.add_columns(docs, read_columns=DOC_FIELDS)
    store._datasets.pop(EXPERIENCES, None)


#: Migrations from version N to N+1: ``MIGRATIONS[N](store)``. Version 1 is the first schema.
MIGRATIONS: dict[int, Callable[[Store], None]] = {1: _add_kv_table, 2: _add_experience_docs}


def _float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def searchable_text(task: str, action: str, reason: str, context: dict[str, Any]) -> str:
    """An experience's searchable text: task, action, reason and the context's values (the
    ``text`` column holds it as :func:`~mimir_core.text.fts_text` gives it)."""
    return " \n".join(p for p in (task, action, reason, context_text(context)) if p)


def row_text(row: Row) -> str:
    """:func:`searchable_text` of an experience row (or document): ~4 us, where reading the
    ``text`` column with a search's rows costs ~20 us a row."""
    context = json.loads(row.get("context") or "{}")
    return searchable_text(row["task"], row["action"], row.get("reason") or "", context)


def experience_row(
    exp: Experience, vector: Sequence[float], action_vector: Sequence[float]
) -> dict[str, Any]:
    """The table row of an experience."""
    text = searchable_text(exp.task, exp.action, exp.reason, exp.context)
    row: dict[str, Any] = {
        "id": exp.id,
        "idem_key": exp.idempotency_key or exp.id,
        "task": exp.task,
        "action": exp.action,
        "outcome": exp.outcome,
        "score": _float32(exp.score),  # as the float32 column gives it back (and the doc too)
        "reason": exp.reason,
        "context": json.dumps(exp.context, ensure_ascii=False),
        "scope": exp.scope,
        "source": exp.source,
        "session_id": exp.session_id,
        "thread_id": exp.thread_id,
        "recalled_lesson_ids": list(exp.recalled_lesson_ids),
        "created_at": exp.created_at.timestamp(),
        "superseded_by": exp.superseded_by,
        "embed_model": exp.embed_model,
        "text": fts_text(text),
        "vector": list(vector),
        "action_vector": list(action_vector),
    }
    row[DOC] = json.dumps({k: row[k] for k in DOC_FIELDS}, ensure_ascii=False)
    return row


EXPERIENCE_COLUMNS = [
    "id",
    "idem_key",
    "task",
    "action",
    "outcome",
    "score",
    "reason",
    "context",
    "scope",
    "source",
    "session_id",
    "thread_id",
    "recalled_lesson_ids",
    "created_at",
    "superseded_by",
    "embed_model",
]
#: The experience as one JSON document: every column of :data:`EXPERIENCE_COLUMNS` but
#: ``superseded_by`` (the one that changes), written with the row. Searches read it instead of
#: those columns: LanceDB reads each column of a search's rows separately (~0.1-0.2 ms a column
#: for the ~24 rows of a recall), so one column instead of a dozen saves ~2 ms per recall.
DOC = "doc"
DOC_FIELDS = [c for c in EXPERIENCE_COLUMNS if c != "superseded_by"]


class ExperienceFields(TypedDict):
    """An experience row's fields as every reader needs them (see :func:`experience_fields`)."""

    id: str
    task: str
    action: str
    outcome: str
    score: float
    reason: str
    scope: str
    source: str
    session_id: str | None
    thread_id: str | None
    recalled_lesson_ids: list[str]
    created_at: float


def experience_fields(row: Mapping[str, Any]) -> ExperienceFields:
    """The one decoder of an experience row: the fields of a table row (or of its :data:`DOC`)
    as an experience holds them, with the score clamped and the defaults of columns older rows
    lack. :func:`row_experience` and consolidation's lighter
    :class:`~mimir_core.lessons.evidence.Exp` both build from it, so a column changes here only.

    It leaves out what costs and few readers need (the JSON context, and a datetime:
    ``created_at`` stays epoch seconds, as stored): consolidation decodes many thousand rows.
    """
    return {
        "id": row["id"],
        "task": row["task"],
        "action": row["action"],
        "outcome": row["outcome"],
        "score": min(max(float(row["score"]), 0.0), 1.0),
        "reason": row.get("reason") or "",
        "scope": row.get("scope") or "",
        "source": row.get("source") or "api",
        "session_id": row.get("session_id"),
        "thread_id": row.get("thread_id"),
        "recalled_lesson_ids": list(row.get("recalled_lesson_ids") or []),
        "created_at": float(row["created_at"]),
    }


def row_experience(row: dict[str, Any]) -> Experience:
    """The experience of a table row: :func:`experience_fields` and the columns only a full
    :class:`~mimir_core.types.Experience` holds."""
    fields: dict[str, Any] = dict(experience_fields(row))
    fields["created_at"] = datetime.fromtimestamp(fields["created_at"], tz=timezone.utc)
    key = row.get("idem_key")
    return Experience(
        **fields,
        context=json.loads(row.get("context") or "{}"),
        superseded_by=row.get("superseded_by"),
        embed_model=row.get("embed_model") or "",
        idempotency_key=None if key == row["id"] else key,
    )


class Store:
    """A Mimir store on LanceDB (a local directory or any URI LanceDB accepts)."""

    def __init__(
        self,
        uri: str,
        *,
        lock_path: Path,
        embed_model: str,
        dim: int,
        storage_options: dict[str, str] | None = None,
        check_embedder: bool = True,
    ) -> None:
        import lance
        import lancedb

        self.uri = uri
        self.dim = dim
        self.embed_model = embed_model
        self.lock = FileLock(lock_path)
        self.is_local = "://" not in uri
        #: The store's location, as :mod:`.upkeep` pauses it (every store object opened on it).
        self.key = os.path.realpath(uri) if self.is_local else uri
        if self.is_local:
            try:
                Path(uri).mkdir(parents=True, exist_ok=True, mode=0o700)
            except OSError as exc:
                raise StoreError(f"cannot create store directory {uri}: {exc}") from exc
        caps: dict[str, Any] = {
            "index_cache_size_bytes": INDEX_CACHE_BYTES,
            "metadata_cache_size_bytes": METADATA_CACHE_BYTES,
        }
        #: The caches of every dataset object this store opens (searches', upkeep's): one
        #: session, capped (see :data:`METADATA_CACHE_BYTES`).
        self.session = lance.Session(**caps)  # type: ignore[attr-defined]
        #: The same, for the tables opened through LanceDB (writes, searches).
        self.db_session = lancedb.Session(**caps)
        self.storage_options = storage_options or None
        try:
            self.db = lancedb.connect(
                uri,
                read_consistency_interval=timedelta(0),
                storage_options=self.storage_options,
                session=self.db_session,
            )
            self._tables: dict[str, Any] = {}
            self._selective: dict[str, bool] = {}
            self._datasets: dict[str, Any] = {}
            self._indexes: dict[str, tuple[Any, int, VectorIndex]] = {}
            self._generation = _upkeep.generation(self.key)
            self.upkeep = Upkeep(self.maybe_optimize, key=self.key)
            self._groups: dict[tuple[str, str], GroupCommit[list[str]]] = {}
            #: Compaction commits that lost to a concurrent commit (:mod:`.compaction`): tests,
            #: the bench and doctor read it.
            self.conflicts = 0
            #: Freed native memory handed back after upkeep (:mod:`.native_memory`).
            self.trims = 0
            self._open(check_embedder)
        except (StoreError, EmbedderMismatchError):
            raise
        except BaseException as exc:  # lancedb raises many kinds; callers get one clear error
            if not is_error(exc):
                raise
            detail = str(exc).split(", /")[0]  # lance appends the Rust source location
            raise StoreError(f"cannot open store at {uri}: {detail}{self._damage()}") from exc

    def _damage(self) -> str:
        """Which tables of a local store are damaged, and what to run (for an open error)."""
        if not self.is_local:
            return ""
        try:
            from .integrity import table_dirs, table_health

            # Rows are decoded in every table but the large one: an open error names the table
            # in a second or less; `mimir doctor` reads the experiences too.
            health = [
                table_health(p, scan=p.name != f"{EXPERIENCES}.lance") for p in table_dirs(self.uri)
            ]
            bad = [f"table {h.name} ({h.problems[0]})" for h in health if h.problems]
        except Exception:  # the error being reported matters more
            bad = []
        where = f"; damaged: {'; '.join(bad)}" if bad else ""
        return f"{where}; run `mimir doctor` to diagnose and `mimir doctor --repair` to repair"

    # -- opening, meta and migrations ---------------------------------------------------------

    def _open(self, check_embedder: bool) -> None:
        schemas = _schemas(self.dim)
        existing = set(self._table_names())
        if META in existing:
            meta = self.meta()
            stored = int(meta.get("schema_version", "0") or 0)
            if stored > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"store {self.uri} has schema version {stored}, newer than this Mimir "
                    f"({SCHEMA_VERSION}); upgrade mimir-lessons to open it"
                )
        if self._ready(existing):  # nothing to create or migrate: no lock (a read-only store)
            meta = self.meta()
            if check_embedder:
                self.check_embedder(meta)
            self._check_files()
            return
        # no upkeep of another store object here touches a table a backup replaces
        with self.paused(), self.lock.hold():
            self._restore_backups(existing)
            for name, schema in schemas.items():
                if name not in existing:
                    self.create_table(name, schema=schema, exist_ok=True)
            meta = self.meta()
            if "schema_version" not in meta:
                self.set_meta(
                    {
                        "schema_version": str(SCHEMA_VERSION),
                        "embed_model": self.embed_model,
                        "dim": str(self.dim),
                        "created_at": datetime.now(timezone.utc).isoformat(),
                    }
                )
                meta = self.meta()
            self._migrate(int(meta["schema_version"]))
            self._ensure_fts(EXPERIENCES)
            self._ensure_fts(LESSONS)
            self._ensure_fts(KV)
        if check_embedder:
            self.check_embedder(meta)
        self._check_files()

    def _ready(self, existing: set[str]) -> bool:
        """Whether every table, the current schema and the full-text indexes are there."""
        if any(n.endswith("__backup") for n in existing) or not set(TABLES) <= existing:
            return False
        if self.meta().get("schema_version") != str(SCHEMA_VERSION):
            return False
        return all(self._has_fts(name) for name in (EXPERIENCES, LESSONS, KV))

    def _has_fts(self, name: str) -> bool:
        return any(getattr(i, "columns", None) == ["text"] for i in self.table(name).list_indices())

    def _check_files(self) -> None:
        """Refuse a local table whose newest version names missing or truncated files: one
        clear error at open instead of a failure on some later read."""
        if not self.is_local:
            return
        from .integrity import first_problem

        for name in TABLES:
            ds = self._datasets[name] = self.lance_dataset(name)
            problem = first_problem(ds, Path(self.uri) / f"{name}.lance")
            if problem:
                raise StoreError(
                    f"table {name} of store {self.uri} is damaged: {problem}; run `mimir doctor` "
                    f"to diagnose and `mimir doctor --repair` to repair"
                )

    def check_embedder(self, meta: dict[str, str] | None = None) -> None:
        """Refuse a store whose vectors come from another model than the active embedder."""
        meta = meta or self.meta()
        model, dim = meta.get("embed_model", ""), int(meta.get("dim", "0") or 0)
        if model != self.embed_model or dim != self.dim:
            raise EmbedderMismatchError(
                f"store {self.uri} was embedded with {model} ({dim}-d) but the active embedder "
                f"is {self.embed_model} ({self.dim}-d); run `mimir reindex` to re-embed it, or "
                f"select the store's embedder"
            )

    def _migrate(self, version: int) -> None:
        while version < SCHEMA_VERSION:
            step = MIGRATIONS.get(version)
            if step is None:
                raise SchemaVersionError(f"no migration from schema version {version}")
            log.warning("migrating store %s from schema %d to %d", self.uri, version, version + 1)
            step(self)
            version += 1
            self.set_meta({"schema_version": str(version)})

    def _table_names(self) -> list[str]:
        result = self.db.list_tables()
        names = getattr(result, "tables", result)
        return list(names)

    def create_table(self, name: str, **kwargs: Any) -> Any:
        """``db.create_table`` in Mimir's file format (:data:`DATA_STORAGE_VERSION`)."""
        return self.db.create_table(name, data_storage_version=DATA_STORAGE_VERSION, **kwargs)

    def lance_dataset(self, name: str) -> Any:
        """The table ``name`` as a pylance dataset at its latest version, in the store's
        capped cache session (``to_lance()`` alone gave each dataset LanceDB's default one)."""
        return self.table(name).to_lance(session=self.session)

    def table(self, name: str) -> Any:
        """The open LanceDB table ``name``."""
        self._forget_replaced()
        tbl = self._tables.get(name)
        if tbl is None:
            tbl = self.db.open_table(name)
            self._tables[name] = tbl
        return tbl

    def _forget_replaced(self) -> None:
        """Drop the table objects opened before a table of this location may have been
        replaced (:func:`.upkeep.paused`): one of a dropped table is never used again."""
        generation = _upkeep.generation(self.key)
        if generation != self._generation:
            self._generation = generation
            self._tables.clear()
            self._datasets.clear()
            self._indexes.clear()

    def paused(self) -> AbstractContextManager[None]:
        """No upkeep of this process runs on this store's location inside this block (see
        :func:`.upkeep.paused`): around anything that drops, replaces or rolls back a table.
        Enter it before the write lock: a run in progress may be waiting for that lock."""
        return _upkeep.paused(self.key)

    def close(self) -> None:
        """Let pending upkeep finish (up to :data:`.upkeep.EXIT_WAIT` seconds), then end the
        upkeep thread. The store takes no more upkeep requests; its reads and writes still
        work (a closed :class:`~mimir_core.Mimir` opens a new store on its next call)."""
        self.upkeep.stop(_upkeep.EXIT_WAIT)

    def meta(self) -> dict[str, str]:
        """The store's key/value metadata (schema version, embedder, ...)."""
        if META not in self._tables and META not in self._table_names():
            return {}
        with self._read_errors(META):
            rows = self.table(META).search().select(["key", "value"]).limit(None).to_list()
        return {r["key"]: r["value"] for r in rows}

    def set_meta(self, values: dict[str, str]) -> None:
        """Set metadata keys (upsert)."""
        with self.lock.hold(), self._write_errors(META):
            rows = [{"key": k, "value": v} for k, v in values.items()]
            (
                self.table(META)
                .merge_insert("key")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(rows)
            )

    def _ensure_fts(self, name: str) -> None:
        from lancedb.index import FTS

        tbl = self.table(name)
        if self._has_fts(name):
            return
        tbl.create_index(
            "text",
            config=FTS(
                base_tokenizer="simple",
                language="English",
                stem=True,
                remove_stop_words=True,
                ascii_folding=True,
                lower_case=True,
                max_token_length=60,
            ),
            replace=True,
        )

    # -- writes --------------------------------------------------------------------------------

    @contextmanager
    def _write_errors(self, name: str) -> Iterator[None]:
        """A failed write (full disk, read-only store, damaged table) as one clear StoreError."""
        try:
            yield
        except StoreError:
            raise
        except BaseException as exc:
            if not is_error(exc):
                raise
            detail = str(exc).split(", /")[0]  # lance appends the Rust source location
            raise StoreError(
                f"cannot write table {name} of store {self.uri}: {type(exc).__name__}: {detail}"
            ) from exc

    @contextmanager
    def _read_errors(self, name: str) -> Iterator[None]:
        """A failed read (a damaged data file: an Arrow error, or a panic of the Rust reader)
        as one StoreError naming the table and what to run."""
        try:
            yield
        except StoreError:
            raise
        except BaseException as exc:
            if not is_error(exc):
                raise
            detail = str(exc).split(", /")[0].splitlines()[0] if str(exc) else ""
            raise StoreError(
                f"cannot read table {name} of store {self.uri}: {type(exc).__name__}: {detail}; "
                f"run `mimir doctor` to diagnose and `mimir doctor --repair` to repair"
            ) from exc

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the store's write lock."""
        with self.lock.hold():
            yield

    def insert_new(
        self,
        name: str,
        rows: list[dict[str, Any]],
        key: str = "idem_key",
        *,
        new_keys: AbstractSet[str] = frozenset(),
    ) -> list[str]:
        """Insert the rows whose ``key`` is not stored yet; returns the inserted rows' ids.

        Serialised by the file lock, and the existence check reads the latest version, so two
        processes inserting the same keys at once never duplicate. Keys in ``new_keys`` are
        ones the caller made just now at random (an experience recorded without an
        idempotency key gets a fresh uuid4): they cannot be stored yet, and skip the check
        (~3.5 ms of a single write at 1k rows).
        """
        if not rows:
            return []
        with self.lock.hold(), self._write_errors(name):
            tbl = self.table(name)
            present: set[str] = set()
            keys = [k for k in dict.fromkeys(r[key] for r in rows) if k not in new_keys]
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                found = tbl.search().where(sql_in(key, chunk)).select([key]).limit(None).to_list()
                present.update(r[key] for r in found)
            fresh: list[dict[str, Any]] = []
            for row in rows:
                if row[key] not in present:
                    present.add(row[key])
                    fresh.append(row)
            if fresh:
                tbl.add(fresh)
        if fresh:
            self.upkeep.request(name)
        return [r["id"] for r in fresh]

    def insert_grouped(
        self,
        name: str,
        rows: list[dict[str, Any]],
        key: str = "idem_key",
        *,
        new_keys: AbstractSet[str] = frozenset(),
    ) -> list[str]:
        """:meth:`insert_new`, in one commit with the rows other threads of this process insert
        at the same moment (see :mod:`.group_commit`); returns once these rows are committed.
        Of the ids inserted, returns those of ``rows``."""
        group = self._groups.get((name, key))
        if group is None:

            def commit(items: list[tuple[dict[str, Any], bool]]) -> list[str]:
                fresh = {row[key] for row, new in items if new}
                return self.insert_new(name, [row for row, _ in items], key, new_keys=fresh)

            def split(ids: list[str], items: Sequence[tuple[dict[str, Any], bool]]) -> list[str]:
                done = set(ids)
                return [row["id"] for row, _ in items if row["id"] in done]

            group = self._groups.setdefault((name, key), GroupCommit(commit, split))
        return group.submit([(row, row[key] in new_keys) for row in rows])

    def append(self, name: str, rows: list[dict[str, Any]]) -> None:
        """Append rows (no dedup needed: audit entries, ...)."""
        if rows:
            with self._write_errors(name):
                self.table(name).add(rows)
            self.upkeep.request(name)

    def upsert(self, name: str, rows: list[dict[str, Any]], on: str = "id") -> None:
        """Insert or replace rows by ``on`` (under the lock)."""
        if not rows:
            return
        with self.lock.hold(), self._write_errors(name):
            (
                self.table(name)
                .merge_insert(on)
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(rows)
            )
        self.upkeep.request(name)

    def update(self, name: str, where: Where, values: dict[str, Any]) -> None:
        """Update matching rows."""
        where = compile_where(where)
        with self.lock.hold(), self._write_errors(name):
            self.table(name).update(where=where, values=values)

    def delete(self, name: str, where: Where) -> None:
        """Delete matching rows (still present in old versions until :meth:`purge`)."""
        where = compile_where(where)
        with self.lock.hold(), self._write_errors(name):
            self.table(name).delete(where)

    # -- reads ---------------------------------------------------------------------------------

    def count(self, name: str, where: Where = None) -> int:
        """Number of rows (matching ``where``)."""
        where = compile_where(where)
        with self._read_errors(name):
            return int(self.table(name).count_rows(where))

    def select(
        self,
        name: str,
        where: Where,
        columns: Sequence[str],
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Rows matching ``where`` (all rows for ``None``)."""
        where = compile_where(where)
        with self._read_errors(name):
            query = self.table(name).search()
            if where:
                query = query.where(where)
            return list(query.select(list(columns)).limit(limit).to_list())

    def column(self, name: str, columns: Sequence[str], where: Where = None) -> pa.Table:
        """Whole columns as an Arrow table (for scans over every row)."""
        where = compile_where(where)
        with self._read_errors(name):
            query = self.table(name).search()
            if where:
                query = query.where(where)
            return query.select(list(columns)).limit(None).to_arrow()

    def vector_search(
        self,
        name: str,
        vector: npt.NDArray[np.float32],
        *,
        where: Where,
        limit: int,
        columns: Sequence[str],
        column: str = "vector",
    ) -> list[dict[str, Any]]:
        """Nearest rows by cosine distance (``_distance`` = 1 - cosine: exact, or within ~0.003
        when the table's vector index answers alone)."""
        where = compile_where(where)
        if name not in SEARCHED:
            with self._read_errors(name):
                q = self.table(name).search(vector, vector_column_name=column)
                q = q.distance_type("cosine").limit(limit).select([*columns, "_distance"])
                return list((q.where(where, prefilter=True) if where else q).to_list())

        def run(n: int, filt: str | None, prefilter: bool, extra: Sequence[str]) -> list[Row]:
            nearest: dict[str, Any] = {"column": column, "q": vector, "k": n, "metric": "cosine"}
            cols = list(dict.fromkeys([*columns, *extra, "_distance"]))
            return self._read(name, cols, filt, prefilter, nearest=nearest)

        return self._filtered(run, where, limit)

    def text_search(
        self,
        name: str,
        text: str,
        *,
        where: Where,
        limit: int,
        columns: Sequence[str],
    ) -> list[dict[str, Any]]:
        """Best full-text (BM25) matches; an empty list when the query has no searchable word."""
        where = compile_where(where)
        query_text = fts_text(text).strip()
        if not query_text:
            return []

        def run(n: int, filt: str | None, prefilter: bool, extra: Sequence[str]) -> list[Row]:
            cols = list(dict.fromkeys([*columns, *extra, "_score"]))
            return self._read(name, cols, filt, prefilter, fts=fts, limit=n)

        try:
            if name in SEARCHED:
                fts = _grouped_query(text, "text")  # read by ``run``
                return self._filtered(run, where, limit) if fts is not None else []
            q = self.table(name).search(query_text, query_type="fts", fts_columns="text")
            q = q.select([*columns, "_score"]).limit(limit)
            return list((q.where(where, prefilter=True) if where else q).to_list())
        except Exception as exc:  # a query of only operators or stop words
            log.debug("full-text search skipped for %r: %s", text, exc)
            return []

    def expand_docs(self, rows: list[Row]) -> list[Row]:
        """Experience rows read with :data:`DOC` and ``_rowid``, each given its document's
        fields (in place).

        A row without a document (written meanwhile by a Mimir older than schema 3) has those
        fields read from its columns, at the table version it was found in; one whose version
        has been cleaned up since is left out.
        """
        out: list[Row] = []
        for row in rows:
            doc = row.pop(DOC, None)
            if doc:
                try:
                    fields = json.loads(doc)
                    missing = [k for k in DOC_FIELDS if k not in fields]
                    if missing:
                        raise ValueError(f"no field {missing[0]!r}")
                    row.update(fields)
                except (ValueError, TypeError) as exc:
                    raise StoreError(
                        f"cannot read table {EXPERIENCES} of store {self.uri}: the document of "
                        f"row {row.get('id')!r} is garbled ({exc}); run `mimir doctor` to "
                        f"diagnose and `mimir doctor --repair` to repair"
                    ) from exc
            elif not self._read_doc_fields(row):
                continue
            out.append(row)
        return out

    def _read_doc_fields(self, row: Row) -> bool:
        try:
            ds = self._dataset(EXPERIENCES)
            if ds.version != row["_version"]:  # row ids are addresses within one version
                ds = ds.checkout_version(row["_version"])
            got = ds._take_rows([int(row["_rowid"])], columns=DOC_FIELDS).to_pylist()
        except Exception as exc:  # that version is gone (compacted and cleaned up)
            log.debug("row %s of version %s unreadable: %s", row["_rowid"], row["_version"], exc)
            return False
        row.update(got[0])
        return True

    def _dataset(self, name: str) -> Any:
        """The table as a pylance dataset at its latest version (checked on every call)."""
        self._forget_replaced()
        ds = self._datasets.get(name)
        try:
            if ds is not None and ds.latest_version != ds.version:
                ds = ds.checkout_version(ds.latest_version)
        except Exception:  # the table was dropped and made again (reindex): open it anew
            ds = None
        if ds is None:
            ds = self.lance_dataset(name)
        self._datasets[name] = ds
        return ds

    def _read(
        self,
        name: str,
        columns: list[str],
        where: str | None,
        prefilter: bool,
        *,
        nearest: dict[str, Any] | None = None,
        fts: Any = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """A search through pylance directly, for the hot read paths (recall, recommend).

        LanceDB's synchronous API hands each query to a background event loop several times
        (~5 ms of CPU per query, and far more wall time when the cores are busy); the same
        search through pylance returns the same rows and scores. Vector columns come back as
        float32 numpy rows (a Python list of 384 floats per row cost ~25 us to make and as much
        to turn back into an array).
        """
        import pyarrow as pa

        with self._read_errors(name):
            ds = self._dataset(name)
            halve = False
            if nearest is not None and nearest["column"] == "vector":  # the indexed column
                nearest, halve = self._indexed(name, ds, nearest)
            table = ds.to_table(
                columns=columns,
                filter=where,
                prefilter=prefilter,
                nearest=nearest,
                full_text_query=fts,
                limit=limit,
            )
        if halve:
            import pyarrow.compute as pc

            at = table.schema.get_field_index("_distance")
            table = table.set_column(at, "_distance", pc.multiply(table.column(at), 0.5))
        if "_rowid" in columns:  # row ids are addresses within this version (expand_docs)
            table = table.append_column("_version", pa.repeat(ds.version, table.num_rows))
        return arrow_rows(table)

    def _indexed(self, name: str, ds: Any, nearest: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """(``nearest`` set up for the table's vector index at the version ``ds`` reads, whether
        the distances found come on the 8-bit codes' scale and must be halved).

        On the cosine metric LanceDB gives the codes' distances as the squared distance of the
        two unit vectors (2 - 2 cos), but the exact 1 - cos of every row found when some rows
        are outside the index (it then computes the distances of all from their vectors)."""
        index = self._vector_index(name, ds)
        if index.kind is None:
            return nearest, False  # an exact scan
        nearest = {**nearest, "nprobes": probes(index.rows)}
        if index.kind == "IVF_RQ":  # an older store's 1-bit codes: LanceDB re-ranks (exact)
            nearest["refine_factor"] = max(2, -(-REFINE_ROWS // int(nearest["k"])))
            return nearest, False
        return nearest, index.whole

    def _filtered(
        self,
        run: Callable[[int, str | None, bool, Sequence[str]], list[Row]],
        where: str | None,
        limit: int,
    ) -> list[Row]:
        """``run(n, where, prefilter, extra_columns)`` restricted to ``where``, post-filtered
        when that is exact.

        A LanceDB prefilter evaluates the filter over every row before searching: ~40 ms at 1M
        rows even when nearly every row passes (``superseded_by IS NULL``). So the search first
        runs post-filtered, over-fetching a little; if at least ``limit`` rows pass, they are the
        best ``limit`` rows the prefiltered search would return. Otherwise it runs again
        prefiltered; a where clause that lost rows that way (a selective filter, not just a small
        table) goes straight to the prefilter next time. A where clause of ``IS NULL`` tests
        only (the default: live experiences) is post-filtered here, on the columns it names:
        LanceDB's own post-filter adds ~0.6 ms to every search. When that search returned fewer
        rows than asked, it ran out of matches (a rare identifier): the rows that pass are then
        the whole answer, and the prefilter is not run.
        """
        if not where:
            return run(limit, None, False, ())
        if self._selective.get(where):
            return run(limit, where, True, ())
        wanted = limit + max(4, limit // 10)
        nulls = null_columns(where)
        complete = False
        if nulls is None:
            rows = run(wanted, where, False, ())
        else:
            raw = run(wanted, None, False, nulls)
            rows = [r for r in raw if all(r[c] is None for c in nulls)]
            complete = len(raw) < wanted
        if len(rows) >= limit or complete:
            return rows[:limit]
        found = run(limit, where, True, ())
        if len(found) > len(rows):
            if len(self._selective) >= 512:
                self._selective.clear()
            self._selective[where] = True
        return found

    # -- upkeep --------------------------------------------------------------------------------

    def _has_vector_index(self, name: str) -> bool:
        """Read from the dataset's manifest (~0.01 ms; LanceDB's ``list_indices`` ~0.4 ms)."""
        return self._vector_index(name).kind is not None

    def _vector_index(self, name: str, ds: Any = None) -> VectorIndex:
        """The table's vector index at the version of ``ds`` (default: the latest), read from
        its manifest once per dataset object and version."""
        ds = ds if ds is not None else self._dataset(name)
        # A version's indexes never change: the description is read once per dataset object and
        # version (~0.2 ms a search otherwise). The version is checked too, because a write
        # through a dataset object (a migration's add_columns) moves that object on.
        version = ds.version
        cached = self._indexes.get(name)
        if cached is not None and cached[0] is ds and cached[1] == version:
            return cached[2]
        description = _vector_index_description(ds)
        if description is None:
            index = VectorIndex(None, 0, False)
        else:
            covered = set().union(*(s.fragment_ids for s in description.segments))
            whole = all(f.fragment_id in covered for f in ds.get_fragments())
            index = VectorIndex(
                str(description.index_type), int(description.num_rows_indexed), whole
            )
        self._indexes[name] = (ds, version, index)
        return index

    def fragments(self, name: str) -> int:
        """How many data fragments the table has (each small append adds one)."""
        stats = self.table(name).stats()
        frag = stats.get("fragment_stats", {}) if isinstance(stats, dict) else {}
        return int(frag.get("num_fragments", 0))

    def maybe_optimize(self, name: str, *, now: bool = False) -> None:
        """Compact when small fragments have piled up (or ``now``); index a table grown large.

        Small fragments piled up alone (single writes) are merged among themselves
        (:meth:`_compact_tail`), without touching the indexes: each index fold rewrote the
        vector and full-text indexes whole (~2x the table's vectors at 10k rows), once per 24
        single writes, and those copies were most of a store's disk until cleaned. New rows are
        folded into the indexes once :data:`FOLD_ROWS` of them are outside.

        Best effort: upkeep never fails a write that already committed. A step that a
        concurrent commit preempted past its retries, or any other failure, is logged and left
        for a later write.
        """
        try:
            if now:
                self.optimize(name)
                return
            ds = self.upkeep_dataset(name)  # not the one searches share: this runs on a thread
            fold, compact = self._needs_upkeep(name, ds)
            if fold:
                self.optimize(name, compact=compact, tail=True)
            elif compact:
                with self._write_errors(name):
                    self._retried(lambda: self._compact_tail(name))
                    self._cleanup(name, CLEANUP_AFTER)
            if (fold or compact) and release_free_memory():
                self.trims += 1
        except Exception as exc:
            log.warning("optimize of %s failed (will retry later): %s", name, exc)

    def _needs_upkeep(self, name: str, ds: Any) -> tuple[bool, bool]:
        """(fold the indexes, compact): small fragments piled up, rows outside the indexes, or
        a table grown large without its vector index (read from the manifest: ~0.05 ms)."""
        compact = len(ds.get_fragments()) >= COMPACT_FRAGMENTS
        indexes = ds.describe_indices()
        if not indexes:
            return False, compact
        rows = int(ds.count_rows())
        current = self._vector_index(name, ds).kind == VECTOR_INDEX
        if name in SEARCHED and rows >= INDEX_ROWS and not current:
            return True, compact  # none yet, or an older store's IVF_RQ
        outside = rows - min(int(i.num_rows_indexed) for i in indexes)
        return outside >= (min(FOLD_ROWS, UNINDEXED_ROWS) if compact else UNINDEXED_ROWS), compact

    def optimize(
        self,
        name: str,
        *,
        cleanup_older_than: timedelta = CLEANUP_AFTER,
        compact: bool = True,
        tail: bool = False,
    ) -> None:
        """Fold new rows into the indexes, keep the vector index one segment, compact small
        fragments (when ``compact``; ``tail``: only among themselves, see
        :meth:`_compact_tail`), clean old versions.

        Compaction merges only fragments of fewer than :data:`FRAGMENT_ROWS` rows (and those
        with many deleted rows): LanceDB's own ``optimize`` merges every fragment under 1M rows,
        so each upkeep rewrote the whole table once nothing blocked it (a 1M-row load wrote
        ~50 GB). Writers do not wait for the index steps (they run outside the write lock), so
        a write committed meanwhile may preempt one: that is tried again, the last time under
        the write lock (:meth:`_retried`). Compaction rewrites outside the lock and commits
        under it (:mod:`.compaction`)."""
        tbl = self.table(name)
        if name in SEARCHED and self._vector_index(name).kind != VECTOR_INDEX:
            rows = tbl.count_rows()
            if rows >= INDEX_ROWS:
                self.build_vector_index(name)
        if name in TABLE_KEYS:
            self._ensure_key_indexes(name)
        with self._write_errors(name):
            self._retried(lambda: self.upkeep_dataset(name).optimize.optimize_indices())
            if name in SEARCHED:
                self._retried(lambda: self._merge_vector_index(name))
            if compact:  # after the merge: LanceDB compacts no fragments two segments cover
                self._retried(lambda: self._compact_tail(name) if tail else self._compact(name))
            self._cleanup(name, cleanup_older_than)

    def _retried(self, step: Callable[[], Any]) -> Any:
        """``step()`` (an upkeep step that commits), tried again when a concurrent commit
        preempted it (each try starts from the latest version); the last try holds the write
        lock, so writers cannot preempt it.

        Why the lock at the end: a process writing one by one under load commits every few ms,
        and an index fold's commit, rebased over each new write in turn, ran out of LanceDB's
        retries ("Too many concurrent writers", after 30 s) now and then, leaving its index
        files behind. Such a starved try (it took LanceDB's 30 s) goes straight to the locked
        one. Lost tries are counted in :attr:`conflicts`."""
        for _ in range(OPTIMIZE_ATTEMPTS - 1):
            try:
                return step()
            except Exception as exc:
                if not compaction.lost(exc):
                    raise
                self.conflicts += 1
                log.info("upkeep step lost its commit (tried again): %s", exc)
                if compaction.starved(exc):
                    break
        with self.lock.hold():
            return step()

    def _cleanup(self, name: str, older_than: timedelta) -> None:
        """Remove versions older than ``older_than`` and the files only they used."""
        self._retried(lambda: self.upkeep_dataset(name).cleanup_old_versions(older_than=older_than))

    def _compact_tail(self, name: str) -> None:
        """Merge the table's small fragments among themselves, at the smallest size of
        :data:`TAIL_TIERS` that leaves at most half of :data:`COMPACT_FRAGMENTS` fragments: a
        row written alone is rewritten a few times as its fragment grows through the tiers,
        and the table's large fragments are never rewritten for a few new rows (at 10k rows,
        every 24 single writes rewrote all 10k)."""
        ds = self.upkeep_dataset(name)
        sizes = [int(f.count_rows()) for f in ds.get_fragments()]
        tiers = [t for t in TAIL_TIERS if t < FRAGMENT_ROWS] + [FRAGMENT_ROWS]
        target = FRAGMENT_ROWS
        for tier in tiers:
            large = sum(1 for n in sizes if n >= tier)
            small = sum(n for n in sizes if n < tier)
            if large + math.ceil(small / tier) <= COMPACT_FRAGMENTS // 2:
                target = tier
                break
        compaction.compact(self, name, target)

    def _compact(self, name: str) -> None:
        """Merge the table's fragments of fewer than :data:`FRAGMENT_ROWS` rows."""
        compaction.compact(self, name, FRAGMENT_ROWS)

    def upkeep_dataset(self, name: str) -> Any:
        """The table at its latest version as a dataset object of its own, for one upkeep step.

        Upkeep's steps borrow the object they run on mutably: run on the one searches share
        (:meth:`_dataset`), a search on another thread (an MCP server's tool call beside its
        upkeep thread) failed with "Already mutably borrowed"."""
        ds = self.lance_dataset(name)
        return ds.checkout_version(ds.latest_version)

    def _merge_vector_index(self, name: str) -> bool:
        """Make the vector index one segment again; ``False`` when it already was.

        LanceDB indexes the rows each upkeep adds as a new delta segment of the vector index,
        and does not compact fragments that different segments cover. So fragments and segments
        piled up, one per upkeep, and every search visited each segment (a search went from 1.6
        to 20 ms over 40 upkeeps of 1,000 rows; 10 segments cost ~5 ms, 10 fragments of one
        segment ~0.4). Merging keeps the partitions; once the table has grown
        :data:`RETRAIN_GROWTH` times since the index was trained, it is trained again instead,
        on partitions of :data:`INDEX_PARTITION_ROWS` (LanceDB would only split old ones)."""
        ds = self.upkeep_dataset(name)
        index = _vector_index_description(ds)
        if index is None:
            return False
        rows = int(ds.count_rows())
        trained = int(self.meta().get(TRAINED_KEY.format(name)) or rows)
        if rows >= RETRAIN_GROWTH * trained:
            ds.optimize.optimize_indices(index_names=[index.name], retrain=True)
            self.set_meta({TRAINED_KEY.format(name): str(rows)})
        elif len(index.segments) > 1:
            ds.optimize.optimize_indices(
                index_names=[index.name], num_indices_to_merge=len(index.segments)
            )
        else:
            return False
        return True

    def _ensure_key_indexes(self, name: str) -> None:
        """BTREE indexes on the lookup keys of a large table: every write checks its idempotency
        keys and reads its rows back by id, which without an index scans the whole column
        (a single ``record`` at 100k rows: ~77 ms, ~29 ms with the indexes)."""
        from lancedb.index import BTree

        tbl = self.table(name)
        have = {tuple(getattr(i, "columns", ())) for i in tbl.list_indices()}
        missing = [k for k in TABLE_KEYS[name] if (k,) not in have]
        if missing and tbl.count_rows() >= INDEX_ROWS:
            with self.lock.hold():
                for key in missing:
                    tbl.create_index(key, config=BTree(), replace=True)

    def build_vector_index(self, name: str) -> None:
        """Build the cosine :data:`VECTOR_INDEX` (replacing an older one)."""
        from lancedb.index import IvfSq

        with self.lock.hold():
            tbl = self.table(name)
            tbl.create_index(
                "vector",
                config=IvfSq(distance_type="cosine", target_partition_size=INDEX_PARTITION_ROWS),
                replace=True,
            )
            trained = int(tbl.count_rows())
        self.set_meta({TRAINED_KEY.format(name): str(trained)})

    def purge(self, name: str) -> None:
        """Rewrite fragments with deleted rows and drop every old version (privacy delete)."""
        import warnings

        # An upkeep step of this process running meanwhile could leave files holding the rows
        # (a compaction the delete preempts leaves its rewritten files for a later cleanup).
        with self.paused(), self.lock.hold(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # compact_files is "deprecated" but optimize() has
            tbl = self.table(name)  # no way to rewrite fragments with only a few deleted rows
            tbl.compact_files(materialize_deletions=True, materialize_deletions_threshold=0.0)
            tbl.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)

    def disk_bytes(self) -> int | None:
        """Bytes on disk for a local store, ``None`` for object storage."""
        if not self.is_local:
            return None
        total = 0
        for root, _dirs, files in os.walk(self.uri):
            for f in files:
                with suppress(OSError):
                    total += os.path.getsize(os.path.join(root, f))
        return total

    def lesson_columns(self) -> list[str]:
        """Every column of the lessons table except its vector."""
        return [f.name for f in _schemas(self.dim)[LESSONS] if f.name != "vector"]

    def arrow_table(
        self, name: str, rows: list[dict[str, Any]], parts: Sequence[pa.Table] = ()
    ) -> pa.Table:
        """``rows`` (then ``parts``, tables already made this way) as one Arrow table of the
        table's schema: compact, where a list of row dicts holds a Python float per component."""
        import pyarrow as pa

        schema = _schemas(self.dim)[name]
        return pa.concat_tables([pa.Table.from_pylist(rows, schema=schema), *parts])

    def replace_table(self, name: str, rows: list[dict[str, Any]] | pa.Table) -> None:
        """Replace a table's content and schema (reindex to a new embedder).

        The old content is kept in ``<name>__backup`` until the new table is complete; a store
        opened with a backup left over (a crash mid-way) restores it.
        """
        backup = f"{name}__backup"
        with self.paused(), self.lock.hold():
            old = self.table(name).to_arrow()
            # lancedb cannot create a table from an empty Arrow table: pass the schema instead
            if old.num_rows:
                self.create_table(backup, data=old, mode="overwrite")
            else:
                self.create_table(backup, schema=old.schema, mode="overwrite")
            self.db.drop_table(name)
            self._tables.pop(name, None)
            self._datasets.pop(name, None)
            tbl = self.create_table(name, schema=_schemas(self.dim)[name])
            for start in range(0, len(rows), 10_000):
                part = (
                    rows[start : start + 10_000]
                    if isinstance(rows, list)
                    else rows.slice(start, 10_000)
                )
                tbl.add(part)
            self._ensure_fts(name)
            self.db.drop_table(backup)

    def _restore_backups(self, existing: set[str]) -> None:
        for name in EMBEDDED_TABLES:
            backup = f"{name}__backup"
            if backup not in existing:
                continue
            log.warning("restoring %s from %s left by an interrupted reindex", name, backup)
            data = self.db.open_table(backup).to_arrow()
            if name in existing:
                self.db.drop_table(name)
            if data.num_rows:
                self.create_table(name, data=data)
            else:
                self.create_table(name, schema=data.schema)
            self.db.drop_table(backup)
            existing.add(name)
