"""Hooks under hostile ids, full disks, odd umasks, bad user patterns and closed pipes: each
runs a real hook process and checks it fails open without losing or exposing anything."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mimir_core.ingest import spool
from mimir_core.ingest.capture.episodes import Capture, session_key
from mimir_integrations.setup_cmd import hook_launcher

#: The command ``mimir setup`` installs (``python -I -S -c <bootstrap> hook``), as hosts run it:
#: unlike the ``mimir`` console script it does not set umask 077 first.
LAUNCHER = hook_launcher()
RULE = "Run alembic upgrade head before the payments integration tests: migrations create orders."
BASE = {"session_id": "sess-1", "transcript_path": "/t.jsonl", "cwd": "/repo/payments"}
PROMPT = {**BASE, "hook_event_name": "UserPromptSubmit", "prompt": "run the payments tests"}


def failure(
    tool_id: str, error: str = "Exit code 1\nrelation orders does not exist"
) -> dict[str, Any]:
    return {
        **BASE,
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash",
        "tool_input": {"command": f"pytest -k {tool_id}"},
        "tool_use_id": tool_id,
        "error": error,
        "is_interrupt": False,
    }


def limits(*, fsize: int | None = None, umask: int | None = None) -> Callable[[], None]:
    """preexec_fn: a file-size limit (a full disk: writes past it are cut short, then fail with
    EFBIG; SIGXFSZ ignored as Python does) and/or a umask."""

    def apply() -> None:
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if umask is not None:
            os.umask(umask)

    return apply


def hook(
    home: Path,
    payload: Any,
    host: str = "claude-code",
    *,
    preexec: Callable[[], None] | None = None,
    **env: str,
) -> subprocess.CompletedProcess[bytes]:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run(
        [*LAUNCHER, host],
        input=data,
        capture_output=True,
        timeout=120,
        preexec_fn=preexec,
        env={**os.environ, "MIMIR_HOME": str(home), "MIMIR_AUTO_CONSOLIDATE": "0", **env},
    )


def quiet(out: subprocess.CompletedProcess[bytes]) -> None:
    assert (out.returncode, out.stdout, out.stderr) == (0, b"", b""), out.stderr


def log_text(home: Path) -> str:
    path = home / "logs" / "hooks.log"
    return path.read_text() if path.exists() else ""


def seed_digest(home: Path) -> None:
    from mimir_core.lessons.sign import load_or_create_key
    from mimir_core.tools.digest import write_digest

    lesson = {
        "id": "feedc0de12345678",
        "rule": RULE,
        "trigger": "run the payments integration tests",
        "kind": "procedure",
        "scope": "",
        "confidence": 0.8,
    }
    write_digest(home, [lesson], load_or_create_key(home))


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


# -- 1. a session id never resolves outside its own directory ----------------------------------


@pytest.mark.parametrize(
    "sid", [".", "..", "...", "", "./..", "../x", ".hidden", "a/../..", "\x00"]
)
def test_a_session_key_is_always_one_plain_directory_under_sessions(
    tmp_path: Path, sid: str
) -> None:
    key = session_key(sid)
    assert key not in (".", "..") and "/" not in key and not key.startswith(".")
    c = Capture(tmp_path / "spool")
    assert c.session_path(sid).parent == c.sessions
    assert c.session_path(sid).resolve().parent == c.sessions.resolve()


def test_dot_and_dotdot_session_keys_are_distinct() -> None:
    keys = {session_key(s) for s in (".", "..", "_", "__", "unknown", "x")}
    assert len(keys) == 6


def test_ending_a_dot_session_removes_only_its_own_state(home: Path) -> None:
    quiet(hook(home, failure("t1")))  # another session's state and a record waiting
    d = spool.spool_dir(home)
    (d / spool.REJECTED).write_text('{"raw": "kept"}\n')
    (d / spool.LOCK).touch()
    before = sorted(p.relative_to(d) for p in d.rglob("*"))
    cline = {"hookName": "TaskCancel", "taskId": ".", "timestamp": "x"}
    for sid in (".", ".."):
        for payload, host in (
            (cline | {"taskId": sid}, "cline"),
            ({**BASE, "session_id": sid, "hook_event_name": "SessionEnd"}, "claude-code"),
        ):
            quiet(hook(home, payload, host))
    after = sorted(p.relative_to(d) for p in d.rglob("*"))
    assert set(before) <= set(after), set(before) - set(after)
    assert (d / spool.REJECTED).read_text() == '{"raw": "kept"}\n'
    assert len(spool.records((d / spool.PENDING).read_bytes().splitlines())) == 1


# -- 2. a short append is taken back ------------------------------------------------------------


def test_a_short_spool_write_tears_no_line_and_later_records_survive(home: Path) -> None:
    quiet(hook(home, failure("t1")))
    pending = spool.spool_dir(home) / spool.PENDING
    size = pending.stat().st_size
    big = failure("t2", "Exit code 1\n" + "trace line\n" * 300)  # a line of ~3.9 KB
    cut = hook(home, big, preexec=limits(fsize=size + 500))  # the disk fills mid-line
    quiet(cut)
    assert pending.stat().st_size == size  # the fragment was taken back
    quiet(hook(home, failure("t3")))
    raw = pending.read_bytes().splitlines()
    assert all(json.loads(line)["v"] == 1 for line in raw)  # nothing torn or glued
    keys = [r["idempotency_key"].rsplit(":", 1)[-1] for r in spool.records(raw)]
    assert keys == ["t1", "t3"]
    got: list[str] = []
    report = spool.drain(spool.spool_dir(home), lambda items: got.extend(map(str, items)))
    assert (report.ingested, report.rejected) == (2, 0)


_APPEND = """
import sys
from pathlib import Path
from mimir_core.ingest import spool
path = Path(sys.argv[1])
try:
    spool.append_json(path, {"step": "x" * 2000})
