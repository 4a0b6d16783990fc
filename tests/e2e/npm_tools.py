"""Install npm tools for end-to-end tests once, into a cache shared between test runs.

``npm_tool(package, version, bin_name)`` installs ``package@version`` with the ordinary npm
client into ``<cache>/npm/<package>@<version>/`` (under a file lock, so parallel test processes
install it once) and returns the path of its ``bin_name`` executable, or ``None`` when Node or
npm is not installed (the caller skips with a clear reason). The cache is
``$MIMIR_CI_CACHE`` or ``~/.cache/mimir-ci`` of the *real* user (tests sandbox ``HOME``, so the
directory is resolved from the password database, not from ``HOME``).
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

INSTALL_TIMEOUT = 900


def cache_dir() -> Path:
    """The CI cache directory (created)."""
    env = os.environ.get("MIMIR_CI_CACHE")
    base = Path(env) if env else Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "mimir-ci"
    base.mkdir(parents=True, exist_ok=True)
    return base


def node_missing_reason() -> str | None:
    """Why npm tools cannot run here, or ``None`` when Node and npm are installed."""
    for exe in ("node", "npm"):
        if shutil.which(exe) is None:
            return f"{exe} is not installed (the end-to-end host tests need Node 20 and npm)"
    return None


def npm_tool(package: str, version: str, bin_name: str) -> Path | None:
    """The executable ``bin_name`` of ``package@version``, installed once; ``None`` without Node."""
    if node_missing_reason() is not None:
        return None
    prefix = cache_dir() / "npm" / f"{package.replace('/', '+')}@{version}"
    exe = prefix / "node_modules" / ".bin" / bin_name
    done = prefix / ".installed"
    if done.exists() and exe.exists():
        return exe
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix.parent / f".{prefix.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (done.exists() and exe.exists()):
            home = Path(pwd.getpwuid(os.getuid()).pw_dir)
            env = {**os.environ, "HOME": str(home)}  # npm's own cache, not the sandbox
            out = subprocess.run(
                [
                    "npm",
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--no-save",
                    "--prefix",
                    str(prefix),
                    f"{package}@{version}",
                ],
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
                env=env,
            )
            if out.returncode != 0 or not exe.exists():
                raise RuntimeError(
                    f"npm install {package}@{version} failed ({out.returncode}):\n"
                    f"{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
                )
            done.write_text(version)
    return exe


def host_cli(package: str, version: str, bin_name: str) -> Path:
    """``npm_tool(...)`` for a test: skips the test with the reason when Node is missing."""
    reason = node_missing_reason()
    if reason:
        pytest.skip(reason)
    exe = npm_tool(package, version, bin_name)
    assert exe is not None
    return exe


def host_env(home: Path, exe: Path, **extra: str) -> dict[str, str]:
    """The environment of a host CLI run in the sandboxed ``home``: the host and ``mimir`` on
    PATH, Mimir's home in ``home/.mimir`` with the hash embedder and no background
    consolidation."""
    bin_dir = Path(sys.executable).parent
    return {
        "PATH": f"{exe.parent}:{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "MIMIR_HOME": str(home / ".mimir"),
        "MIMIR_EMBEDDER": "hash",
        "MIMIR_AUTO_CONSOLIDATE": "0",
        **extra,
    }


def seed_lesson(mimir_home: Path, *, rule: str, trigger: str) -> str:
    """An active, signed lesson in the store and in the hooks' digest; returns its id."""
    from mimir_core import Mimir
    from mimir_core.testing import seed_lesson as seed

    m = Mimir(mimir_home, embedder="hash")
    try:
        return seed(m, rule=rule, trigger=trigger).id
    finally:
        m.close()


def reap_processes_of(home: Path) -> list[int]:
    """Kill the processes a host CLI left behind in the sandboxed ``home`` (Cline starts a hub
    daemon that outlives the run); returns their pids."""
    import signal

    mine = f"HOME={home}".encode()
    killed = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            env = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if mine in env:
            try:
                os.kill(int(proc.name), signal.SIGKILL)
                killed.append(int(proc.name))
            except OSError:
                pass
    return killed
