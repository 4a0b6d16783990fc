"""Hook captures on a really full file system (review finding 8): ENOSPC, not RLIMIT_FSIZE.

The home lives on a small tmpfs filled to the last byte. Hooks must exit 0 and print nothing
(fail open), and each capture they could not write must leave a trace that needs no new space
(:mod:`mimir_core.ingest.lost`), which ``mimir ingest`` and ``mimir doctor`` report once space is
back. Mounting needs root (CI runs as root in a container); the tests skip where mount is refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mimir_core import Mimir
from mimir_core.errors import MimirError, StoreError
from mimir_core.ingest import lost, spool

MIMIR = str(Path(sys.executable).parent / "mimir")


def failure(i: int) -> dict[str, object]:
    return {
        "session_id": "sess-full",
        "transcript_path": "/t.jsonl",
        "cwd": "/repo/payments",
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash",
        "tool_input": {"command": f"pytest tests/integration -k case{i}", "description": "tests"},
        "tool_use_id": f"toolu_{i}",
        "error": f'Exit code 1\nUndefinedTable: relation "orders{i}" does not exist',
        "is_interrupt": False,
    }


def env(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "MIMIR_HOME": str(home),
        "MIMIR_EMBEDDER": "hash",
        "MIMIR_AUTO_CONSOLIDATE": "0",
    }


def hook(home: Path, payload: dict[str, object]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [MIMIR, "hook", "claude-code"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
        env=env(home),
    )


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 16 MB tmpfs (root only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "fs"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"mount not permitted here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(fs: Path) -> Path:
    """Write a file until the file system is full (ENOSPC); returns it."""
    filler = fs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 65536, 4096, 512, 1):  # down to the last partial block
            try:
                while os.write(fd, b"\0" * size) == size:
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


@pytest.mark.parametrize("primed", [True, False], ids=["counter", "markers"])
def test_captures_lost_on_a_full_disk_are_counted_and_reported(
    small_fs: Path, primed: bool
) -> None:
    home = small_fs / "home"
    directory = spool.spool_dir(home)
    if primed:  # a hook wrote while there was room: the counter file exists
        assert hook(home, failure(0)).returncode == 0
        assert (directory / lost.COUNTER).is_file()
    else:  # the home exists (mimir setup), no hook ever ran: markers, not the counter
        home.mkdir(mode=0o700)
    filler = fill(small_fs)
    with pytest.raises(OSError):
        (small_fs / "probe").write_bytes(b"x" * 8192)
    for i in range(1, 41):
        proc = hook(home, failure(i))
        assert proc.returncode == 0 and proc.stdout == b"", proc.stderr
    # a line that still fits in the spool file's last allocated page is written: not lost
    pending = directory / spool.PENDING
    kept = len(spool.records(pending.read_bytes().splitlines())) if pending.exists() else 0
    gone = lost.read(directory)
    assert gone is not None and gone.reason == "disk full", vars(gone or {})
    assert gone.count == 40 - (kept - primed) and gone.count >= 20, (kept, gone.count)
    n = gone.count
    filler.unlink()
    first = subprocess.run(
        [MIMIR, "ingest", "--home", str(home)], capture_output=True, text=True, env=env(home)
    )
    assert first.returncode == 0, first.stderr
    assert f"ingested {kept} record(s)" in first.stdout
    assert f"{n} hook capture(s) were lost on" in first.stdout and "(disk full)" in first.stdout
    again = subprocess.run(
        [MIMIR, "ingest", "--home", str(home)], capture_output=True, text=True, env=env(home)
    )
    assert "lost" not in again.stdout  # reported once by ingest
    doctor = subprocess.run(
        [MIMIR, "doctor", "--home", str(home), "--json"],
        capture_output=True,
        text=True,
        env=env(home),
    )
    check = next(c for c in json.loads(doctor.stdout)["checks"] if c["check"] == "spool")
    assert not check["ok"] and f"{n} hook capture(s) were lost on" in check["detail"]
    m = Mimir(home, embedder="hash", auto_consolidate=False)
    from mimir_core.ops.doctor import repair, run_checks

    report = repair(m)
    assert any(f"cleared the notice: {n} hook capture(s)" in a for a in report["actions"])
    assert all(c["ok"] for c in run_checks(m) if c["check"] == "spool")


def test_consolidate_on_a_full_disk_is_a_mimir_error(small_fs: Path) -> None:
    home = small_fs / "home"
    m = Mimir(home, embedder="hash", auto_consolidate=False)
    for i in range(6):
        m.record(f"run the tests {i}", "pytest -x", "failure", reason="ImportError: no module")
    m.close()
    filler = fill(small_fs)
    try:
        Mimir(home, embedder="hash", auto_consolidate=False).consolidate()
    except MimirError:
        pass  # a clear error; a bare OSError would fail the test
    filler.unlink()


def test_consolidate_maps_a_failed_file_write_to_a_store_error(home: Path) -> None:
    m = Mimir(home, embedder="hash", auto_consolidate=False)
    m.record("run the tests", "pytest -x", "failure", reason="ImportError: no module")
    (home / "keys").write_text("not a directory")  # the signing key cannot be made
    with pytest.raises(StoreError, match="consolidate: cannot write"):
        m.consolidate()


def test_the_lost_counter_is_rewritten_in_place(tmp_path: Path) -> None:
    lost.prepare(tmp_path)
    path = tmp_path / lost.COUNTER
    inode, size = path.stat().st_ino, path.stat().st_size
    for _ in range(3):
        lost.note(tmp_path, OSError(28, "No space left on device"))
    assert (path.stat().st_ino, path.stat().st_size) == (inode, size)
    gone = lost.read(tmp_path)
    assert gone is not None and gone.count == 3 and gone.reason == "disk full"
    assert lost.clear(tmp_path) is not None and lost.read(tmp_path) is None
