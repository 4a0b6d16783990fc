"""Files: what Mimir writes is private, the HTTP transport is loopback unless told otherwise
(and then needs a token), and ``mimir setup`` touches only the host's config (backed up) and
Mimir's own home."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mimir_core import Mimir
from mimir_core.lessons.lifecycle import insert
from mimir_core.store.core import LESSONS
from mimir_core.types import Lesson
from tests.security.helpers import FAILED_CALL, run_hook_inprocess

BIN = Path(sys.executable).parent
TOKEN = "sec-token-0123456789abcdef"
PRIVATE_DIRS = ("", "store", "keys", "locks", "logs", "digest")


def mode(p: Path) -> int:
    return stat.S_IMODE(p.lstat().st_mode)


@contextmanager
def permissive_umask() -> Iterator[None]:
    """umask 000: privacy must come from Mimir's own modes, not from a cautious umask."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_home_key_store_spool_and_logs_are_private(home: Path) -> None:
    with permissive_umask():
        m = Mimir(home, embedder="hash", auto_consolidate=False)
        m.record("deploy the api", "kubectl apply -f api.yaml", "failure", reason="ImagePull")
        lesson = Lesson(id="les_x", rule="Pin the image tag " * 3, trigger="deploy the api")
        insert(
            m.deps, [lesson.model_copy(update={"status": "active"})], actor="t", event="admitted"
        )
        m.store.update(LESSONS, "id = 'les_x'", {"rule": "tampered"})
        assert m.lessons("deploy the api") == []  # writes logs/lessons.log
        run_hook_inprocess(home, ["claude-code"], json.dumps(FAILED_CALL).encode())  # spool
        run_hook_inprocess(home, ["claude-code"], b"{broken")  # logs/hooks.log
        m.close()
    spool_root = home / "spool"
    assert spool_root.is_dir() and any(p.is_file() for p in spool_root.rglob("*"))
    assert (home / "logs" / "hooks.log").exists() and (home / "logs" / "lessons.log").exists()
    for d in PRIVATE_DIRS:
        assert mode(home / d) == 0o700, d
    assert mode(home / "keys" / "signing.key") == 0o600
    assert loose_paths(home, dirs=False) == []


def loose_paths(home: Path, *, dirs: bool) -> list[str]:
    """Files (or directories) under ``home`` that other users could read, outside the store."""
    loose = []
    for p in home.rglob("*"):
        rel = p.relative_to(home)
        if rel.parts[0] == "store":
            continue  # LanceDB's own files, behind the 0700 store directory (checked above)
        if p.is_dir() == dirs and mode(p) & 0o077:
            loose.append(f"{oct(mode(p))} {rel}")
    return loose


def test_spool_directories_are_0700_whatever_the_umask(home: Path) -> None:
    with permissive_umask():
        run_hook_inprocess(home, ["claude-code"], json.dumps(FAILED_CALL).encode())
    assert (home / "spool").is_dir()
    assert loose_paths(home, dirs=True) == []


