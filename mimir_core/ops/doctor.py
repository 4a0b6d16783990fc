"""Health checks of an installation and a store (``mimir doctor``)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MimirError, StoreError
from ..ingest import spool
from ..store.integrity import (
    TABLE_SUFFIX,
    TableHealth,
    backup,
    loose_modes,
    private,
    read_meta,
    rebuild_meta,
    repair_table,
    restore_meta,
    store_health,
)

if TYPE_CHECKING:
    from ..memory import Mimir

Check = dict[str, Any]
#: Less free space than this on the home's disk is reported.
LOW_DISK = 100 * 1024 * 1024

EXTRAS = {
    "langchain": "langchain_core",
    "langgraph": "langgraph",
    "llamaindex": "llama_index.core",
    "mcp": "mcp",
    "llm": "anthropic",
}


def _run(name: str, fn: Callable[[], str]) -> Check:
    try:
        return {"check": name, "ok": True, "detail": fn()}
    except Exception as exc:  # a check reports, it never raises
        return {"check": name, "ok": False, "detail": f"{type(exc).__name__}: {exc}"}


def run_checks(m: Mimir) -> list[Check]:
    """Every check, in order; each is ``{"check", "ok", "detail"}``."""
    checks: list[Check] = []

    def python() -> str:
        return sys.version.split()[0]

    def home() -> str:
        m.deps.ensure_home()
        mode = stat.S_IMODE(m.home.stat().st_mode)
        if mode & 0o077:
            raise PermissionError(f"{m.home} is mode {mode:o}; run: chmod 700 {m.home}")
        return f"{m.home} (mode {mode:o})"

    def embedder() -> str:
        try:
            emb: Any = m.embedder  # the variant the store's vectors need
        except MimirError:  # the store check says why it does not open
            emb = m.deps.configured_embedder()
        start = time.perf_counter()
        vec = emb.embed(["check that the embedding model loads offline"])
        ms = (time.perf_counter() - start) * 1000
        return f"{emb.name}, {vec.shape[1]}-d, loaded and embedded in {ms:.0f} ms (offline)"

    def store() -> str:
        s = m.store
        meta = s.meta()
        configured = m.deps.configured_embedder().name  # the store may keep an older variant
        upgrade = ""
        if s.embed_model != configured:
            upgrade = f" (`mimir reindex` moves it to {configured})"
        return (
            f"{m.store_uri}: schema v{meta.get('schema_version')}, "
            f"embedded with {meta.get('embed_model')}{upgrade}"
        )

    def contents() -> str:
        st = m.stats()
        return f"{st.experiences} experience(s), {sum(st.lessons.values())} lesson(s)"

    def lessons() -> str:
        return _lessons_detail(m)

    def extras() -> str:
        have = [k for k, mod in EXTRAS.items() if _installed(mod)]
        missing = [k for k in EXTRAS if k not in have]
        return (
            f"installed: {', '.join(have) or 'none'}; not installed: {', '.join(missing) or 'none'}"
        )

    def tables() -> str:
        if "://" in m.store_uri:
            return f"{m.store_uri}: object storage (file checks are for local stores)"
        return _tables_detail(m.store_uri)

    def files() -> str:
        keys = m.home / "keys"
        exposed = [
            f"{p} ({stat.S_IMODE(p.stat().st_mode):o})"
            for p in (m.home, keys, *(keys.iterdir() if keys.is_dir() else ()))
            if p.exists() and stat.S_IMODE(p.stat().st_mode) & 0o077
        ]
        if exposed:
            raise PermissionError(
                f"readable by others: {', '.join(exposed)}; run: mimir doctor --repair"
            )
        count, _first = loose_modes(m.home)
        inner = f"; {count} inner path(s) wider than 0600 (--repair tightens them)" if count else ""
        return f"home and keys are private{inner}"

    def disk() -> str:
        dirs = {m.home}
        if "://" not in m.store_uri and Path(m.store_uri).is_dir():
            dirs.add(Path(m.store_uri))
        for d in dirs:
            probe = d / f".mimir-doctor-{os.getpid()}"
            try:
                probe.write_bytes(b"x" * 4096)
            except OSError as exc:
                raise StoreError(f"cannot write in {d}: {exc}") from exc
            finally:
                with suppress(OSError):
                    probe.unlink()
        free = shutil.disk_usage(m.home).free
        if free < LOW_DISK:
            raise StoreError(f"only {free / 1e6:.0f} MB free on the disk of {m.home}")
        return f"writable, {free / 1e9:.1f} GB free"

    def spool_check() -> str:
        return _spool_detail(m.spool_dir)

    for name, fn in [
        ("python", python),
        ("home", home),
        ("files", files),
        ("disk", disk),
        ("embedder", embedder),
        ("tables", tables),
        ("store", store),
        ("contents", contents),
        ("lessons", lessons),
        ("spool", spool_check),
        ("extras", extras),
    ]:
        checks.append(_run(name, fn))
    return checks


def _tables_detail(store_uri: str) -> str:
    """Every table's files checked and every row decoded, vectors included (raises on damage)."""
    health = store_health(store_uri)
    bad = [f"{h.name}: {'; '.join(h.problems[:2])}" for h in health if h.problems]
    bad += [
        f"{h.name}: {len(h.bad_vectors)} row(s) with damaged vectors (not finite or not unit "
        f"length), e.g. {', '.join(h.bad_vectors[:3])}"
        for h in health
        if h.bad_vectors
    ]
    bad += [
        f"{h.name}: {len(h.bad_docs)} row(s) whose document is garbled, e.g. "
        f"{', '.join(h.bad_docs[:3])}"
        for h in health
        if h.bad_docs
    ]
    fixable = bool(bad)
    bad += [f"{h.name}: {_garbled_detail(h.garbled)}" for h in health if h.garbled]
    if bad:
        advice = "; run: mimir doctor --repair" if fixable else ""
        raise StoreError(f"damaged table(s): {' | '.join(bad)}{advice}")
    rows = sum(h.rows or 0 for h in health)
    return f"{len(health)} table(s) intact, {rows} row(s) read back"


