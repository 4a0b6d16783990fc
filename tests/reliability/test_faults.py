"""Faults: a full disk, a read-only store, a corrupt spool line, damaged table files, a store
from a newer schema. Each gives a clear error (a ``MimirError`` naming the path and problem) or a
logged, counted skip; a hook never fails its host (exit 0); nothing is lost silently; and
``mimir doctor --repair`` repairs what can be repaired, after a backup, idempotently."""

from __future__ import annotations

import glob
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest

from mimir_core import Mimir
from mimir_core.errors import SchemaVersionError, StoreError
from mimir_core.ingest import spool
from mimir_core.ops.doctor import repair, run_checks
from mimir_core.store import core as store_mod
from mimir_core.store.integrity import read_meta

MIMIR = str(Path(sys.executable).parent / "mimir")
FAILURE = {
    "session_id": "sess-faults",
    "transcript_path": "/t.jsonl",
    "cwd": "/repo/payments",
    "hook_event_name": "PostToolUseFailure",
    "tool_name": "Bash",
    "tool_input": {"command": "pytest tests/integration", "description": "run the tests"},
    "tool_use_id": "toolu_9",
    "error": 'Exit code 1\nUndefinedTable: relation "orders" does not exist',
    "is_interrupt": False,
}


def open_m(home: Path) -> Mimir:
    return Mimir(home, embedder="hash", auto_consolidate=False)


def seeded(home: Path, n: int = 5) -> list[str]:
    """A store with ``n`` experiences, one commit each; their ids."""
    m = open_m(home)
    ids = [
        m.record(f"task {i}", f"act {i}", "success", idempotency_key=f"k{i}").id for i in range(n)
    ]
    m.close()
    return ids


def stored_keys(home: Path) -> list[str]:
    m = open_m(home)
    keys = m.store.column("experiences", ["idem_key"]).column("idem_key").to_pylist()
    m.close()
    return sorted(keys)


def env(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "MIMIR_HOME": str(home),
        "MIMIR_EMBEDDER": "hash",
        "MIMIR_AUTO_CONSOLIDATE": "0",
    }


def fsize_limit(limit: int) -> Callable[[], None]:
    """preexec_fn: files can grow to ``limit`` bytes, then writes fail with EFBIG (a full disk,
    without root or a mount; SIGXFSZ ignored so the write fails instead of killing)."""

    def limit_it() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_it


# -- full disk ---------------------------------------------------------------------------------


def test_full_disk_hook_exits_0_logs_and_keeps_earlier_records(home: Path) -> None:
    directory = spool.spool_dir(home)
    for i in range(5):
        spool.append(
            directory,
            {"task": f"t{i}", "action": "a", "outcome": "success", "idempotency_key": f"early-{i}"},
        )
    pending = directory / spool.PENDING
    before = pending.read_bytes()
    proc = subprocess.run(
        [MIMIR, "hook", "claude-code"],
        input=json.dumps(FAILURE).encode(),
        capture_output=True,
        timeout=60,
        env=env(home),
        preexec_fn=fsize_limit(len(before)),
    )
    assert proc.returncode == 0 and proc.stdout == b""
    assert pending.read_bytes() == before  # the line did not fit; the earlier ones are intact
    log = (home / "logs" / "hooks.log").read_text()
    assert "File too large" in log and "spool" in log  # logged: not a silent loss
    report = open_m(home).ingest()
    assert report.ingested == 5 and report.rejected == 0


STORE_WRITER = textwrap.dedent(
    """
    import sys
    from mimir_core import Mimir
    from mimir_core.errors import MimirError
    m = Mimir(sys.argv[1], embedder="hash", auto_consolidate=False)
    print(len(m.recall("task 1", k=5)), flush=True)  # reads work
    try:
        m.record("a task on a full disk", "act", "failure", reason="disk full")
    except MimirError as exc:
        print(type(exc).__name__, exc, flush=True)
    """
)