except OSError as exc:
    print(type(exc).__name__)
"""


def test_a_short_step_log_write_is_taken_back(tmp_path: Path) -> None:
    """``steps.jsonl`` (and ``rejected.jsonl``) use the same append: same guarantee."""
    path = tmp_path / "steps.jsonl"
    spool.append_json(path, {"step": 1})
    out = subprocess.run(
        [sys.executable, "-c", _APPEND, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=limits(fsize=path.stat().st_size + 100),
    )
    assert out.stdout.strip() == "OSError", out.stderr
    spool.append_json(path, {"step": 3})
    assert [json.loads(x) for x in path.read_bytes().splitlines()] == [{"step": 1}, {"step": 3}]


_REWRITE = """
import sys
from pathlib import Path
from mimir_core.ingest import spool
try:
    spool.rewrite(Path(sys.argv[1]), lambda line: b"drop" not in line)
except OSError as exc:
    print(type(exc).__name__)
"""


def test_a_short_rewrite_keeps_the_old_file(tmp_path: Path) -> None:
    """Scrubbing a step log (``forget``) on a full disk keeps it whole, not cut."""
    path = tmp_path / "steps.jsonl"
    spool.append_json(path, {"keep": "x" * 2000})
    spool.append_json(path, {"drop": 1})
    old = path.read_bytes()
    out = subprocess.run(
        [sys.executable, "-c", _REWRITE, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=limits(fsize=1000),
    )
    assert out.stdout.strip() == "OSError", out.stderr
    assert path.read_bytes() == old and sorted(tmp_path.iterdir()) == [path]


# -- 3. a short meta.json write keeps the old file ---------------------------------------------


def test_a_short_meta_write_keeps_the_old_meta_and_is_logged(home: Path) -> None:
    quiet(hook(home, PROMPT))
    sessions = spool.spool_dir(home) / "sessions"
    meta = sessions / session_key("sess-1") / "meta.json"
    old = meta.read_bytes()
    assert json.loads(old)["task"] == PROMPT["prompt"]
    longer = {**PROMPT, "prompt": "deploy the payments service " * 100}  # meta grows past 1 KB
    quiet(hook(home, longer, preexec=limits(fsize=1024)))
    assert meta.read_bytes() == old
    assert not list(meta.parent.glob(".meta.json.*"))  # no cut temporary file left behind
    assert "meta.json" in log_text(home) and "short write" in log_text(home)


# -- 4, 5. private files and directories whatever the umask ------------------------------------


def _wait_for_background(home: Path, timeout: float = 120.0) -> None:
    """Wait until the detached ``mimir ingest`` the hook started for ``home`` has exited."""
    deadline = time.monotonic() + timeout
    needle = str(home).encode()
    while time.monotonic() < deadline:
        running = False
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmd = Path("/proc", pid, "cmdline").read_bytes()
            except OSError:
                continue
            if b"ingest" in cmd and needle in cmd:
                running = True
        if not running:
            return
        time.sleep(0.2)


def test_the_background_ingest_log_is_0600_under_umask_000(home: Path) -> None:
    end = {**BASE, "hook_event_name": "SessionEnd", "reason": "other"}
    out = hook(
        home,
        end,
        preexec=limits(umask=0),
        MIMIR_AUTO_CONSOLIDATE="1",
        MIMIR_EMBEDDER="hash",
    )
    try:
        quiet(out)
        assert "started background ingest" in log_text(home)
        assert mode(home / "logs" / "hooks.log") == 0o600
        assert mode(home / "logs") == 0o700 and mode(home) == 0o700
    finally:
        _wait_for_background(home)


def test_a_first_run_that_only_logs_creates_the_home_0700_under_umask_000(
    tmp_path: Path,
) -> None:
    home = tmp_path / "new" / "mimir-home"  # neither exists yet
    quiet(hook(home, b"not json", preexec=limits(umask=0)))
    assert "hook claude-code" in log_text(home)
    for d in (tmp_path / "new", home, home / "logs"):
        assert mode(d) == 0o700, d
    assert mode(home / "logs" / "hooks.log") == 0o600


def test_the_digest_creates_its_home_0700_under_umask_000(tmp_path: Path) -> None:
    from mimir_core.tools.digest import write_digest

    home = tmp_path / "new" / "mimir-home"
    old = os.umask(0)
    try:
        write_digest(home, [], b"k" * 32)
    finally:
        os.umask(old)
    for d in (tmp_path / "new", home, home / "digest"):
        assert mode(d) == 0o700, d


# -- 6. a huge prompt costs the hook a bounded amount of matching ------------------------------


def test_matching_reads_a_bounded_head_and_tail_of_the_query(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mimir_core.tools import digest

    entry = digest.digest_entry(
        {"id": "a1", "rule": RULE, "trigger": "payments integration tests migrations"}
    )
    filler = " ".join(f"w{i}" for i in range(6_000))  # ~35 KB of distinct words
    assert len(filler) > 2 * digest.MAX_QUERY
    seen: list[int] = []
    real = digest.keywords

    def spy(text: str) -> list[str]:
        seen.append(len(text))
        return real(text)

    monkeypatch.setattr(digest, "keywords", spy)
    for query in (
        "payments integration tests migrations fail " + filler,  # the ask first
        filler + " payments integration tests migrations fail",  # the ask after a pasted log
    ):
        seen.clear()
        assert digest.match([entry], query) == [entry]
        assert seen and max(seen) <= digest.MAX_QUERY + 1


def test_keywords_are_the_same_as_the_list_based_original() -> None:
    from mimir_core.text import query_terms
    from mimir_core.tools.digest import keywords, stem

    def original(text: str) -> list[str]:  # what keywords() did before it used sets
        idents, words = query_terms(text)
        out: list[str] = []
        for tok in [*idents, *words]:
            s = tok if tok in idents else stem(tok)
            if len(s) > 1 and s not in out:
                out.append(s)
        return out

    text = (
        "Fix the failing tests/integration test_orders.py: tests fail, ERR_42 ERR_42 orders; "
        "running migrations again --no-cache 数据库迁移 failed twice "
    )
    assert keywords(text) == original(text) and keywords(text * 50) == original(text)


def test_a_multi_megabyte_prompt_is_answered(home: Path) -> None:
    seed_digest(home)
    filler = " ".join(f"w{i}" for i in range(300_000))
    out = hook(home, {**PROMPT, "prompt": "run the payments integration tests\n" + filler})
    assert out.returncode == 0 and out.stderr == b""
    assert RULE in json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]


# -- 7, 9. user patterns: keep the good ones, log the rest, stderr silent ----------------------


def test_one_invalid_user_pattern_does_not_drop_the_others(home: Path) -> None:
    patterns = json.dumps(["ACME-\\d{6}", "(unclosed", 7])
    secret = "ACME-123456"
    out = hook(
        home,
        failure("t1", f"Exit code 1\nlogin with {secret} refused"),
        MIMIR_REDACT_PATTERNS=patterns,
    )
    quiet(out)
    for path in home.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path
    [rec] = spool.records((spool.spool_dir(home) / spool.PENDING).read_bytes().splitlines())
    assert "[REDACTED" in rec["reason"]
    assert "(unclosed" in log_text(home)


def test_a_user_pattern_python_warns_about_is_logged_not_printed(home: Path) -> None:
    out = hook(
        home,
        failure("t1", "Exit code 1\ntoken a-987654 refused"),
        MIMIR_REDACT_PATTERNS=json.dumps(["[[a]-\\d+"]),
    )
    quiet(out)  # no FutureWarning on stderr
    assert "FutureWarning" in log_text(home)
    raw = (spool.spool_dir(home) / spool.PENDING).read_text()
    assert "a-987654" not in raw  # and the pattern still applies


# -- 8. a host that closed stdout ----------------------------------------------------------------


def test_a_closed_stdout_exits_0_silently(home: Path) -> None:
    seed_digest(home)
    payload = {**PROMPT, "prompt": "run the payments integration tests"}
    read_end, write_end = os.pipe()
    os.close(read_end)  # the host is gone before the hook answers
    try:
        out = subprocess.run(
            [*LAUNCHER, "claude-code"],
            input=json.dumps(payload).encode(),
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=60,
            env={**os.environ, "MIMIR_HOME": str(home), "MIMIR_AUTO_CONSOLIDATE": "0"},
        )
    finally:
        os.close(write_end)
    assert (out.returncode, out.stderr) == (0, b"")
    assert "BrokenPipeError" in log_text(home)