def _garbled_detail(ids: list[str]) -> str:
    return (
        f"{len(ids)} lesson row(s) whose signed payload is garbled or disagrees with the row "
        f"({', '.join(ids[:3])}): they are quarantined when read; restore them from an export "
        f"(`mimir import`) or let `mimir consolidate` learn them again"
    )


def _without_self(message: str) -> str:
    """An error met by the repair, without the advice to run the repair."""
    for advice in (
        "; run `mimir doctor` to diagnose and `mimir doctor --repair` to repair",
        "; run: mimir doctor --repair",
    ):
        message = message.replace(advice, "")
    return message


def _lessons_detail(m: Mimir) -> str:
    """The lessons' integrity: the signing key, deleted rows, crash leftovers (reconciled)."""
    from ..errors import SigningKeyError
    from ..lessons.keys import KEY_ID
    from ..lessons.reconcile import head_ids, maintain
    from ..lessons.sign import key_file_problem
    from ..store.core import LESSONS

    problem = key_file_problem(m.home)
    if problem is not None:
        raise SigningKeyError(problem)
    store = m.store
    if not store.count(LESSONS) and not head_ids(m.deps) and not store.meta().get(KEY_ID):
        return "no lessons yet"
    done = maintain(m.deps)  # SigningKeyError names the key file and what to do
    if done.missing:
        ids = ", ".join(done.missing[:5]) + (" ..." if len(done.missing) > 5 else "")
        raise StoreError(
            f"{len(done.missing)} lesson(s) deleted outside Mimir (row gone, head kept): {ids}; "
            f"restore them from a backup (`mimir import`) or acknowledge each with "
            f"`mimir forget ID`"
        )
    notes = [f"{store.count(LESSONS)} lesson(s), signing key matches"]
    if done.audited:
        notes.append(f"added {len(done.audited)} audit entr(ies) a crash left out")
    if done.heads_added:
        notes.append(f"recorded {len(done.heads_added)} missing head(s)")
    if done.bound:
        notes.append(f"checked {done.bound} row(s) written before placement bindings")
    return "; ".join(notes)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _spool_counts(directory: Path) -> tuple[int, int, int]:
    """(lines pending, batch files left by crashed drains, lines set aside) of a spool."""
    pending = 0
    with suppress(OSError), open(directory / spool.PENDING, "rb") as fh:
        pending = sum(1 for line in fh if line.strip())
    batches = 0
    with suppress(OSError):
        batches = sum(1 for p in directory.iterdir() if p.name.startswith(spool.BATCH_PREFIX))
    return pending, batches, spool.rejected_count(directory)


