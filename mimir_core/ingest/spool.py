"""The capture spool: hook processes append, a long-lived process drains (stdlib only).

A hook runs once per tool call, so it must not import LanceDB or a model. It appends one JSON
line per experience to ``pending.jsonl`` in the store's spool directory with a single
``O_APPEND`` write of less than :data:`MAX_LINE` bytes, which concurrent writers never tear.

A process that has the store open drains the spool exactly once:

1. under the drain lock, ``pending.jsonl`` is renamed to ``batch-<ns>-<pid>.jsonl`` (atomic:
   hooks that append afterwards start a new ``pending.jsonl``);
2. each batch file is ingested in chunks through a caller-supplied ``ingest(items)`` that stores
   records idempotently by the key the hook generated at capture time;
3. the batch file is deleted only after every chunk is stored.

A crash between 2 and 3 leaves the batch file, and the next drain ingests it again: the keys make
that re-ingestion a no-op, so nothing is lost and nothing is duplicated. Lines that are not valid
JSON records, or that the store rejects as invalid, are appended to ``rejected.jsonl`` with the
reason and counted in the :class:`DrainReport`, never dropped silently.

A line is ``{"v": 1, "record": {...}}`` where ``record`` holds :meth:`Mimir.record` arguments
including ``idempotency_key``.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ..ingest import lost

__all__ = [
    "MAX_LINE",
    "DrainReport",
    "SpoolError",
    "append",
    "append_json",
    "drain",
    "encode_line",
    "has_pending",
    "spool_dir",
]

LINE_VERSION = 1
#: Largest line in bytes (newline included): a single write this small is never torn.
MAX_LINE = 4000
PENDING = "pending.jsonl"
REJECTED = "rejected.jsonl"
BATCH_PREFIX = "batch-"
LOCK = "drain.lock"
#: Records per ``ingest`` call (one embedding batch and one append each).
DRAIN_CHUNK = 512


class SpoolError(StoreError):
    """The spool cannot be written or locked (hooks log it and fail open)."""


class DrainReport:
    """What one drain did: records ingested, lines set aside (with the first reasons), batch
    files processed."""

    def __init__(self) -> None:
        self.ingested = 0
        self.rejected = 0
        self.batches = 0
        self.reasons: list[str] = []
        self.lost: str | None = None
        """Hook captures lost to failed writes since the last report (see :mod:`.lost`)."""

    def __repr__(self) -> str:
        return (
            f"DrainReport(ingested={self.ingested}, rejected={self.rejected}, "
            f"batches={self.batches})"
        )


def spool_dir(home: str | os.PathLike[str], store_uri: str | None = None) -> Path:
    """The spool directory of a store: ``<home>/spool/local`` for the home's own store,
    ``<home>/spool/<hash of the URI>`` for a store elsewhere (``s3://...``, another path)."""
    home_path = Path(home).expanduser()
    default = home_path / "store"
    if not store_uri or _same_path(store_uri, default):
        return home_path / "spool" / "local"
    from ..lessons.sign import sha256_hex  # hooks call this: no OpenSSL import

    digest = sha256_hex(store_uri.rstrip("/").encode("utf-8"))[:16]
    return home_path / "spool" / digest


def _same_path(uri: str, path: Path) -> bool:
    if "://" in uri:
        return False
    return os.path.abspath(os.path.expanduser(uri)) == os.path.abspath(path)


def _ensure_dir(path: Path) -> None:
    """Create ``path`` and its missing parents, each 0700 (``mkdir(parents=True)`` would give
    the parents the umask's default mode, e.g. 0755)."""
    for attempt in range(3):
        missing: list[Path] = []
        d = path
        while not d.exists() and d != d.parent:
            missing.append(d)
            d = d.parent
        try:
            for d in reversed(missing):
                try:
                    d.mkdir(mode=0o700)
                except FileExistsError:
                    continue
            return
        except FileNotFoundError:  # another process removed a parent meanwhile: start again
            if attempt == 2:
                raise


ensure_private_dir = _ensure_dir


def replace_file(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically: a private (0600) temporary file beside it,
    renamed over it only once every byte is written (``durable``: and synced). A short write (a
    full disk) raises ``OSError`` and leaves the old file whole; the temporary file never stays.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            written = os.write(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if written != len(data):
            raise OSError(f"short write to {tmp} ({written} of {len(data)} bytes)")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# -- writing (the hook side) -----------------------------------------------------------------


def encode_line(record: Mapping[str, Any], max_bytes: int = MAX_LINE) -> bytes:
    """One spool line for ``record``; when too long, every string is capped at one length, the
    largest that fits (short fields stay whole, long ones keep their head)."""

    def encode(rec: Any) -> bytes:
        line = {"v": LINE_VERSION, "record": rec}
        return (json.dumps(line, ensure_ascii=False, default=str) + "\n").encode("utf-8")

    data = encode(dict(record))
    limit = max_bytes
    while len(data) > max_bytes:
        limit = int(limit * 0.7)
        if limit < 8:
            raise SpoolError(f"record cannot be made to fit in {max_bytes} bytes")
        data = encode(_cap_strings(dict(record), limit))
    return data


def _cap_strings(value: Any, limit: int) -> Any:
    """``value`` with every string longer than ``limit`` characters cut to its head."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[: max(limit - 6, 1)] + "…[cut]"
    if isinstance(value, dict):
        return {k: _cap_strings(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_cap_strings(v, limit) for v in value]
    return value


def append(directory: str | os.PathLike[str], record: Mapping[str, Any]) -> None:
    """Append one record to the spool with a single ``O_APPEND`` write (files are 0600)."""
    line = encode_line(record)
    path = Path(directory)
    try:
        _ensure_dir(path)
        append_bytes(path / PENDING, line)
    except OSError as exc:
        raise SpoolError(f"cannot write spool {path / PENDING}: {exc}") from exc
    lost.prepare(path)  # while there is room: the trace of a later failed write (see .lost)


def append_json(path: str | os.PathLike[str], obj: Mapping[str, Any]) -> None:
    """Append ``obj`` as one JSON line to the file at ``path`` (created 0600) with a single
    ``O_APPEND`` write: the session step logs, ``rejected.jsonl``."""
    append_bytes(Path(path), (json.dumps(obj, ensure_ascii=False, default=str) + "\n").encode())


def append_bytes(path: Path, data: bytes) -> None:
    """One ``O_APPEND`` write of ``data`` to the file that is *still* named ``path``.

    A reader takes a file away by renaming it (:func:`set_aside`) and then waits for the writers
    already in it (:func:`settle`). A writer holds the file's lock while it writes, and checks
    under that lock that the name still points at the file it opened; if a rename got in between,
    it writes to the new file instead. So no line ever lands in a file that was already read.

    The lock is exclusive (a write takes microseconds) so that a short write (a full disk) can be
    undone: the file is truncated back to where the line began, and the next line does not get
    glued onto a torn fragment (which would make both unreadable).
    """
    for _ in range(32):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            mine = os.fstat(fd)
            try:
                named = os.stat(path)
            except FileNotFoundError:
                continue  # set aside after we opened it: write to a new file
            if (mine.st_ino, mine.st_dev) != (named.st_ino, named.st_dev):
                continue
            written = os.write(fd, data)
            if written != len(data):  # a full disk mid-write: take the fragment back
                os.ftruncate(fd, mine.st_size)
                raise OSError(
                    errno.ENOSPC, f"short write to {path} ({written} of {len(data)} bytes)"
                )
            return
        finally:
            os.close(fd)  # releases the lock
    raise OSError(f"{path} kept being set aside while appending")  # pragma: no cover


def set_aside(path: Path, target: Path) -> bool:
    """Rename ``path`` to ``target`` if it holds anything, and wait for writers still in it.

    Atomic: writers that append afterwards start a new ``path``. Returns whether it did."""
    try:
        if path.stat().st_size > 0:
            os.rename(path, target)
            settle(target)
            return True
    except FileNotFoundError:
        pass
    return False


def rewrite(path: Path, keep: Callable[[bytes], bool]) -> int:
    """Drop the lines of ``path`` for which ``keep`` is false; returns how many were dropped.

    Writers are excluded the way :func:`settle` excludes them: the old file is locked while the
    filtered copy replaces it, so a writer waiting on it re-checks the name and appends to the new
    file (see :func:`append_bytes`); no concurrent line is lost."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with os.fdopen(os.dup(fd), "rb") as f:
            lines = f.read().splitlines(keepends=True)
        kept = [line for line in lines if keep(line)]
        if len(kept) == len(lines):
            return 0
        replace_file(path, b"".join(kept))  # a full disk keeps the old file whole
        return len(lines) - len(kept)
    finally:
        os.close(fd)


def settle(path: Path) -> None:
    """Wait until no writer is in the middle of appending to ``path`` (see :func:`append_bytes`)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    finally:
        os.close(fd)


# -- draining (the long-lived side) ----------------------------------------------------------


def has_pending(directory: str | os.PathLike[str]) -> bool:
    """Whether anything waits to be drained (one ``stat``, plus a listing if a drain crashed)."""
    path = Path(directory)
    try:
        if os.stat(path / PENDING).st_size > 0:
            return True
    except OSError:
        pass
    try:
        with os.scandir(path) as it:
            return any(e.name.startswith(BATCH_PREFIX) for e in it)
    except OSError:
        return False


def drain_lock(directory: Path, timeout: float = 60.0) -> AbstractContextManager[None]:
    """Hold the spool's drain lock (one drainer at a time, across processes)."""
    from ..store.locking import FileLock

    return FileLock(directory / LOCK, timeout, error=SpoolError).hold()


Ingest = Callable[[list[dict[str, Any]]], object]
"""Stores a list of record mappings at once (idempotent by ``idempotency_key``)."""
IsInvalid = Callable[[Exception], bool]
"""Whether an exception from ``ingest`` means the records are invalid (not a store failure)."""


def drain(
    directory: str | os.PathLike[str],
    ingest: Ingest,
    *,
    is_invalid: IsInvalid = lambda exc: isinstance(exc, ValueError),
    chunk: int = DRAIN_CHUNK,
    lock_timeout: float = 60.0,
    before: Callable[[], object] | None = None,
) -> DrainReport:
    """Drain the spool in ``directory`` into ``ingest``, exactly once (see the module doc).

    ``before`` runs under the drain lock before the pending file is taken (the capture package
    uses it to close stale episodes into the spool). An exception from ``ingest`` for which
    ``is_invalid`` is false (the store is down, a lock timed out) propagates and leaves the
    batch file in place for the next drain.
    """
    path = Path(directory)
    report = DrainReport()
    if not path.exists():
        return report
    with drain_lock(path, lock_timeout):
        if before is not None:
            before()
        fresh = path / f"{BATCH_PREFIX}{time.time_ns()}-{os.getpid()}.jsonl"
        set_aside(path / PENDING, fresh)  # settles it
        for batch in sorted(p for p in path.iterdir() if p.name.startswith(BATCH_PREFIX)):
            if batch != fresh:
                settle(batch)  # left by a crashed drain: a writer may still be in it
            _drain_file(batch, path / REJECTED, ingest, is_invalid, chunk, report)
            os.unlink(batch)
            report.batches += 1
    return report


def _drain_file(
    batch: Path,
    rejected: Path,
    ingest: Ingest,
    is_invalid: IsInvalid,
    chunk: int,
    report: DrainReport,
) -> None:
    items: list[tuple[int, bytes, dict[str, Any]]] = []
    with open(batch, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            record, why = _parse(raw)
            if record is None:
                _reject(rejected, batch.name, lineno, raw, why, report)
            else:
                items.append((lineno, raw, record))
    for start in range(0, len(items), chunk):
        part = items[start : start + chunk]
        try:
            ingest([rec for _n, _raw, rec in part])
            report.ingested += len(part)
        except Exception as exc:
            if not is_invalid(exc):
                raise
            for lineno, raw, rec in part:  # find the bad ones; the rest are stored one by one
                try:
                    ingest([rec])
                    report.ingested += 1
                except Exception as one:
                    if not is_invalid(one):
                        raise
                    _reject(rejected, batch.name, lineno, raw, f"invalid record: {one}", report)


def _parse(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return None, f"not JSON ({exc})"
    if not isinstance(obj, dict) or not isinstance(obj.get("record"), dict):
        return None, "not a spool record (expected an object with a 'record' object)"
    if obj.get("v") != LINE_VERSION:
        return None, f"unknown spool line version {obj.get('v')!r}"
    record = obj["record"]
    if not isinstance(record.get("idempotency_key"), str) or not record["idempotency_key"]:
        return None, "record has no idempotency_key"
    return record, ""


def _reject(
    rejected: Path, batch: str, lineno: int, raw: bytes, why: str, report: DrainReport
) -> None:
    entry = {
        "batch": batch,
        "line": lineno,
        "reason": why[:500],
        "raw": raw.decode("utf-8", "replace")[:MAX_LINE],
        "at": time.time(),
    }
    append_json(rejected, entry)
    report.rejected += 1
    if len(report.reasons) < 20:
        report.reasons.append(f"{batch}:{lineno}: {why[:200]}")


def rejected_count(directory: str | os.PathLike[str]) -> int:
    """How many lines have been set aside in ``rejected.jsonl`` so far."""
    try:
        with open(Path(directory) / REJECTED, "rb") as fh:
            return sum(1 for line in fh if line.strip())
    except OSError:
        return 0


def records(lines: Sequence[bytes]) -> list[dict[str, Any]]:
    """The records of raw spool lines (for tests and tools); invalid lines are skipped."""
    out = []
    for raw in lines:
        rec, _why = _parse(raw)
        if rec is not None:
            out.append(rec)
    return out
