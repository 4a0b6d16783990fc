"""Backups: the whole store as versioned JSONL (``mimir export``) and back (``mimir import``).

Format version 1, UTF-8, one JSON object per line:

* line 1, the header: ``{"format": "mimir-export", "version": 1, "mimir": <package version>,
  "schema": <store schema version>, "embedder": {"name", "dim"}, "created_at", "with_vectors",
  "counts": {kind: n}}``;
* one line per record, ``"kind"`` saying which: ``experience`` (every field of
  :class:`~mimir_core.types.Experience`: id, idempotency key, timestamps, ``superseded_by``,
  ``recalled_lesson_ids``...), ``lesson`` (``"row"``: the stored row, whose ``payload`` is the
  signed lesson with its lifecycle state, evidence ids and signature), ``audit`` (one audit log
  entry) and ``kv`` (``"row"``: one namespaced document, ``"texts"``: what it is indexed by);
  ``--with-vectors`` adds the embeddings, otherwise import re-embeds;
* the last line, the trailer: ``{"format": "mimir-export-end", "counts": {...}, "sha256": ...}``,
  the hash of the record lines (the body), so a truncated or edited file is refused.

The consolidation watermark and other store metadata are derived state and are not exported (the
next consolidation of the importing store rescans). The signing key is never exported.

Import validates the whole file before writing anything (a bad line is an error naming its
number), then writes through the same chokepoint as every record (validation, redaction, caps)
and inserts only what is absent by id or idempotency key: importing twice adds nothing, and a run
that was interrupted is completed by running it again. A lesson keeps its signature only if it
verifies under the importing store's key; otherwise it is imported quarantined (never served),
unless ``resign=True`` re-signs it with that key (explicit trust in the file).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError

from ..errors import BackupError, InvalidInputError, MimirError
from ..store.core import (
    AUDIT,
    EXPERIENCE_COLUMNS,
    EXPERIENCES,
    KV,
    LESSONS,
    SCHEMA_VERSION,
    experience_row,
    row_experience,
)
from ..store.filters import In
from ..types import Experience, Lesson

if TYPE_CHECKING:
    import pyarrow as pa

    from ..deps import Deps

log = logging.getLogger("mimir.backup")

FORMAT = "mimir-export"
END = "mimir-export-end"
FORMAT_VERSION = 1
KINDS = ("experience", "lesson", "audit", "kv")
#: Records embedded and written per batch on import.
BATCH = 256

_LESSON_FIELDS = ("id", "status", "scope", "kind", "trigger", "rule", "payload", "signature")
_KV_FIELDS = ("id", "namespace", "depth", "key", "value", "created_at", "updated_at")
_AUDIT_FIELDS = ("id", "ts", "actor", "subject_id", "event", "detail")


class ExportReport(BaseModel):
    """What :func:`export_store` wrote."""

    path: str | None
    counts: dict[str, int]
    sha256: str
    with_vectors: bool
    bytes: int


class ImportReport(BaseModel):
    """What :func:`import_store` did: records read, added and already present, per kind."""

    path: str
    read: dict[str, int] = Field(default_factory=dict)
    added: dict[str, int] = Field(default_factory=dict)
    present: dict[str, int] = Field(default_factory=dict)
    """Records skipped because the store already had them (same id or idempotency key)."""
    reembedded: int = 0
    quarantined: list[str] = Field(default_factory=list)
    """Lessons whose signature did not verify under this store's key: imported, never served."""
    resigned: list[str] = Field(default_factory=list)
    """Lessons re-signed with this store's key (``resign=True``)."""


# -- export --------------------------------------------------------------------------------------


