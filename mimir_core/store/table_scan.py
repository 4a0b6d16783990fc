"""Read every row of a table: the damage that file names and sizes do not show.

:mod:`.integrity` checks that each file a table version names exists with its recorded size. A
byte flipped inside a data file keeps its size: the file then fails to decode (a read raises, or
the Rust reader panics), or, where the flip lands inside raw float data, decodes into a vector
that is NaN, infinite or absurdly long. So the doctor decodes each fragment of a table in full,
and checks every embedding: the models Mimir ships make unit-length vectors, so a row whose vector
is not finite, or (in a table of unit vectors) is not of unit length, is damaged.

A fragment's verdict is cached by the files it is made of, so checking older versions of a
table (for a rollback) decodes only the fragments not seen yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Vector columns of each table (``kv`` holds a list of vectors per row).
VECTOR_COLUMNS: dict[str, tuple[str, ...]] = {
    "experiences": ("vector", "action_vector"),
    "lessons": ("vector",),
    "kv": ("vectors",),
}
#: The column naming a row, per table (in reports and for a re-embedding).
KEY_COLUMN: dict[str, str] = {"meta": "key"}
#: Meta keys whose values are whole numbers: garbled (a flipped byte in a string decodes fine),
#: they would make the store fail to open.
META_NUMBERS = ("schema_version", "dim")
#: A table whose median vector length is within this of 1 holds unit vectors; a vector of such a
#: table further than this from unit length (and not all zeros) is damaged.
UNIT_TOLERANCE = 0.01
#: In a table of vectors that are not unit length (a custom embedder), a vector longer than this
#: many times the median is damaged.
ABSURD_FACTOR = 1000.0
#: Rows decoded at once.
BATCH_ROWS = 4096


def is_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure to read (including a Rust panic, which pyo3 raises as a
    ``BaseException``) rather than an interrupt or an exit."""
    return isinstance(exc, Exception) or type(exc).__name__ == "PanicException"


def short(exc: BaseException, limit: int = 200) -> str:
    text = f"{type(exc).__name__}: {exc}".split(", /")[0].splitlines()[0]
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class ScanResult:
    """What decoding a table version found."""

    problems: list[str] = field(default_factory=list)
    broken: set[int] = field(default_factory=set)
    """Ids of the fragments that do not decode."""
    bad_vectors: list[str] = field(default_factory=list)
    """Keys (ids) of the rows whose vectors are damaged."""
    garbled: list[str] = field(default_factory=list)
    """Ids of lesson rows whose signed payload does not parse or disagrees with the row's
    columns (read, such a row is quarantined as tampered with)."""
    bad_docs: list[str] = field(default_factory=list)
    """Ids of experience rows whose JSON document does not parse (it is made again from the
    row's columns)."""
    rows: int = 0


def _files(frag: Any) -> tuple[str, ...]:
    meta = frag.metadata
    dele = meta.deletion_file
    return (*(df.path for df in meta.files), f"{dele.id}-{dele.read_version}" if dele else "")


def _norms(column: Any) -> Any:
    """Per row, the largest length of its vectors (NaN when one is not finite; -1 for none)."""
    import numpy as np
    import pyarrow as pa

    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_list(col.type):  # kv: a list of vectors per row, or null
        out = np.full(len(col), -1.0)
        for i, vecs in enumerate(col.to_pylist()):
            if vecs:
                arr = np.asarray(vecs, dtype=np.float64)
                out[i] = np.nan if not np.isfinite(arr).all() else np.linalg.norm(arr, axis=1).max()
        return out
    if col.null_count:  # a nullable vector column: rows without one are not checked
        out = np.full(len(col), -1.0)
        for i, v in enumerate(col.to_pylist()):
            if v is not None:
                arr = np.asarray(v, dtype=np.float64)
                out[i] = np.nan if not np.isfinite(arr).all() else np.linalg.norm(arr)
        return out
    flat = col.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
    mat = flat.reshape(len(col), -1)
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.linalg.norm(mat, axis=1)
    norms[~np.isfinite(mat).all(axis=1)] = np.nan
    return norms


