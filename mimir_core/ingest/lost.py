"""A trace of hook captures lost to a failed write, that survives a full disk (stdlib only).

A hook fails open: when the spool cannot be written (a full disk), it exits 0 and the capture is
gone. Its log line usually cannot be written either, so without a trace that needs no new disk
space the loss would be silent. Two traces, tried in order:

1. ``lost.count``, a small fixed-size counter file made beforehand (after a spool write that
   succeeded, so while there was room). Updating it rewrites its bytes in place, under a lock:
   on ext4, xfs and tmpfs that needs no new block, so it works on a full disk.
2. Failing that (no counter yet, or a copy-on-write file system that allocates on every write),
   an *empty* marker file ``lost-<time ns>-<pid>-<reason>``: a directory entry and an inode, no
   data block.

``mimir ingest`` reports new losses once, ``mimir doctor`` reports them until ``mimir doctor
--repair`` clears the notice (the records themselves cannot be recovered).
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

COUNTER = "lost.count"
MARKER = "lost-"
#: Bytes of the counter file: count, first and last loss (epoch seconds), count reported,
#: reason; fixed width, so an update never changes the file's size.
SIZE = 64
_REASONS = {
    errno.ENOSPC: "disk full",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EIO: "I/O error",
}


class Lost:
    """Hook captures lost so far: how many, when (first and last, epoch seconds), why, and how
    many of them ``ingest`` already reported."""

    def __init__(self, count: int, first: float, last: float, reason: str, reported: int) -> None:
        self.count, self.first, self.last = count, first, last
        self.reason, self.reported = reason, reported

    def describe(self) -> str:
        day = time.strftime("%Y-%m-%d", time.gmtime(self.first))
        end = time.strftime("%Y-%m-%d", time.gmtime(self.last))
        span = time.strftime("%H:%M", time.gmtime(self.first))
        until = time.strftime("%H:%M", time.gmtime(self.last))
        when = f"on {day} ({span}-{until} UTC)" if day == end else f"from {day} to {end}"
        return f"{self.count} hook capture(s) were lost {when} ({self.reason})"


def reason_of(exc: BaseException) -> str:
    """A short reason for a failed write (the errno of the ``OSError`` in its chain)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno is not None:
            return _REASONS.get(seen.errno, errno.errorcode.get(seen.errno, "write failed"))
        seen = seen.__cause__ or seen.__context__
    return "write failed"


Fields = tuple[int, float, float, int, str]
"""(count, first, last, reported, reason) of the counter file."""


def _pack(count: int, first: float, last: float, reported: int, reason: str) -> bytes:
    tag = reason.replace(" ", "_")[:18] or "-"
    text = f"{count} {int(first)} {int(last)} {reported} {tag}"
    return text.encode("ascii", "replace")[: SIZE - 1].ljust(SIZE - 1) + b"\n"


def _unpack(data: bytes) -> Fields:
    try:
        count, first, last, reported, tag = data.decode("ascii").split()[:5]
        why = "" if tag == "-" else tag.replace("_", " ")
        return int(count), float(first), float(last), int(reported), why
    except ValueError:
        return 0, 0.0, 0.0, 0, ""


def prepare(directory: str | os.PathLike[str]) -> None:
    """Make the counter file if it is missing (call while there is room). Never raises."""
    path = Path(directory) / COUNTER
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return  # there already (the usual case), or no room: the marker files remain
    try:
        os.write(fd, _pack(0, 0, 0, 0, ""))
    except OSError:
        pass
    finally:
        os.close(fd)


def note(directory: str | os.PathLike[str], exc: BaseException) -> None:
    """Count one lost capture (see the module doc). Never raises."""
    reason = reason_of(exc)
    now = time.time()
    try:
        _update(Path(directory) / COUNTER, lambda v: (v[0] + 1, v[1] or now, now, v[3], reason))
        return
    except OSError:
        pass
    name = f"{MARKER}{time.time_ns()}-{os.getpid()}-{reason.replace(' ', '_')}"
    for where in _places(directory):  # the spool directory may not exist yet (no room for it)
        try:
            os.close(os.open(where / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            return
        except OSError:
            continue  # nothing at all can be written there


def _update(path: Path, change: Callable[[Fields], Fields]) -> None:
    """Rewrite the counter in place (same size) under its lock."""
    fd = os.open(path, os.O_RDWR)  # never created here: that would need room
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        count, first, last, reported, reason = change(_unpack(os.pread(fd, SIZE, 0)))
        new = _pack(count, first, last, reported, reason)
        if os.pwrite(fd, new, 0) != len(new):
            raise OSError(errno.ENOSPC, "short write")
    finally:
        os.close(fd)


def _places(directory: str | os.PathLike[str]) -> list[Path]:
    """Where markers go: the spool directory, else its parent (``<home>/spool``), else the
    home, whichever exists first."""
    path = Path(directory)
    return [path, path.parent, path.parent.parent]


def _markers(directory: Path) -> list[tuple[float, str, Path]]:
    out: list[tuple[float, str, Path]] = []
    entries: list[os.DirEntry[str]] = []
    for where in _places(directory):
        try:
            entries += list(os.scandir(where))
        except OSError:
            continue
    for e in entries:
        if e.name.startswith(MARKER):
            parts = e.name[len(MARKER) :].split("-", 2)
            try:
                out.append((int(parts[0]) / 1e9, parts[2].replace("_", " "), Path(e.path)))
            except (ValueError, IndexError):
                continue
    return out


def read(directory: str | os.PathLike[str]) -> Lost | None:
    """The captures lost in this spool directory so far (``None``: none)."""
    count, first, last, reported, reason = 0, 0.0, 0.0, 0, ""
    try:
        with open(Path(directory) / COUNTER, "rb") as fh:
            count, first, last, reported, reason = _unpack(fh.read(SIZE))
    except OSError:
        pass
    for ts, why, _path in _markers(Path(directory)):
        count += 1
        first = min(first, ts) if first else ts
        last = max(last, ts)
        reason = reason or why
    return Lost(count, first, last, reason or "write failed", reported) if count else None


def mark_reported(directory: str | os.PathLike[str]) -> None:
    """Remember that every loss counted so far was reported (``ingest`` reports each once)."""
    lost = read(directory)
    if lost is None:
        return
    total = lost.count
    prepare(directory)  # only markers so far: the counter keeps what was reported
    try:
        _update(Path(directory) / COUNTER, lambda v: (v[0], v[1], v[2], total, v[4]))
    except OSError:
        pass


def clear(directory: str | os.PathLike[str]) -> Lost | None:
    """Reset the counter and remove the markers (``doctor --repair``); what was cleared."""
    lost = read(directory)
    if lost is None:
        return None
    try:
        _update(Path(directory) / COUNTER, lambda _v: (0, 0.0, 0.0, 0, ""))
    except OSError:
        pass
    for _ts, _why, path in _markers(Path(directory)):
        try:
            path.unlink()
        except OSError:
            pass
    return lost