def _line(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


#: Sort keys of each kind's table (a stable order: the same store exports the same bytes).
_ORDER = {
    "experience": ["created_at", "id"],
    "lesson": ["id"],
    "audit": ["ts", "id"],
    "kv": ["id"],
}


def _tables(deps: Deps, with_vectors: bool) -> dict[str, pa.Table]:
    """Each kind's rows as one sorted Arrow table (read once: the counts go in the header)."""
    store = deps.store
    vec = ["vector", "action_vector"] if with_vectors else []
    lesson_cols = [c for c in store.lesson_columns() if c != "text"]
    tables = {
        "experience": store.column(EXPERIENCES, [*EXPERIENCE_COLUMNS, *vec]),
        "lesson": store.column(LESSONS, lesson_cols + vec[:1]),
        "audit": store.column(AUDIT, list(_AUDIT_FIELDS)),
        "kv": store.column(KV, [*_KV_FIELDS, "expires_at", "ttl_minutes", "text", "vectors"]),
    }
    return {
        k: t.sort_by([(c, "ascending") for c in _ORDER[k]]) if t.num_rows else t
        for k, t in tables.items()
    }


def _records(kind: str, table: pa.Table, with_vectors: bool) -> Iterator[dict[str, Any]]:
    """The export records of one kind's table, a batch of rows at a time."""
    from ..hosting.kv import indexed_texts

    kv_cols = [*_KV_FIELDS, "expires_at", "ttl_minutes"]
    for batch in table.to_batches(max_chunksize=1000):
        for row in batch.to_pylist():
            rec: dict[str, Any] = {"kind": kind}
            if kind == "experience":
                rec.update(row_experience(row).model_dump(mode="json"))
                if with_vectors:
                    rec.update(vector=row["vector"], action_vector=row["action_vector"])
            elif kind == "lesson":
                rec["row"] = {c: v for c, v in row.items() if c != "vector"}
                if with_vectors:
                    rec["vector"] = row["vector"]
            elif kind == "audit":
                rec.update(row)
            else:
                rec["row"] = {c: row[c] for c in kv_cols}
                rec["texts"] = indexed_texts(row)
                if with_vectors:
                    rec["vectors"] = row["vectors"]
            yield rec


def export_store(
    deps: Deps,
    out: str | os.PathLike[str] | IO[bytes],
    *,
    with_vectors: bool = False,
) -> ExportReport:
    """Write every experience, lesson, audit entry and kv document of ``deps``' store as JSONL.

    ``out`` is a path (written atomically, mode 0600: a temporary file renamed into place; an
    existing FIFO or character device such as ``/dev/stdout`` is written through, a symbolic
    link is kept and its target replaced, anything else that is not a regular file is refused)
    or a binary stream. Records that hooks captured but no process stored yet are stored first.
    Raises :class:`~mimir_core.errors.BackupError` (the file cannot be written) or a
    :class:`~mimir_core.errors.StoreError`.
    """
    from .. import __version__
    from ..ingest import spool as _spool
    from ..ingest.record import ingest

    if _spool.has_pending(deps.spool_dir):
        try:
            ingest(deps, compact=False)
        except MimirError as exc:  # export what is stored; the spool stays for the next drain
            log.warning("exporting without the records still in the capture spool: %s", exc)
    tables = _tables(deps, bool(with_vectors))
    counts = {k: int(t.num_rows) for k, t in tables.items()}
    meta = deps.store.meta()
    emb = deps.embedder
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "mimir": __version__,
        "schema": int(meta.get("schema_version", SCHEMA_VERSION) or SCHEMA_VERSION),
        "embedder": {"name": emb.name, "dim": emb.dim},
        "created_at": datetime.now(timezone.utc).isoformat(),
        "with_vectors": bool(with_vectors),
        "counts": counts,
    }

    def lines() -> Iterator[bytes]:
        digest = hashlib.sha256()
        yield _line(header)
        for kind in KINDS:
            for rec in _records(kind, tables[kind], bool(with_vectors)):
                data = _line(rec)
                digest.update(data)
                yield data
        yield _line({"format": END, "counts": counts, "sha256": str(digest.hexdigest())})

    if isinstance(out, (str, os.PathLike)):
        path = Path(out).expanduser()
        size, last = _write_export(path, lines())
        shown: str | None = str(path)
    else:
        size, last = 0, b""
        for data in lines():
            out.write(data)
            size, last = size + len(data), data
        out.flush()
        shown = None
    sha = json.loads(last)["sha256"]
    return ExportReport(
        path=shown, counts=counts, sha256=sha, with_vectors=bool(with_vectors), bytes=size
    )