def _spool_detail(directory: Path) -> str:
    from ..ingest import lost

    gone = lost.read(directory)
    if gone is not None:
        raise StoreError(
            f"{gone.describe()}: a hook could not write to {directory}; those records cannot be "
            f"recovered (free some space); `mimir doctor --repair` clears this notice"
        )
    pending, batches, rejected = _spool_counts(directory)
    if batches:
        raise StoreError(
            f"{batches} batch file(s) left in {directory} by an interrupted drain; "
            f"run: mimir ingest (or mimir doctor --repair)"
        )
    detail = f"{pending} line(s) waiting in {directory}"
    if rejected:
        detail += (
            f"; {rejected} bad line(s) set aside in {directory / spool.REJECTED} "
            f"(kept for inspection, never ingested)"
        )
    return detail


def repair(m: Mimir) -> dict[str, Any]:
    """Repair what can be repaired, after a backup; ``{"backup", "actions", "problems",
    "notes"}``. Idempotent: a second run finds nothing to do (no backup, no actions).

    Damaged tables are rolled back to their newest intact version (or their broken fragments
    dropped, the rows lost counted); modes under the home are made private; tables left by an
    interrupted reindex are restored and missing full-text indexes rebuilt (by opening the
    store); records left in the spool, including batches of a crashed drain, are ingested;
    fragmented tables are compacted and old versions cleaned. A store written by a newer schema
    is left untouched. Lock files are not removed: they are ``flock`` locks, released by the
    kernel when their process dies, so none is ever stale (removing one could let two writers
    in at once).
    """
    from ..store.core import EMBEDDED_TABLES, SCHEMA_VERSION, TABLES
    from ..store.salvage import evidence_note, lost_evidence, rebase_heads, redoc, reembed

    report: dict[str, Any] = {"backup": None, "actions": [], "problems": [], "notes": []}
    actions: list[str] = report["actions"]
    local = "://" not in m.store_uri
    store_dir = Path(m.store_uri)
    spool_dir = m.spool_dir

    def ensure_backup() -> None:
        if report["backup"] is None:
            paths = [p for p in (store_dir if local else None, spool_dir) if p is not None]
            report["backup"] = str(backup(paths, m.home / "backups"))

    if local and store_dir.is_dir():
        try:
            stored = int(read_meta(store_dir).get("schema_version", "0") or 0)
        except Exception:
            stored = 0  # a damaged meta table: repaired below
        if stored > SCHEMA_VERSION:
            report["problems"].append(
                f"store {store_dir} has schema version {stored}, newer than this Mimir "
                f"({SCHEMA_VERSION}): left untouched; upgrade mimir-lessons to open it"
            )
            return report
    health = store_health(store_dir) if local else []
    broken = [h for h in health if not h.readable]
    vectors = {h.name: h.bad_vectors for h in health if h.bad_vectors}
    docs = [i for h in health for i in h.bad_docs]
    loose, _first = loose_modes(m.home) if m.home.is_dir() else (0, [])
    leftovers = [p.name for p in _table_dirs_named(store_dir, "__backup")] if local else []
    no_fts = _missing_fts(store_dir, EMBEDDED_TABLES) if local else []
    if broken or loose or leftovers or no_fts or vectors or docs:
        ensure_backup()
    _repair_tables(m, broken, report)
    if report["problems"]:
        return report
    try:
        store = m.store
    except Exception as exc:
        report["problems"].append(
            f"{_without_self(str(exc))}; the repair could not fix this: restore the store from "
            f"an export (`mimir import FILE`) or from a copy (the damaged store was copied to "
            f"{report['backup']})"
        )
        return report
    try:  # rows that read but hold damage: made again from what is intact
        if docs:
            actions.append(redoc(m.deps, docs))
        if vectors:
            actions.extend(reembed(m.deps, vectors))
    except MimirError as exc:
        report["problems"].append(_without_self(str(exc)))
    report["notes"].extend(
        f"left as is: table {h.name}: {_garbled_detail(h.garbled)}"
        for h in health
        if h.garbled and h not in broken
    )
    if any(h.name in ("lessons", "meta") for h in broken):
        rebased = rebase_heads(m.deps)
        if rebased:
            actions.append(
                f"table meta: recorded the {rebased} lesson(s) the repair kept as their latest "
                f"versions (else they would be taken for replays)"
            )
    if broken:
        total, missing, gone = lost_evidence(m.deps)
        note = evidence_note(total, missing, gone)
        if note:
            report["notes"].append(note)
    actions.extend(f"restored table {n} left by an interrupted reindex" for n in leftovers)
    actions.extend(f"rebuilt the full-text index of table {n}" for n in no_fts)
    pending, batches, rejected = _spool_counts(spool_dir)
    if pending or batches:
        ensure_backup()
        drained = m.ingest()
        actions.append(
            f"ingested {drained.ingested} record(s) from the spool"
            + (f" ({batches} batch file(s) of an interrupted drain)" if batches else "")
            + (f"; set aside {drained.rejected} bad line(s)" if drained.rejected else "")
        )
    fragmented = [n for n in TABLES if store.fragments(n) > 1]
    if fragmented:
        ensure_backup()
        for name in fragmented:
            store.optimize(name)
        actions.append(f"compacted {', '.join(fragmented)} and cleaned old versions")
    if loose or report["backup"]:  # last: the writes above made new files
        changed = private(m.home)
        if changed:
            actions.append(f"made {changed} path(s) under {m.home} private (0700/0600)")
    _clear_lost(spool_dir, report)
    rejected = spool.rejected_count(spool_dir)
    if rejected:
        report["notes"].append(
            f"{rejected} bad spool line(s) set aside in {spool_dir / spool.REJECTED} "
            f"(not valid records; kept for inspection)"
        )
    if not local:
        report["notes"].append("object storage: table file checks and repairs are local only")
    return report