def _listening(port: int) -> set[str]:
    """Local addresses listening on ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for name in ("tcp", "tcp6"):
        path = Path("/proc/net") / name
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, hexport = local.split(":")
            if state == "0A" and int(hexport, 16) == port:
                found.add(addr)
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server(home: Path, *args: str) -> Iterator[int]:
    pytest.importorskip("mcp")
    port = _free_port()
    env = dict(os.environ, MIMIR_HOME=str(home), MIMIR_EMBEDDER="hash")
    cmd = [sys.executable, "-m", "mimir_integrations.cli_mcp", "--http", "--port", str(port)]
    proc = subprocess.Popen([*cmd, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for _ in range(1200):
            if proc.poll() is not None:
                raise AssertionError(proc.communicate())
            if _listening(port):
                break
            subprocess.run(["sleep", "0.1"], check=False)
        yield port
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")
def test_http_binds_loopback_by_default(tmp_path: Path) -> None:
    with http_server(tmp_path / "h") as port:
        addrs = _listening(port)
    assert addrs and addrs <= {"0100007F", "00000000000000000000000001000000"}, addrs


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")
def test_a_remote_bind_needs_the_flag_and_a_token_and_then_checks_it(tmp_path: Path) -> None:
    httpx = pytest.importorskip("httpx")
    env = dict(os.environ, MIMIR_HOME=str(tmp_path / "h"), MIMIR_EMBEDDER="hash")
    base = [sys.executable, "-m", "mimir_integrations.cli_mcp", "--http", "--host", "0.0.0.0"]
    for extra, message in (
        ([], "not a loopback address"),
        (["--allow-remote"], "needs a bearer token"),
    ):
        out = subprocess.run([*base, *extra], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 1 and message in out.stderr and out.stdout == ""
    with http_server(tmp_path / "h", "--host", "0.0.0.0", "--allow-remote", "--token", TOKEN) as p:
        assert _listening(p) & {"00000000", "00000000000000000000000000000000"}
        url = f"http://127.0.0.1:{p}/mcp"
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        headers = {"Accept": "application/json, text/event-stream"}
        assert httpx.post(url, json=init, headers=headers, timeout=60).status_code == 401
        wrong = {**headers, "Authorization": "Bearer not-the-token-0123456"}
        assert httpx.post(url, json=init, headers=wrong, timeout=60).status_code == 401
        good = {**headers, "Authorization": f"Bearer {TOKEN}"}
        r = httpx.post(url, json=init, headers=good, timeout=60)
        assert r.status_code == 200 and "serverInfo" in r.text


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("host", ["claude-code", "cline"])
def test_setup_writes_only_host_config_with_backups_and_the_home(tmp_path: Path, host: str) -> None:
    user = tmp_path / "user"
    mimir_home = tmp_path / "mh"
    claude = user / ".claude" / "settings.json"
    claude.parent.mkdir(parents=True)
    claude.write_text(json.dumps({"theme": "dark"}))
    mcp = user / ".cline" / "data" / "settings" / "cline_mcp_settings.json"
    mcp.parent.mkdir(parents=True)
    mcp.write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    (tmp_path / "elsewhere.txt").write_text("untouched")
    before = _snapshot(tmp_path)
    env = {**os.environ, "HOME": str(user), "PATH": f"{BIN}:/usr/bin:/bin"}
    out = subprocess.run(
        [str(BIN / "mimir"), "setup", host, "--home", str(mimir_home)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    after = _snapshot(tmp_path)
    changed = {k for k in after if before.get(k) != after[k]}
    config = str((claude if host == "claude-code" else mcp).relative_to(tmp_path))
    assert config in changed
    allowed_dirs = (
        ("user/.claude/",)
        if host == "claude-code"
        else ("user/.cline/", "user/Documents/Cline/Hooks/")
    )
    for path in changed:
        assert path.startswith(("mh/", *allowed_dirs)), f"setup wrote {path}"
    assert set(before) <= set(after)  # nothing deleted
    # every pre-existing file it changed was backed up first, byte for byte
    for path in changed & set(before):
        backups = [k for k in after if k.startswith(path + ".mimir-backup-")]
        assert backups and after[backups[0]] == before[path], path


def test_store_files_written_by_the_mimir_command_are_private(home: Path) -> None:
    # LanceDB's files take the process umask; Mimir's own processes (the CLI, hooks' background
    # ingest, the MCP server) make it 077, so even a permissive umask leaves them 0600.
    env = dict(os.environ, MIMIR_HOME=str(home), MIMIR_EMBEDDER="hash")
    cmd = [sys.executable, "-m", "mimir_integrations.cli", "record", "--task", "deploy the api"]
    cmd += ["--action", "kubectl apply -f api.yaml", "--outcome", "failure"]
    umask_000 = ["sh", "-c", 'umask 000 && exec "$@"', "sh"]
    out = subprocess.run([*umask_000, *cmd], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    store = list((home / "store").rglob("*"))
    assert any(p.is_file() and p.suffix == ".lance" for p in store)
    assert [f"{oct(mode(p))} {p}" for p in store if mode(p) & 0o077] == []