def _write_export(path: Path, lines: Iterator[bytes]) -> tuple[int, bytes]:
    """Write an export to ``path`` without ever replacing something that is not a regular file.

    A new path or a regular file is written atomically (a temporary file renamed into place);
    a symbolic link to a regular file keeps its link (the file it points to is replaced); a
    FIFO or a character device (``/dev/stdout``, a named pipe) is written through. A directory,
    a block device, a socket or a dangling link is refused with a :class:`BackupError`.
    """
    try:
        st = os.stat(path)  # follows links: what would be written to
    except FileNotFoundError:
        if path.is_symlink():
            raise BackupError(
                f"cannot write export file {path}: it is a symbolic link to a missing file"
            ) from None
        return _write_atomic(path, lines)
    except OSError as exc:
        raise BackupError(f"cannot write export file {path}: {exc}") from exc
    if stat.S_ISREG(st.st_mode):
        return _write_atomic(Path(os.path.realpath(path)) if path.is_symlink() else path, lines)
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
        return _write_through(path, lines)
    what = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
    raise BackupError(f"cannot write export file {path}: it is {what}")


def _write_through(path: Path, lines: Iterator[bytes]) -> tuple[int, bytes]:
    """Write to an existing FIFO or character device as it is (no temporary file, no rename)."""
    size, last = 0, b""
    try:
        with open(path, "wb", buffering=0) as fh:
            for data in lines:
                fh.write(data)
                size, last = size + len(data), data
    except OSError as exc:
        raise BackupError(f"cannot write export file {path}: {exc}") from exc
    return size, last


def _write_atomic(path: Path, lines: Iterator[bytes]) -> tuple[int, bytes]:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    size, last = 0, b""
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise BackupError(f"cannot write export file {path}: {exc}") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            for data in lines:
                fh.write(data)
                size, last = size + len(data), data
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BackupError(f"cannot write export file {path}: {exc}") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return size, last


# -- reading and validating an export ------------------------------------------------------------