def _clear_lost(spool_dir: Path, report: dict[str, Any]) -> None:
    """Clear the notice of hook captures lost to failed writes (they cannot be recovered)."""
    from ..ingest import lost

    cleared = lost.clear(spool_dir)
    if cleared is not None:
        report["actions"].append(
            f"cleared the notice: {cleared.describe()} (not recoverable; the spool writes again)"
        )


def _repair_tables(m: Mimir, broken: list[TableHealth], report: dict[str, Any]) -> None:
    """Roll back or trim each table in ``broken``; a meta table nothing readable is left of is
    made anew. Then the meta keys a repair lost are filled in from the other tables."""
    if not broken:
        return
    store_dir, backup_dir = Path(m.store_uri), Path(report["backup"])
    m.close()  # the store is opened again, after the repair
    from ..store import upkeep

    # nor does any other store object of this process touch a table a repair rolls back
    with upkeep.paused(os.path.realpath(store_dir)):
        _repair(store_dir, backup_dir, broken, report)


def _repair(
    store_dir: Path, backup_dir: Path, broken: list[TableHealth], report: dict[str, Any]
) -> None:
    """:func:`_repair_tables`' work, with upkeep paused."""
    for h in broken:
        try:
            report["actions"].extend(repair_table(h.path, backup_dir))
        except StoreError as exc:
            if h.name != "meta":
                report["problems"].append(_without_self(str(exc)))
                continue
            try:  # what meta holds can be derived again: never a reason to give up the store
                report["actions"].append(rebuild_meta(store_dir, backup_dir))
            except Exception as err:
                report["problems"].append(f"table meta: cannot make it anew: {err}")
    try:
        restored = restore_meta(store_dir)
    except Exception as exc:
        report["problems"].append(f"table meta: cannot read it after the repair: {exc}")
        return
    if restored:
        report["actions"].append(restored)


def _table_dirs_named(store_dir: Path, suffix: str) -> list[Path]:
    try:
        return sorted(store_dir.glob(f"*{suffix}{TABLE_SUFFIX}"))
    except OSError:
        return []


def _missing_fts(store_dir: Path, names: tuple[str, ...]) -> list[str]:
    """Tables of a local store (among ``names``) that have no full-text index."""
    import lance

    missing = []
    for name in names:
        path = store_dir / f"{name}{TABLE_SUFFIX}"
        if not path.is_dir():
            continue
        try:
            indices = lance.dataset(str(path)).list_indices()
        except Exception:
            continue  # damaged: reported by the table check
        if not any(i.get("type") == "Inverted" for i in indices):
            missing.append(name)
    return missing
