"""Auto-consolidation: after enough new failures and enough time, consolidate in the background.

After a capture or a recall, :func:`maybe_start` checks (cheaply, at most once a minute per
process) whether at least ``auto_consolidate_failures`` failures arrived since the last run and
``auto_consolidate_hours`` passed since it (or since the store was created). If so it starts a
**detached process** (``python -m mimir_core.lessons.auto``, its own session) so that a
short-lived CLI or hook process exiting does not lose the run; its output goes to
``<home>/logs/consolidate.log``. The child gets its configuration, signing key included, on stdin
(never on the command line). With an embedder object that a new process cannot rebuild, a daemon
thread runs it instead. Several starters are harmless: consolidation is single-flight.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..deps import Deps

log = logging.getLogger("mimir.lessons")

#: Seconds between two checks in one process.
CHECK_EVERY = 60.0


def log_path(home: Path) -> Path:
    """``<home>/logs/consolidate.log``."""
    return Path(home) / "logs" / "consolidate.log"


def _last_run(deps: Deps) -> float:
    """When the last run finished, else when the store was created (epoch seconds)."""
    from .consolidate import LAST_RUN, state_path

    try:
        return float(json.loads(state_path(deps.home).read_text(encoding="utf-8"))["last_run"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    meta = deps.store.meta()
    for key in (LAST_RUN, "created_at"):
        try:
            return datetime.fromisoformat(meta[key]).timestamp()
        except (KeyError, ValueError):
            continue
    return time.time()


def due(deps: Deps, *, now: float | None = None, new_failures: int = 0) -> bool:
    """Whether an automatic consolidation should start now.

    Checked at most once a minute per process, except when the failures this process recorded
    since the last check make up the shortfall it found.
    """
    from ..store.core import EXPERIENCES
    from ..store.filters import And, Eq, Range
    from .consolidate import WATERMARK

    if not deps.auto.enabled:
        return False
    now = time.time() if now is None else now
    if now - deps.state.auto_checked_at < CHECK_EVERY:
        # Within the minute, only this process's new failures can make it due: they are
        # counted down from the shortfall the last check found (the check reads the store's
        # meta and counts failures, ~5 ms: it ran on every failure recorded).
        deps.state.auto_short = deps.state.auto_short - new_failures
        if not new_failures or deps.state.auto_short > 0:
            return False
    deps.state.auto_checked_at = now
    if now - _last_run(deps) < deps.auto.hours * 3600.0:
        deps.state.auto_short = 1 << 62  # not before the next minute's check
        return False
    try:
        since = float(json.loads(deps.store.meta().get(WATERMARK) or "{}").get("ts", 0.0))
    except ValueError:
        since = 0.0
    failures = deps.store.count(
        EXPERIENCES, And(Eq("outcome", "failure"), Range("created_at", gt=since))
    )
    deps.state.auto_short = deps.auto.failures - failures
    return failures >= deps.auto.failures


def child_config(deps: Deps) -> dict[str, Any] | None:
    """What a new process needs to open the same store with the same settings (``None``: it
    cannot be rebuilt, the embedder is an object)."""
    from ..embed.core import FASTEMBED_FLOAT_NAME, FASTEMBED_NAME, HASH_NAME

    spec = deps.embedder_spec
    if not isinstance(spec, str):
        name = getattr(spec, "name", "")
        known = {FASTEMBED_NAME: "fastembed", FASTEMBED_FLOAT_NAME: "fastembed", HASH_NAME: "hash"}
        spec = known.get(name, "")
        if not spec:
            return None
    from .lifecycle import signing_key

    return {
        "home": str(deps.home),
        "store_uri": deps.store_uri,
        "storage_options": deps.storage_options,
        "embedder": spec,
        "scope": deps.scope,
        "signing_key": signing_key(deps).hex() if deps.signing_key_spec else None,
    }


def start(deps: Deps) -> str:
    """Start a background consolidation; returns ``"process"`` or ``"thread"``."""
    config = child_config(deps)
    path = log_path(deps.home)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if config is None:
        thread = threading.Thread(target=_in_thread, args=(deps,), daemon=True, name="mimir-auto")
        thread.start()
        return "thread"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mimir_core.lessons.auto"],
            stdin=subprocess.PIPE,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(config).encode("utf-8"))
    proc.stdin.close()
    return "process"


def _consolidate(deps: Deps) -> Any:
    """What ``Mimir.consolidate()`` does: ingest what hooks captured, then consolidate."""
    from ..ingest.record import drain_pending
    from .api import consolidate

    drain_pending(deps)
    return consolidate(deps, dry_run=False, judge=None, force=False)


def _in_thread(deps: Deps) -> None:
    try:
        report = _consolidate(deps)
        _append(log_path(deps.home), _summary(report))
    except Exception as exc:  # background work must never take the host down
        _append(log_path(deps.home), f"auto-consolidation failed: {type(exc).__name__}: {exc}")


def maybe_start(deps: Deps, *, new_failures: int = 0) -> None:
    """Start a background consolidation if one is due (never raises: fail open)."""
    try:
        if due(deps, new_failures=new_failures):
            how = start(deps)
            log.info("started automatic consolidation (%s)", how)
    except Exception as exc:
        log.warning("automatic consolidation not started: %s", exc)


def _append(path: Path, line: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{datetime.now().astimezone():%Y-%m-%d %H:%M:%S%z} {line}\n".encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def _summary(report: Any) -> str:
    if not report.ran:
        return f"consolidation skipped: {report.reason}"
    return (
        f"consolidated {report.examined} new experience(s) in {report.seconds:.2f}s: "
        f"{len(report.admitted)} admitted, {len(report.merged)} merged, "
        f"{len(report.superseded)} superseded, {len(report.quarantined)} quarantined, "
        f"{len(report.pending)} pending"
    )


def main() -> int:
    """Entry point of the detached process: the configuration comes on stdin."""
    config = json.loads(sys.stdin.read() or "{}")
    home = Path(config["home"])
    _append(log_path(home), f"automatic consolidation started (pid {os.getpid()})")
    from ..deps import Deps
    from ..ingest.validate import scope_key

    key = config.get("signing_key")
    scope = config.get("scope")
    deps = Deps(  # the parent's dependencies, rebuilt from its public fields (child_config)
        home,
        store_uri=config.get("store_uri") or str(home / "store"),
        storage_options=config.get("storage_options") or {},
        embedder_spec=config.get("embedder") or "fastembed",
        scope=scope_key(scope, ()) if isinstance(scope, str) else None,
        signing_key_spec=bytes.fromhex(key) if key else None,
    )
    try:
        report = _consolidate(deps)
    except Exception as exc:
        _append(log_path(home), f"automatic consolidation failed: {type(exc).__name__}: {exc}")
        return 1
    _append(log_path(home), _summary(report))
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a detached process
    sys.exit(main())
