"""Table integrity of a local store, below the store: find broken tables and repair them.

``mimir doctor`` needs this when :class:`~mimir_core.store.core.Store` cannot even open, so it
works on the table directories directly (pylance), not through LanceDB's connection. A LanceDB
table is a directory ``<name>.lance`` with one manifest per version (``_versions/``), data files
(``data/``), deletion files (``_deletions/``) and index files (``_indices/``). A table is intact
when its newest manifest reads and every file it names exists with the size it recorded.

Repairs, each a new version (nothing is rewritten in place; the doctor backs the store up first):

* unreadable newest manifests are moved into the backup, so the newest readable one is latest;
* a version naming missing or truncated files is rolled back to the newest intact version;
* with no intact version left (old versions are cleaned after compaction), the fragments whose
  files are broken are dropped, and the rows lost that way are reported;
* an index whose files are gone is dropped (opening the store rebuilds the full-text indexes,
  compaction the vector index).
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import StoreError
from .engine_log import quiet_lost_commits
from .table_scan import TableScanner, is_error

quiet_lost_commits()  # before this module first loads the engine

log = logging.getLogger("mimir.integrity")

TABLE_SUFFIX = ".lance"
_V2_BASE = (1 << 64) - 1  # manifest names in the v2 scheme count down from u64::MAX


@dataclass
class TableHealth:
    """What :func:`table_health` found for one table."""

    name: str
    path: Path
    version: int | None = None
    rows: int | None = None
    problems: list[str] = field(default_factory=list)
    bad_vectors: list[str] = field(default_factory=list)
    """Ids of rows whose vectors are damaged (NaN, infinite, not unit length): the doctor
    re-embeds them from their text (:func:`~mimir_core.ops.doctor.repair`)."""

    garbled: list[str] = field(default_factory=list)
    """Ids of lesson rows whose payload is garbled or disagrees with their columns."""
    bad_docs: list[str] = field(default_factory=list)
    """Ids of experience rows whose JSON document does not parse."""

    @property
    def ok(self) -> bool:
        return not (self.problems or self.bad_vectors or self.garbled or self.bad_docs)

    @property
    def readable(self) -> bool:
        """Every file is there and every row decodes (vectors aside)."""
        return not self.problems


def table_dirs(store_dir: str | os.PathLike[str]) -> list[Path]:
    """The table directories of a local store, by name."""
    root = Path(store_dir)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.endswith(TABLE_SUFFIX))


def manifest_versions(table_dir: Path) -> dict[int, Path]:
    """Version -> manifest file, from the names in ``_versions/`` (both naming schemes)."""
    out: dict[int, Path] = {}
    try:
        entries = list((table_dir / "_versions").iterdir())
    except OSError:
        return out
    for p in entries:
        stem, _dot, ext = p.name.partition(".")
        if ext != "manifest" or not stem.isdigit():
            continue
        n = int(stem)
        out[_V2_BASE - n if n > (1 << 63) else n] = p
    return out


def _dataset(table_dir: Path, version: int | None = None) -> Any:
    import lance

    return lance.dataset(str(table_dir), version=version)


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def dataset_problems(ds: Any, table_dir: Path) -> tuple[list[str], set[int]]:
    """(problems, ids of fragments with a broken file) of an opened dataset version: every data
    and deletion file it names must exist (data files with their recorded size), every index
    its directory."""
    problems: list[str] = []
    broken: set[int] = set()
    for frag in ds.get_fragments():
        meta = frag.metadata
        for df in meta.files:
            path = table_dir / "data" / df.path
            size = _size(path)
            want = getattr(df, "file_size_bytes", None)
            if size is None:
                problems.append(f"missing data file {path}")
            elif want and size != want:
                problems.append(f"truncated data file {path} ({size} of {want} bytes)")
            else:
                continue
            broken.add(frag.fragment_id)
        dele = meta.deletion_file
        if dele is not None:
            # lance gives the path without its leading "/" (object-store style): keep the name
            name = Path(dele.path(frag.fragment_id, base_uri=str(table_dir))).name
            path = table_dir / "_deletions" / name
            if _size(path) is None:
                problems.append(f"missing deletion file {path}")
                broken.add(frag.fragment_id)
    for index in ds.list_indices():
        if not (table_dir / "_indices" / str(index["uuid"])).is_dir():
            problems.append(f"missing files of index {index['name']}")
    return problems, broken


def table_health(table_dir: Path, *, scan: bool = True) -> TableHealth:
    """Whether the table's newest version reads and names only intact files, and (``scan``)
    whether every row decodes and every vector is sound (:mod:`.table_scan`)."""
    health = TableHealth(table_dir.name.removesuffix(TABLE_SUFFIX), table_dir)
    versions = manifest_versions(table_dir)
    if not versions:
        health.problems.append(f"no version manifest in {table_dir / '_versions'}")
        return health
    newest = max(versions)
    try:
        ds = _dataset(table_dir)
        health.version = int(ds.version)
        if health.version < newest:  # lance skipped an unreadable newer manifest
            health.problems.append(f"unreadable manifest {versions[newest]}")
        health.problems.extend(dataset_problems(ds, table_dir)[0])
        if not health.problems:
            health.rows = int(ds.count_rows())
            if scan:
                found = TableScanner(health.name).scan(ds)
                health.problems.extend(found.problems)
                health.bad_vectors = found.bad_vectors
                health.garbled = found.garbled
                health.bad_docs = found.bad_docs
    except BaseException as exc:
        if not is_error(exc):
            raise
        health.problems.append(f"cannot open version {newest}: {_short(exc)}")
    return health


def store_health(store_dir: str | os.PathLike[str], *, scan: bool = True) -> list[TableHealth]:
    """:func:`table_health` of every table of a local store."""
    return [table_health(p, scan=scan) for p in table_dirs(store_dir)]


def first_problem(ds: Any, table_dir: Path) -> str | None:
    """The first broken file of an opened dataset, re-checked at the latest version (a
    concurrent compaction may have cleaned the files of the version first opened)."""
    problems, _broken = dataset_problems(ds, table_dir)
    if problems:
        problems, _broken = dataset_problems(_dataset(table_dir), table_dir)
    return problems[0] if problems else None


def _version_problems(
    ds: Any, table_dir: Path, scanner: TableScanner
) -> tuple[list[str], set[int]]:
    """(problems, broken fragment ids) of a dataset version: its files, then its rows decoded."""
    problems, broken = dataset_problems(ds, table_dir)
    if not problems:
        found = scanner.scan(ds)
        problems, broken = found.problems, found.broken
    return problems, broken


def repair_table(table_dir: Path, backup_dir: Path) -> list[str]:
    """Repair one table (see the module doc); returns the actions taken, each saying how many
    rows were lost. Raises :class:`StoreError` when nothing readable is left (restore it from a
    backup)."""
    actions: list[str] = []
    name = table_dir.name.removesuffix(TABLE_SUFFIX)
    scanner = TableScanner(name)
    versions = manifest_versions(table_dir)
    readable: dict[int, Any] = {}
    for v in sorted(versions, reverse=True):
        try:
            readable[v] = _dataset(table_dir, v)
            break
        except BaseException as exc:
            if not is_error(exc):
                raise
            log.debug("table %s: version %s is unreadable: %s", name, v, _short(exc))
            continue
    if not readable:
        raise StoreError(
            f"table {name}: no readable version manifest in {table_dir / '_versions'}; "
            f"restore it from a backup (`mimir import`)"
        )
    top = max(readable)
    moved = [v for v in versions if v > top]
    if moved:
        aside = backup_dir / "unreadable-manifests" / table_dir.name
        aside.mkdir(parents=True, exist_ok=True, mode=0o700)
        for v in moved:
            shutil.move(str(versions[v]), aside / versions[v].name)
        hint = table_dir / "_versions" / "latest_version_hint.json"
        hint.unlink(missing_ok=True)
        orphans = orphan_rows(table_dir)
        actions.append(
            f"table {name}: moved unreadable manifest(s) of version(s) "
            f"{', '.join(map(str, sorted(moved)))} to {aside}; version {top} is now the latest "
            f"({_rows(readable[top])} rows; up to {orphans} row(s) written by the lost versions "
            f"are lost)"
        )
    ds = _dataset(table_dir)
    problems, broken = _version_problems(ds, table_dir, scanner)
    if not problems:
        return actions
    latest = int(ds.version)
    for v in sorted((v for v in versions if v < latest), reverse=True):
        try:
            old = _dataset(table_dir, v)
            if _version_problems(old, table_dir, scanner)[0]:
                continue
        except BaseException as exc:
            if not is_error(exc):
                raise
            log.debug("table %s: older version %s is unreadable: %s", name, v, _short(exc))
            continue
        before = _rows(ds)
        old.restore()
        after = int(_dataset(table_dir).count_rows())
        lost = f"{int(before) - after}" if before.isdigit() else "?"
        actions.append(
            f"table {name}: rolled back from version {latest} ({problems[0]}) to version {v}, "
            f"the newest intact one ({before} -> {after} rows, {lost} row(s) lost)"
        )
        return actions
    if broken:
        import lance

        lost_rows = sum(
            int(f.metadata.physical_rows) for f in ds.get_fragments() if f.fragment_id in broken
        )
        op = lance.LanceOperation.Delete([], sorted(broken), "mimir doctor --repair")
        ds = lance.LanceDataset.commit(str(table_dir), op, read_version=latest)
        actions.append(
            f"table {name}: no intact older version; dropped {len(broken)} fragment(s) with "
            f"broken files ({problems[0]}), {lost_rows} row(s) lost; restore them from a backup "
            f"if you have one"
        )
    for index in ds.list_indices():
        if not (table_dir / "_indices" / str(index["uuid"])).is_dir():
            ds.drop_index(index["name"])
            actions.append(f"table {name}: dropped index {index['name']} whose files are gone")
    left = _version_problems(_dataset(table_dir), table_dir, TableScanner(name))[0]
    if left:
        raise StoreError(f"table {name}: could not repair {left[0]}; restore it from a backup")
    return actions


def orphan_rows(table_dir: Path) -> int:
    """Rows in the table's data files that no readable version names: what versions whose
    manifests were lost had written (an upper bound: a compaction's output repeats rows)."""
    from lance.file import LanceFileReader

    named: set[str] = set()
    for v in manifest_versions(table_dir):
        try:
            ds = _dataset(table_dir, v)
        except BaseException as exc:
            if not is_error(exc):
                raise
            log.debug("%s: version %s is unreadable: %s", table_dir.name, v, _short(exc))
            continue
        named.update(df.path for f in ds.get_fragments() for df in f.metadata.files)
    rows = 0
    try:
        files = [p for p in (table_dir / "data").iterdir() if p.name not in named]
    except OSError:
        return 0
    for path in files:
        try:
            rows += int(LanceFileReader(str(path)).metadata().num_rows)
        except BaseException as exc:
            if not is_error(exc):
                raise
            log.debug("%s: data file %s is unreadable: %s", table_dir.name, path.name, _short(exc))
    return rows


def _rows(ds: Any) -> str:
    try:
        return str(int(ds.count_rows()))
    except Exception:  # only for the repair's report, where "?" says the count is unknown
        return "?"


def read_meta(store_dir: str | os.PathLike[str]) -> dict[str, str]:
    """The store's meta table (schema version, embedder), read without opening the store."""
    table_dir = Path(store_dir) / f"meta{TABLE_SUFFIX}"
    if not table_dir.is_dir():
        return {}
    rows = _dataset(table_dir).to_table(columns=["key", "value"]).to_pylist()
    return {str(r["key"]): str(r["value"]) for r in rows}


def restore_meta(store_dir: str | os.PathLike[str]) -> str | None:
    """Rebuild the meta table's keys that a rollback lost, from the tables themselves (the
    embedding model the experiences were embedded with, the vector size, the schema version),
    so that opening the store does not stamp it with whatever embedder is active. Returns the
    action, or ``None`` when nothing was missing."""
    import lance
    import pyarrow as pa

    root = Path(store_dir)
    meta_dir, exp_dir = root / f"meta{TABLE_SUFFIX}", root / f"experiences{TABLE_SUFFIX}"
    if not meta_dir.is_dir() or not exp_dir.is_dir():
        return None
    meta = read_meta(root)
    if all(meta.get(k) for k in ("embed_model", "dim", "schema_version")):
        return None
    exp = _dataset(exp_dir)
    models = exp.to_table(columns=["embed_model"]).column("embed_model").to_pylist()
    if not models:
        return None  # an empty store: opening it records the active embedder, correctly
    vec = exp.schema.field("vector").type
    values = {
        "embed_model": max(set(models), key=models.count),
        "dim": str(vec.list_size),
        "schema_version": _schema_of(root, exp),
        "created_at": meta.get("created_at") or "",
    }
    values = {k: v for k, v in values.items() if v and not meta.get(k)}
    rows = pa.table({"key": list(values), "value": list(values.values())})
    lance.write_dataset(rows, str(meta_dir), mode="append")
    return f"table meta: restored {', '.join(f'{k}={v}' for k, v in values.items())}"


def rebuild_meta(store_dir: str | os.PathLike[str], backup_dir: Path) -> str:
    """Replace a meta table that no repair could read with an empty one (the damaged one moved
    into the backup); :func:`restore_meta` then fills in what the other tables tell, and the
    doctor records the stored lessons as their heads again. Lost: the vector index's training
    size (the next upkeep records it again), and any replay the lost heads would have shown."""
    import lance
    import pyarrow as pa

    meta_dir = Path(store_dir) / f"meta{TABLE_SUFFIX}"
    aside = backup_dir / "damaged-tables"
    aside.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = aside / meta_dir.name
    n = 1
    while target.exists():
        n += 1
        target = aside / f"meta-{n}{TABLE_SUFFIX}"
    shutil.move(str(meta_dir), target)
    schema = pa.schema([pa.field("key", pa.string()), pa.field("value", pa.string())])
    lance.write_dataset(schema.empty_table(), str(meta_dir), data_storage_version="2.1")
    return f"table meta: unreadable in every version; moved to {target} and made anew"


def _schema_of(root: Path, experiences: Any) -> str:
    """The schema version a store's tables show (the migrations that have run)."""
    if "doc" in experiences.schema.names:
        return "3"
    return "2" if (root / f"kv{TABLE_SUFFIX}").is_dir() else "1"


def backup(paths: list[Path], backups_root: Path) -> Path:
    """Copy ``paths`` (a store, a spool) into ``<backups_root>/doctor-<UTC time>/`` (0700)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = backups_root / f"doctor-{stamp}"
    n = 1
    while dest.exists():
        n += 1
        dest = backups_root / f"doctor-{stamp}-{n}"
    backups_root.mkdir(parents=True, exist_ok=True, mode=0o700)
    dest.mkdir(mode=0o700)
    for src in paths:
        if src.is_dir():
            shutil.copytree(src, dest / src.name, symlinks=True)
    private(dest)
    return dest


def private(root: Path) -> int:
    """Remove group and other permissions under ``root`` (dirs 0700, files 0600 at most);
    returns how many modes changed."""
    changed = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for entry in [dirpath, *(os.path.join(dirpath, f) for f in filenames)]:
            try:
                st = os.lstat(entry)
                if stat.S_ISLNK(st.st_mode):
                    continue
                mode = stat.S_IMODE(st.st_mode)
                if mode & 0o077:
                    os.chmod(entry, mode & ~0o077)
                    changed += 1
            except OSError:
                continue
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
    return changed


def loose_modes(root: Path, limit: int = 3) -> tuple[int, list[str]]:
    """(how many, the first few) paths under ``root`` readable by group or others."""
    count, first = 0, list[str]()
    for dirpath, _dirnames, filenames in os.walk(root):
        for entry in [dirpath, *(os.path.join(dirpath, f) for f in filenames)]:
            try:
                st = os.lstat(entry)
            except OSError:
                continue
            if not stat.S_ISLNK(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o077:
                count += 1
                if len(first) < limit:
                    first.append(f"{entry} ({stat.S_IMODE(st.st_mode):o})")
    return count, first


def _short(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).split(", /")[0]  # lance appends the Rust source location
    return text if len(text) <= limit else text[: limit - 3] + "..."
