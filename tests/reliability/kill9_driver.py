"""The kill -9 driver of ``test_kill9.py``: ``python kill9_driver.py HOME KILLS SEED``.

It imports Mimir once, then forks four kinds of real processes that work on one store at once:

* ``writer``: ``Mimir.record`` with idempotency keys ``w-<i>``; acknowledges a key (appends it to
  ``acks/writer``) only after the call returned; a restarted writer retries the unacknowledged
  key first, as a client would;
* ``hook``: appends spool lines (the hook path, stdlib only) with keys ``h-<i>``, acknowledged
  once the append returned;
* ``drainer``: ``Mimir.ingest`` in a loop;
* ``consolidator``: ``Mimir.consolidate`` in a loop.

Round after round it waits a seeded random moment and SIGKILLs one of them (in turn), then starts
it again, ``KILLS`` times per kind. Forking after the imports keeps a restart cheap; no store is
opened before a fork. Prints a JSON summary; the test checks the store.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from pathlib import Path

import lancedb  # noqa: F401  (imported once here, so that a forked restart is cheap)
import pyarrow  # noqa: F401

from mimir_core import Mimir
from mimir_core.ingest import spool

ROLES = ("writer", "hook", "drainer", "consolidator")
TASKS = (
    ("run the payments integration tests", "pytest tests/integration", "UndefinedTable: orders"),
    ("build the docs site", "mkdocs build --strict", "Config file mkdocs.yml not found"),
    ("lint the python sources", "ruff check .", "E501 line too long"),
)


def _open(home: str, acks: Path | None = None) -> Mimir:
    m = Mimir(home, embedder="hash", auto_consolidate=False)
    m.store  # noqa: B018  (open it now)
    if acks is not None:  # tell the driver the store is open: kills land in the work
        _ack(acks.with_name(acks.name + ".ready"), str(os.getpid()))
    return m


def _ack(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def _acked(path: Path) -> list[str]:
    try:
        return [x for x in path.read_text().splitlines() if x]
    except FileNotFoundError:
        return []


def _record(i: int, prefix: str) -> dict[str, object]:
    task, action, reason = TASKS[i % len(TASKS)]
    ok = i % 3 == 0
    return {
        "task": f"{task} ({prefix}{i % 7})",
        "action": action if not ok else f"{action} --fixed",
        "outcome": "success" if ok else "failure",
        "reason": "" if ok else reason,
        "idempotency_key": f"{prefix}-{i}",
    }


def writer(home: str, acks: Path) -> None:
    done = _acked(acks)
    i = max((int(k.split("-")[1]) for k in done), default=-1) + 1  # retry the one in flight
    m = _open(home, acks)
    while True:
        rec = _record(i, "w")
        m.record(**rec)  # type: ignore[arg-type]
        _ack(acks, str(rec["idempotency_key"]))
        i += 1


def hook(home: str, acks: Path) -> None:
    done = _acked(acks)
    i = max((int(k.split("-")[1]) for k in done), default=-1) + 1
    directory = spool.spool_dir(home)
    _ack(acks.with_name("hook.ready"), str(os.getpid()))
    while True:
        rec = _record(i, "h")
        spool.append(directory, rec)
        _ack(acks, str(rec["idempotency_key"]))
        i += 1
        time.sleep(0.02)


def drainer(home: str, acks: Path) -> None:
    m = _open(home, acks)
    while True:
        report = m.ingest(compact=True, lock_timeout=120)
        _ack(acks, f"drained {report.ingested}")
        time.sleep(0.05)


def consolidator(home: str, acks: Path) -> None:
    m = _open(home, acks)
    while True:
        report = m.consolidate()
        _ack(acks, f"consolidated {len(report.admitted)}")


def spawn(role: str, home: str, acks: Path) -> int:
    pid = os.fork()
    if pid == 0:  # the child: do the work until killed
        code = 0
        try:
            os.setpgid(0, 0)
            globals()[role](home, acks / role)
        except BaseException as exc:  # a crash (not a kill) is a finding: report it
            _ack(acks / f"{role}.errors", f"{type(exc).__name__}: {exc}")
            code = 1
        os._exit(code)
    return pid


def _wait_ready(path: Path, pid: int, timeout: float = 120.0) -> None:
    """Until the process ``pid`` has opened the store (or died, or the timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and str(pid) not in _acked(path):
        if os.waitpid(pid, os.WNOHANG)[0]:
            raise SystemExit(f"{path.name}: process {pid} died before it was ready")
        time.sleep(0.02)


def main() -> None:
    home, kills, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    acks = Path(home) / "acks"
    acks.mkdir(parents=True, exist_ok=True)
    first = os.fork()  # create the store in a child: this process never opens one
    if first == 0:
        _open(home).stats()
        os._exit(0)
    assert os.waitpid(first, 0)[1] == 0, "could not create the store"
    pids = {role: spawn(role, home, acks) for role in ROLES}
    killed = dict.fromkeys(ROLES, 0)
    crashed = dict.fromkeys(ROLES, 0)
    start = time.monotonic()
    for n in range(kills * len(ROLES)):
        role = ROLES[n % len(ROLES)]
        _wait_ready(acks / f"{role}.ready", pids[role])
        time.sleep(rng.uniform(0.1, 2.5))
        done, _status = os.waitpid(pids[role], os.WNOHANG)
        if done:  # it died on its own: a crash, reported
            crashed[role] += 1
        else:
            os.kill(pids[role], signal.SIGKILL)
            os.waitpid(pids[role], 0)
            killed[role] += 1
        pids[role] = spawn(role, home, acks)
    for role, pid in pids.items():  # the last ones too
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        killed[role] += 1
    errors = {r: _acked(acks / f"{r}.errors") for r in ROLES}
    summary = {
        "killed": killed,
        "crashed": crashed,
        "errors": {r: e[:5] for r, e in errors.items() if e},
        "acked_writer": _acked(acks / "writer"),
        "acked_hook": _acked(acks / "hook"),
        "drains": len(_acked(acks / "drainer")),
        "consolidations": len(_acked(acks / "consolidator")),
        "seconds": round(time.monotonic() - start, 1),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