def test_full_disk_store_write_is_a_clear_error_and_the_store_survives(home: Path) -> None:
    seeded(home)
    before = stored_keys(home)
    proc = subprocess.run(
        [sys.executable, "-c", STORE_WRITER, str(home)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=fsize_limit(2048),
    )
    assert proc.returncode == 0, proc.stderr
    reads, error = proc.stdout.splitlines()[:2]
    assert int(reads) >= 1
    assert error.startswith("StoreError cannot write table experiences of store ")
    assert "File too large" in error
    assert stored_keys(home) == before  # opens, nothing lost
    m = open_m(home)
    m.record("after the disk was freed", "act", "success")
    assert m.stats().experiences == len(before) + 1


# -- read-only store ---------------------------------------------------------------------------


@contextmanager
def read_only(store: Path) -> Iterator[str]:
    """Make ``store`` read-only for this and every other process; yields how. Root ignores
    modes, so as root: a read-only bind mount (EROFS), else the immutable attribute (EPERM);
    otherwise a chmod. Skips the test only when none of these is possible."""
    paths = [store, *store.rglob("*")]
    if os.geteuid() != 0:
        modes = {p: stat.S_IMODE(p.stat().st_mode) for p in paths}
        for p in paths:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            yield "chmod"
        finally:
            for p in reversed(paths):
                p.chmod(modes[p])
        return
    s = str(store)
    mount = subprocess.run(["mount", "--bind", s, s], capture_output=True)
    if mount.returncode == 0:
        remount = subprocess.run(["mount", "-o", "remount,ro,bind", s], capture_output=True)
        try:
            if remount.returncode == 0:
                yield "read-only bind mount"
                return
        finally:
            subprocess.run(["umount", s], capture_output=True, check=True)
    chattr = shutil.which("chattr")
    if chattr and subprocess.run([chattr, "-R", "+i", s], capture_output=True).returncode == 0:
        try:
            yield "chattr +i"
        finally:
            subprocess.run([chattr, "-R", "-i", s], capture_output=True, check=True)
        return
    pytest.skip("running as root without mount or chattr: cannot make a store read-only")


def test_read_only_store_reads_work_writes_fail_clearly_hooks_spool(home: Path) -> None:
    seeded(home)
    before = stored_keys(home)

    def run(args: list[str], data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(args, input=data, capture_output=True, timeout=120, env=env(home))

    with read_only(home / "store") as how:
        proc = run([sys.executable, "-c", STORE_WRITER, str(home)])
        assert proc.returncode == 0, (how, proc.stderr)
        reads, error = proc.stdout.decode().splitlines()[:2]
        assert int(reads) >= 1, how
        assert error.startswith("StoreError cannot write table experiences of store "), how
        assert any(w in error for w in ("denied", "Read-only", "not permitted")), error
        hook = run([MIMIR, "hook", "claude-code"], json.dumps(FAILURE).encode())
        assert hook.returncode == 0 and hook.stdout == b""
        assert spool.has_pending(spool.spool_dir(home))  # captured, waiting for a writable store
        ingest = run([MIMIR, "ingest", "--home", str(home)])
        assert ingest.returncode == 1
        assert ingest.stderr.startswith(b"mimir: error: cannot write table experiences"), (
            ingest.stderr
        )
        assert spool.has_pending(spool.spool_dir(home))  # kept for the next drain
    assert stored_keys(home) == before
    # writable again: the spooled record arrives, exactly once
    report = open_m(home).ingest()
    assert report.ingested == 1 and len(stored_keys(home)) == len(before) + 1


# -- corrupt spool line ------------------------------------------------------------------------


def test_a_corrupt_spool_line_is_set_aside_counted_and_reported(home: Path) -> None:
    """Set-aside itself: tests/unit/test_spool.py; here the doctor reports it."""
    m = open_m(home)
    directory = m.spool_dir
    spool.append(
        directory, {"task": "t", "action": "a", "outcome": "success", "idempotency_key": "good"}
    )
    with open(directory / spool.PENDING, "ab") as fh:
        fh.write(b'{"v": 1, "record": {"task": "cut off by a cra\n')
    report = m.ingest()
    assert (report.ingested, report.rejected) == (1, 1)
    check = {c["check"]: c for c in run_checks(m)}["spool"]
    assert check["ok"] and "1 bad line(s) set aside" in check["detail"]
    assert "1 bad spool line(s) set aside" in repair(m)["notes"][0]


# -- damaged table files -----------------------------------------------------------------------


def _newest(pattern: str) -> Path:
    return Path(max(glob.glob(pattern), key=os.path.getmtime))


def _newest_manifest(table: Path) -> Path:
    return Path(min(glob.glob(str(table / "_versions" / "*.manifest"))))  # v2 names count down


DAMAGE: dict[str, tuple[str, Callable[[Path], None], int]] = {
    # name: (table, damage, experiences after the repair)
    "deleted data file": (
        "experiences",
        lambda t: _newest(str(t / "data" / "*.lance")).unlink(),
        4,
    ),
    "truncated data file": (
        "experiences",
        lambda t: os.truncate(_newest(str(t / "data" / "*.lance")), 100),
        4,
    ),
    "truncated manifest": ("experiences", lambda t: os.truncate(_newest_manifest(t), 40), 4),
    "deleted meta data file": (
        "meta",
        lambda t: [Path(p).unlink() for p in glob.glob(str(t / "data" / "*"))],
        5,
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_table_is_named_diagnosed_and_rolled_back(home: Path, damage: str) -> None:
    table, hurt, after = DAMAGE[damage]
    seeded(home)
    hurt(home / "store" / f"{table}.lance")
    with pytest.raises(StoreError) as err:
        open_m(home).stats()
    assert f"table {table}" in str(err.value) and "mimir doctor --repair" in str(err.value)
    m = open_m(home)
    checks = {c["check"]: c for c in run_checks(m)}
    assert not checks["tables"]["ok"] and f"{table}:" in checks["tables"]["detail"]
    report = repair(m)
    assert not report["problems"], report
    assert any(f"table {table}: " in a for a in report["actions"]), report
    assert read_meta(home / "store")["schema_version"] == str(store_mod.SCHEMA_VERSION)
    if table == "meta":  # the lost version is read off the tables, not guessed
        assert any(f"schema_version={store_mod.SCHEMA_VERSION}" in a for a in report["actions"])
    backup = Path(report["backup"])
    assert stat.S_IMODE(backup.stat().st_mode) == 0o700
    assert (backup / "store" / f"{table}.lance").is_dir()
    m.close()
    m = open_m(home)
    assert m.stats().experiences == after
    assert m.store.meta()["embed_model"] == "hash-v1"  # a lost meta row is rebuilt, not guessed
    assert m.recall("task 1", k=1)
    again = repair(m)
    assert again == {"backup": None, "actions": [], "problems": [], "notes": []}


def test_without_an_intact_version_broken_fragments_are_dropped_and_counted(home: Path) -> None:
    import lance

    seeded(home, 3)
    m = open_m(home)
    m.store.optimize("experiences", cleanup_older_than=timedelta(0))
    m.record("task late 1", "act", "success")
    m.record("task late 2", "act", "success")
    m.close()
    table = home / "store" / "experiences.lance"
    lance.dataset(str(table)).cleanup_old_versions(older_than=timedelta(0))
    _newest(str(table / "data" / "*.lance")).unlink()
    m = open_m(home)
    report = repair(m)
    assert not report["problems"], report
    assert any("1 row(s) lost" in a for a in report["actions"]), report
    m.close()
    assert open_m(home).stats().experiences == 4


def test_doctor_repair_cli_reports_json_and_is_idempotent(home: Path) -> None:
    seeded(home)
    os.truncate(_newest(str(home / "store" / "experiences.lance" / "data" / "*.lance")), 10)
    (home / "keys").mkdir(exist_ok=True)
    home.chmod(0o755)
    cmd = [MIMIR, "doctor", "--home", str(home), "--json"]  # diagnosis: see the tests above
    first = subprocess.run(
        [*cmd, "--repair"], capture_output=True, text=True, timeout=120, env=env(home)
    )
    assert first.returncode == 0, first.stderr
    done = json.loads(first.stdout)
    assert done["backup"] and done["actions"] and not done["problems"]
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    second = subprocess.run(
        [*cmd, "--repair"], capture_output=True, text=True, timeout=120, env=env(home)
    )
    assert json.loads(second.stdout) == {"backup": None, "actions": [], "problems": [], "notes": []}
    diag = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env(home))
    assert diag.returncode == 0, diag.stdout


def test_an_interrupted_drain_is_requeued_by_repair(home: Path) -> None:
    m = open_m(home)
    directory = m.spool_dir
    for i in range(3):
        spool.append(
            directory,
            {"task": f"t{i}", "action": "a", "outcome": "success", "idempotency_key": f"left-{i}"},
        )
    (directory / spool.PENDING).rename(directory / f"{spool.BATCH_PREFIX}1-99.jsonl")
    check = {c["check"]: c for c in run_checks(m)}["spool"]
    assert not check["ok"] and "interrupted drain" in check["detail"]
    report = repair(m)
    assert any("ingested 3 record(s)" in a for a in report["actions"]), report
    assert m.stats().experiences == 3 and not spool.has_pending(directory)


# -- newer schema ------------------------------------------------------------------------------


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()
    }


def test_a_newer_schema_is_refused_naming_both_versions_and_left_untouched(home: Path) -> None:
    seeded(home, 2)
    m = open_m(home)
    newer = store_mod.SCHEMA_VERSION + 1
    m.store.set_meta({"schema_version": str(newer)})
    m.close()
    before = _tree(home / "store")
    with pytest.raises(SchemaVersionError) as err:
        open_m(home).stats()
    assert f"schema version {newer}" in str(err.value)
    assert f"({store_mod.SCHEMA_VERSION})" in str(err.value)
    report = repair(open_m(home))
    assert report["problems"] and f"schema version {newer}" in report["problems"][0]
    assert report["backup"] is None and not report["actions"]
    assert _tree(home / "store") == before