class _Reader:
    """Reads an export: header, records (validated and prepared for writing), trailer."""

    def __init__(self, deps: Deps, path: Path) -> None:
        self.deps = deps
        self.path = path
        self.header: dict[str, Any] = {}
        self.use_vectors = False

    def fail(self, lineno: int, message: str) -> BackupError:
        return BackupError(f"{self.path} line {lineno}: {message}")

    def check_header(self, obj: dict[str, Any]) -> None:
        if obj.get("format") != FORMAT:
            raise self.fail(1, f"not a Mimir export (format {obj.get('format')!r})")
        version = obj.get("version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise self.fail(1, f"export format version {version!r} is not a positive integer")
        if version > FORMAT_VERSION:
            raise self.fail(
                1,
                f"export format version {version} is newer than this Mimir reads "
                f"({FORMAT_VERSION}); upgrade mimir-lessons to import it",
            )
        schema = obj.get("schema")
        if isinstance(schema, int) and schema > SCHEMA_VERSION:
            raise self.fail(
                1,
                f"the export comes from a store of schema version {schema}, newer than this "
                f"Mimir ({SCHEMA_VERSION}); upgrade mimir-lessons to import it",
            )
        emb = obj.get("embedder")
        if not isinstance(emb, dict) or not isinstance(obj.get("counts"), dict):
            raise self.fail(1, "the header has no 'embedder' or 'counts' object")
        mine = self.deps.embedder  # the variant the store's own vectors came from
        self.use_vectors = bool(obj.get("with_vectors")) and (
            emb.get("name") == mine.name and emb.get("dim") == mine.dim
        )
        self.header = obj

    def lines(self) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """(line number, kind, prepared record) for every record; checks the whole file."""
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - closed below, generator-owned
        except OSError as exc:
            raise BackupError(f"cannot read export file {self.path}: {exc}") from exc
        with fh:
            digest = hashlib.sha256()
            counts = {k: 0 for k in KINDS}
            lineno = 0
            trailer: dict[str, Any] | None = None
            for raw in fh:
                lineno += 1
                if trailer is not None:
                    if raw.strip():
                        raise self.fail(lineno, "data after the export's end line")
                    continue
                obj = self._parse(lineno, raw)
                if lineno == 1:
                    self.check_header(obj)
                    continue
                if obj.get("format") == END:
                    trailer = obj
                    continue
                digest.update(raw)
                kind = obj.get("kind")
                if kind not in KINDS:
                    raise self.fail(lineno, f"unknown record kind {kind!r}")
                counts[str(kind)] += 1
                yield lineno, str(kind), self._prepare(lineno, str(kind), obj)
            if lineno == 0:
                raise BackupError(f"{self.path} is empty: not a Mimir export")
            if trailer is None:
                raise BackupError(
                    f"{self.path} is truncated: no end line after line {lineno} "
                    f"(a complete export ends with a {END!r} line)"
                )
            sha = str(digest.hexdigest())
            if trailer.get("sha256") != sha:
                raise BackupError(
                    f"{self.path} is corrupt: the sha256 of its records is {sha}, its end line "
                    f"says {trailer.get('sha256')!r}"
                )
            for name, where in (("end line", trailer), ("header", self.header)):
                said = {k: int(where.get("counts", {}).get(k, 0) or 0) for k in KINDS}
                if said != counts:
                    raise BackupError(
                        f"{self.path} is inconsistent: it holds {counts} records but its "
                        f"{name} says {said}"
                    )

    def _parse(self, lineno: int, raw: bytes) -> dict[str, Any]:
        try:
            obj = json.loads(raw)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            raise self.fail(lineno, f"not valid JSON ({exc})") from exc
        if not isinstance(obj, dict):
            raise self.fail(lineno, f"expected a JSON object, got {type(obj).__name__}")
        return obj

    def _prepare(self, lineno: int, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        try:
            if kind == "experience":
                return self._experience(obj)
            if kind == "lesson":
                return self._lesson(obj)
            if kind == "audit":
                return self._audit(obj)
            return self._kv(obj)
        except InvalidInputError as exc:
            raise self.fail(lineno, f"{kind} {str(obj.get('id') or '')!r}: {exc}") from exc

    def _vector(self, field: str, value: object) -> list[float] | None:
        if not self.use_vectors or value is None:
            return None
        dim = self.deps.embedder.dim
        if (
            not isinstance(value, list)
            or len(value) != dim
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)
        ):
            raise InvalidInputError(field, f"must be a list of {dim} numbers")
        return [float(x) for x in value]

    def _experience(self, obj: dict[str, Any]) -> dict[str, Any]:
        from ..ingest.validate import RECORD_FIELDS, _optional_id, build_experience, check_id

        allowed = set(Experience.model_fields) | {"kind", "vector", "action_vector"}
        unknown = sorted(set(obj) - allowed)
        if unknown:
            raise InvalidInputError(unknown[0], "is not an experience field")
        ident = check_id("id", obj.get("id"))
        if obj.get("created_at") is None:
            raise InvalidInputError("created_at", "is missing")
        exp = build_experience(
            **{name: obj.get(name) for name in RECORD_FIELDS},
            extra_patterns=self.deps.redact_patterns,
        )
        exp.id = ident
        exp.superseded_by = _optional_id("superseded_by", obj.get("superseded_by"))
        vector = self._vector("vector", obj.get("vector"))
        action_vector = self._vector("action_vector", obj.get("action_vector"))
        both = vector is not None and action_vector is not None
        return {
            "exp": exp.model_dump(mode="json"),
            "vector": vector if both else None,
            "action_vector": action_vector if both else None,
        }

    def _lesson(self, obj: dict[str, Any]) -> dict[str, Any]:
        row = obj.get("row")
        if not isinstance(row, dict):
            raise InvalidInputError("row", "must be the lesson's row (an object)")
        for name in _LESSON_FIELDS:
            if not isinstance(row.get(name), str):
                raise InvalidInputError(name, f"must be a string; got {row.get(name)!r}")
        from ..ingest.validate import check_id

        check_id("id", row["id"])
        updated = row.get("updated_at")
        if isinstance(updated, bool) or not isinstance(updated, (int, float)):
            raise InvalidInputError("updated_at", f"must be epoch seconds; got {updated!r}")
        lesson: Lesson | None = None
        try:
            data = json.loads(row["payload"])
            if isinstance(data, dict):
                data.pop("row_mac", None)  # the row's placement binding, not a lesson field
                data.pop("author_sig", None)  # its author's signatures: checked on import
                lesson = Lesson.model_validate(data)
        except (ValueError, ValidationError):
            lesson = None  # imported quarantined, like a row whose payload is unreadable
        clean = {name: row[name] for name in _LESSON_FIELDS}
        clean["updated_at"] = float(updated)
        return {
            "row": clean,
            "lesson": lesson.model_dump(mode="json") if lesson is not None else None,
            "vector": self._vector("vector", obj.get("vector")),
        }

    def _audit(self, obj: dict[str, Any]) -> dict[str, Any]:
        from ..redact.core import sanitize, sanitize_obj
        from ..text import dumps

        for name in ("id", "actor", "subject_id", "event", "detail"):
            if not isinstance(obj.get(name), str):
                raise InvalidInputError(name, f"must be a string; got {obj.get(name)!r}")
        ts = obj.get("ts")
        if isinstance(ts, bool) or not isinstance(ts, (int, float)):
            raise InvalidInputError("ts", f"must be epoch seconds; got {ts!r}")
        detail = str(obj["detail"])
        try:
            parsed = json.loads(detail)
        except ValueError:
            detail = sanitize(detail)
        else:
            cleaned = sanitize_obj(parsed)
            if cleaned != parsed:
                detail = dumps(cleaned)
        row = {name: obj[name] for name in _AUDIT_FIELDS}
        row.update(ts=float(ts), detail=detail, actor=sanitize(obj["actor"]))
        return {"row": row}

    def _kv(self, obj: dict[str, Any]) -> dict[str, Any]:
        from ..hosting.kv import MAX_TEXT, _clean_value, _item_id, _ns_text, validate_namespace
        from ..redact.core import sanitize

        row = obj.get("row")
        if not isinstance(row, dict):
            raise InvalidInputError("row", "must be the document's row (an object)")
        ns_text, key = row.get("namespace"), row.get("key")
        if not isinstance(ns_text, str) or not isinstance(key, str):
            raise InvalidInputError("namespace", "namespace and key must be strings")
        ns = validate_namespace(tuple(ns_text.split(".")) if ns_text else ())
        try:
            value = json.loads(str(row.get("value")))
        except ValueError as exc:
            raise InvalidInputError("value", f"is not JSON ({exc})") from exc
        value = _clean_value(key, value)
        times: dict[str, float | None] = {}
        for name in ("created_at", "updated_at", "expires_at", "ttl_minutes"):
            v = row.get(name)
            if v is None and name in ("expires_at", "ttl_minutes"):
                times[name] = None
            elif isinstance(v, bool) or not isinstance(v, (int, float)):
                raise InvalidInputError(name, f"must be a number; got {v!r}")
            else:
                times[name] = float(v)
        texts = obj.get("texts") or []
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise InvalidInputError("texts", "must be a list of strings")
        clean_texts = [sanitize(t, limit=MAX_TEXT) for t in texts]
        vectors = obj.get("vectors") if clean_texts == texts else None
        if vectors is not None:
            if not isinstance(vectors, list) or len(vectors) != len(texts):
                raise InvalidInputError("vectors", "must hold one vector per text")
            checked = [self._vector("vectors", v) for v in vectors]
            vectors = None if any(v is None for v in checked) else checked
        new = {
            "id": _item_id(ns, key),
            "namespace": _ns_text(ns),
            "depth": len(ns),
            "key": key,
            "value": json.dumps(value, ensure_ascii=False, allow_nan=True),
            **times,
            "text": "",
            "vectors": None,
        }
        return {"row": new, "texts": [t for t in clean_texts if t.strip()], "vectors": vectors}


# -- import --------------------------------------------------------------------------------------


def import_store(
    deps: Deps, path: str | os.PathLike[str], *, resign: bool = False, batch: int = BATCH
) -> ImportReport:
    """Import an export written by :func:`export_store` into ``deps``' store.

    The whole file is checked first (header and format version, every line, counts, sha256):
    a problem raises :class:`~mimir_core.errors.BackupError` naming the line and writes nothing.
    Then records absent from the store (by id or idempotency key) are written in batches,
    re-embedded unless the file carries vectors of this store's embedder. A lesson whose
    signature does not verify under this store's key is imported quarantined, unless
    ``resign`` re-signs it (trust the file). Safe to run again: it adds only what is missing.
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise BackupError(f"export file {file} does not exist or is not a file")
    report = ImportReport(path=str(file))
    report.read = {k: 0 for k in KINDS}
    report.added = {k: 0 for k in KINDS}
    report.present = {k: 0 for k in KINDS}
    # Validate everything before writing anything. The records, once validated and redacted,
    # wait in an anonymous temporary file (0600, gone on close): redaction runs once per record.
    writer = _Writer(deps, report, resign=bool(resign))
    try:
        with tempfile.TemporaryFile() as checked:
            for _lineno, kind, rec in _Reader(deps, file).lines():
                checked.write(_line({"kind": kind, "rec": rec}))
            checked.seek(0)
            pending: list[dict[str, Any]] = []
            kind = ""
            for raw in checked:
                item = json.loads(raw)
                if pending and (item["kind"] != kind or len(pending) >= batch):
                    writer.write(kind, pending)
                    pending = []
                kind = item["kind"]
                pending.append(item["rec"])
                report.read[kind] += 1
            if pending:
                writer.write(kind, pending)
    except OSError as exc:  # the temporary file (a full disk): nothing half-done that a rerun
        raise BackupError(f"cannot import {file}: {exc}") from exc  # would not complete
    writer.finish()
    from ..lessons.consolidate import _revalidate

    _revalidate(deps)  # another author's lessons: judged on this installation's evidence
    return report


class _Writer:
    """Writes prepared records, skipping those the store already has."""

    def __init__(self, deps: Deps, report: ImportReport, *, resign: bool) -> None:
        self.deps = deps
        self.report = report
        self.resign = resign
        self.active_added = False

    def write(self, kind: str, recs: list[dict[str, Any]]) -> None:
        getattr(self, f"_{kind}")(recs)

    def _present(self, table: str, column: str, values: Sequence[str]) -> set[str]:
        found = self.deps.store.select(table, In(column, values), [column])
        return {str(r[column]) for r in found}

    def _missing(self, table: str, kind: str, recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The records whose row id ``table`` lacks; the others are counted as present."""
        have = self._present(table, "id", [r["row"]["id"] for r in recs])
        fresh = [r for r in recs if r["row"]["id"] not in have]
        self.report.present[kind] += len(recs) - len(fresh)
        return fresh

    def _experience(self, recs: list[dict[str, Any]]) -> None:
        for r in recs:
            r["exp"] = Experience.model_validate(r["exp"])
        exps: list[Experience] = [r["exp"] for r in recs]
        have = self._present(EXPERIENCES, "id", [e.id for e in exps])
        have_keys = self._present(
            EXPERIENCES, "idem_key", [e.idempotency_key or e.id for e in exps]
        )
        fresh = []
        seen: set[str] = set()  # a file repeating an id or key stores it once
        for r in recs:
            ident, key = r["exp"].id, r["exp"].idempotency_key or r["exp"].id
            if ident in have or key in have_keys or ident in seen or key in seen:
                continue
            seen.update((ident, key))
            fresh.append(r)
        self.report.present["experience"] += len(recs) - len(fresh)
        if not fresh:
            return
        emb = self.deps.embedder
        todo = [r for r in fresh if r["vector"] is None]
        if todo:
            vecs = emb.embed([r["exp"].task for r in todo] + [r["exp"].action for r in todo])
            for i, r in enumerate(todo):
                r["vector"], r["action_vector"] = vecs[i], vecs[len(todo) + i]
            self.report.reembedded += len(todo)
        rows = []
        for r in fresh:
            exp: Experience = r["exp"]
            exp.embed_model = emb.name
            rows.append(experience_row(exp, r["vector"], r["action_vector"]))
        added = self.deps.store.insert_new(EXPERIENCES, rows)
        self.report.added["experience"] += len(added)
        self.report.present["experience"] += len(rows) - len(added)  # a concurrent import's

    def _lesson(self, recs: list[dict[str, Any]]) -> None:
        from ..lessons.lifecycle import author_key, log_event, signing_key
        from ..lessons.sign import sign
        from ..lessons.storage import bind, from_row, is_bound, record_heads, signable, to_row
        from ..lessons.team_verify import author_holds, by_trusted_author
        from ..redact.core import sanitize
        from ..text import fts_text

        fresh = self._missing(LESSONS, "lesson", recs)
        if not fresh:
            return
        key = signing_key(self.deps)
        rows: list[dict[str, Any]] = []
        signed_ok: list[Lesson] = []  # verified or re-signed: their heads are recorded
        bindable: set[str] = set()
        events: list[tuple[str, str, dict[str, Any]]] = []
        for rec in fresh:
            raw: dict[str, Any] = dict(rec["row"])
            lesson = Lesson.model_validate(rec["lesson"]) if rec["lesson"] else None
            parsed, ok = from_row(raw, key, placement=False)
            clean = None
            if lesson is not None:  # the chokepoint: no secret enters through a lesson either
                clean = lesson.model_copy(
                    update={f: sanitize(getattr(lesson, f)) for f in ("rule", "trigger", "action")}
                )
                ok = ok and clean == lesson
            if ok:
                row = dict(raw, text=fts_text(f"{raw['trigger']}\n{raw['rule']}"))
                signed_ok.append(parsed)
                bindable.add(str(raw["id"]))
                self.active_added = self.active_added or raw["status"] == "active"
            elif clean is not None and (self.resign or by_trusted_author(self.deps, raw)):
                clean.signature = sign(key, signable(clean))
                row = to_row(clean, [])
                signed_ok.append(clean)
                bindable.add(clean.id)
                author = {"author": clean.provenance.get("author")}
                events.append((clean.id, "import_resigned", dict(author, status=clean.status)))
                self.active_added = self.active_added or clean.status == "active"
            else:
                was = raw["status"]
                if clean is not None:
                    stopped = clean.model_copy(update={"status": "quarantined"})
                    row = to_row(stopped, [])  # keeps the old signature: not laundered
                else:
                    row = dict(raw, status="quarantined")
                    row["text"] = fts_text(f"{raw['trigger']}\n{raw['rule']}")
                reason = "signature does not verify with this store's key"
                events.append(
                    (str(raw["id"]), "import_quarantined", {"reason": reason, "was": was})
                )
            row["vector"] = rec["vector"] if ok and rec["vector"] is not None else None
            if row["vector"] is not None and not (is_bound(row) and from_row(row, key)[1]):
                row["vector"] = None  # a vector not bound to this lesson: re-derived
            rows.append(row)
        todo = [r for r in rows if r["vector"] is None]
        if todo:
            vecs = self.deps.embedder.embed([str(r["trigger"]) for r in todo])
            for r, v in zip(todo, vecs, strict=True):
                r["vector"] = list(map(float, v))
            self.report.reembedded += len(todo)
        me = author_key(self.deps)
        for r in rows:  # verified or re-signed: their placement bound with this store's key
            if r["id"] in bindable:  # an author's signatures that still hold are kept as they are
                bind(r, key, None if author_holds(r) else me)
        with self.deps.store.writing():
            added = set(self.deps.store.insert_new(LESSONS, rows, key="id"))
            record_heads(self.deps.store, [le for le in signed_ok if le.id in added])
        self.report.added["lesson"] += len(added)
        self.report.present["lesson"] += len(rows) - len(added)
        # Only for the lessons this import stored: a concurrent import of the same file
        # reports, audits and logs the others.
        for ident, event, detail in events:
            if ident not in added:
                continue
            if event == "import_resigned":
                self.report.resigned.append(ident)
            else:
                self.report.quarantined.append(ident)
                log_event(self.deps.home, event, lesson=ident, was=detail["was"])
            self.deps.audit("import", ident, event, detail)
        if self.report.quarantined:
            log.info(
                "%d imported lesson(s) did not verify with this store's signing key and were "
                "quarantined (import with resign to trust them)",
                len(self.report.quarantined),
            )

    def _audit(self, recs: list[dict[str, Any]]) -> None:
        rows = [r["row"] for r in recs]
        added = self.deps.store.insert_new(AUDIT, rows, key="id")
        self.report.added["audit"] += len(added)
        self.report.present["audit"] += len(rows) - len(added)

    def _kv(self, recs: list[dict[str, Any]]) -> None:
        from ..hosting.kv import TEXT_SEP
        from ..text import fts_text

        fresh = self._missing(KV, "kv", recs)
        if not fresh:
            return
        todo = [r for r in fresh if r["texts"] and r["vectors"] is None]
        flat = [t.replace("\x1e", " ") for r in todo for t in r["texts"]]
        vecs: Any = self.deps.embedder.embed(flat) if flat else []
        at = 0
        for r in todo:
            n = len(r["texts"])
            r["vectors"] = [list(map(float, v)) for v in vecs[at : at + n]]
            at += n
        self.report.reembedded += len(todo)
        rows = []
        for r in fresh:
            row = dict(r["row"])
            if r["texts"]:
                row["vectors"] = r["vectors"]
                row["text"] = fts_text(TEXT_SEP.join(t.replace("\x1e", " ") for t in r["texts"]))
            rows.append(row)
        added = self.deps.store.insert_new(KV, rows, key="id")
        self.report.added["kv"] += len(added)
        self.report.present["kv"] += len(rows) - len(added)

    def finish(self) -> None:
        if self.active_added:
            from ..lessons.lifecycle import refresh_digest

            refresh_digest(self.deps)