class TableScanner:
    """Decodes the fragments of one table, remembering each fragment's verdict by its files."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.vectors = VECTOR_COLUMNS.get(name, ())
        self.key = KEY_COLUMN.get(name, "id")
        self._seen: dict[tuple[str, ...], str | None] = {}

    def scan(self, ds: Any) -> ScanResult:
        """Decode every row of the dataset version ``ds``; check its vectors."""
        import numpy as np

        result = ScanResult()
        keys: list[str] = []
        norms: list[Any] = []
        names = set(ds.schema.names)
        vectors = [c for c in self.vectors if c in names]
        for frag in ds.get_fragments():
            files = _files(frag)
            known = self._seen.get(files, "")
            if known:  # seen broken before
                result.problems.append(known)
                result.broken.add(frag.fragment_id)
                continue
            try:
                for batch in frag.to_batches(batch_size=BATCH_ROWS):
                    result.rows += batch.num_rows
                    if self.name == "meta":
                        _check_meta(batch)
                    elif self.name == "lessons":
                        result.garbled += _garbled_lessons(batch)
                    elif self.name == "experiences":
                        result.bad_docs += _bad_docs(batch)
                    if not vectors:
                        continue
                    key = batch.column(batch.schema.get_field_index(self.key)).to_pylist()
                    for col in vectors:
                        keys.extend(str(k) for k in key)
                        norms.append(_norms(batch.column(batch.schema.get_field_index(col))))
            except BaseException as exc:
                if not is_error(exc):
                    raise
                problem = f"fragment {frag.fragment_id} ({files[0]}) does not decode: {short(exc)}"
                self._seen[files] = problem
                result.problems.append(problem)
                result.broken.add(frag.fragment_id)
                continue
            self._seen[files] = None
        if norms:
            result.bad_vectors = _damaged(keys, np.concatenate(norms))
        return result


def _check_meta(batch: Any) -> None:
    """Raise when a meta row the store cannot open without is garbled."""
    for row in batch.to_pylist():
        value = row.get("value")
        if row.get("key") in META_NUMBERS and not (isinstance(value, str) and value.isdigit()):
            raise ValueError(f"meta key {row.get('key')!r} has a garbled value {value!r:.40}")
        if row.get("key") == "embed_model" and not (isinstance(value, str) and value.isprintable()):
            raise ValueError(f"meta key 'embed_model' has a garbled value {value!r:.40}")


#: Lesson columns that repeat a field of the signed payload.
LESSON_FIELDS = ("id", "status", "scope", "kind", "trigger", "rule")


def _garbled_lessons(batch: Any) -> list[str]:
    """Ids of the batch's lesson rows whose payload is not JSON or disagrees with the columns
    (no key needed: the signature itself is checked where lessons are read)."""
    import json

    names = set(batch.schema.names)
    if "payload" not in names:
        return []
    cols = [c for c in LESSON_FIELDS if c in names]
    out = []
    for row in batch.select([*cols, "payload"]).to_pylist():
        try:
            data = json.loads(row["payload"] or "")
            ok = isinstance(data, dict) and all(data.get(c) == row[c] for c in cols)
        except ValueError:
            ok = False
        if not ok:
            out.append(str(row.get("id")))
    return out


def _bad_docs(batch: Any) -> list[str]:
    """Ids of the batch's experience rows whose ``doc`` is not a JSON object with every field."""
    import json

    from .core import DOC_FIELDS

    if "doc" not in batch.schema.names:
        return []
    out = []
    for row in batch.select(["id", "doc"]).to_pylist():
        if row["doc"] is None:
            continue  # written by a Mimir older than schema 3: read from the columns
        try:
            doc = json.loads(row["doc"])
            ok = isinstance(doc, dict) and all(k in doc for k in DOC_FIELDS)
        except ValueError:
            ok = False
        if not ok:
            out.append(str(row["id"]))
    return out


def _damaged(keys: list[str], norms: Any) -> list[str]:
    """The keys of the rows whose vector length says the vector is damaged."""
    import numpy as np

    present = norms[norms >= 0]
    finite = present[np.isfinite(present)]
    median = float(np.median(finite)) if len(finite) else 1.0
    with np.errstate(invalid="ignore"):
        if abs(median - 1.0) <= UNIT_TOLERANCE:
            bad = (norms > 0) & ~(np.abs(norms - 1.0) <= UNIT_TOLERANCE)
        else:
            bad = ~np.isfinite(norms) | (norms > ABSURD_FACTOR * max(median, 1e-6))
        bad |= np.isnan(norms)
    return list(dict.fromkeys(k for k, b in zip(keys, bad, strict=True) if b))
