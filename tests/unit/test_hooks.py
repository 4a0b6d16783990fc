"""``mimir hook`` as hosts run it: a real process per event, payload on stdin, answer on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from mimir_core.ingest import spool

BIN = Path(sys.executable).parent
MIMIR = str(BIN / "mimir")
RULE = "Run alembic upgrade head before the payments integration tests: migrations create orders."
SID = "sess-1"
BASE = {"session_id": SID, "transcript_path": "/t.jsonl", "cwd": "/repo/payments"}
PROMPT = {
    **BASE,
    "hook_event_name": "UserPromptSubmit",
    "prompt": "run the payments integration tests",
}
FAILURE = {
    **BASE,
    "hook_event_name": "PostToolUseFailure",
    "tool_name": "Bash",
    "tool_input": {"command": "pytest tests/integration", "description": "run the tests"},
    "tool_use_id": "toolu_1",
    "error": 'Exit code 1\nUndefinedTable: relation "orders" does not exist',
    "is_interrupt": False,
}


def hook(
    home: Path, payload: Any, host: str = "claude-code", **env: str
) -> subprocess.CompletedProcess[bytes]:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run(
        [MIMIR, "hook", host],
        input=data,
        capture_output=True,
        timeout=60,
        env={**os.environ, "MIMIR_HOME": str(home), "MIMIR_AUTO_CONSOLIDATE": "0", **env},
    )


def seed_digest(home: Path, scope: str = "") -> str:
    from mimir_core.lessons.sign import load_or_create_key
    from mimir_core.tools.digest import write_digest

    lesson = {
        "id": "feedc0de12345678",
        "rule": RULE,
        "trigger": "run the payments integration tests",
        "kind": "procedure",
        "scope": scope,
        "confidence": 0.8,
    }
    write_digest(home, [lesson], load_or_create_key(home))
    return lesson["id"]


def pending(home: Path) -> list[dict[str, Any]]:
    path = spool.spool_dir(home) / spool.PENDING
    return spool.records(path.read_bytes().splitlines()) if path.exists() else []


def log_text(home: Path) -> str:
    path = home / "logs" / "hooks.log"
    return path.read_text() if path.exists() else ""


def test_prompt_and_failure_get_lessons_and_the_failure_is_spooled(home: Path) -> None:
    lesson = seed_digest(home)
    out = hook(home, PROMPT)
    assert out.returncode == 0 and out.stderr == b""
    answer = json.loads(out.stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] == "UserPromptSubmit"
    assert (
        answer["additionalContext"].startswith("<mimir-memory>")
        and RULE in answer["additionalContext"]
    )
    again = hook(home, {**PROMPT, "prompt": "run the payments integration tests again"})
    assert again.stdout == b""  # the agent already has this block
    assert hook(home, {**BASE, "hook_event_name": "SessionStart", "source": "compact"}).stdout
    failure = hook(home, FAILURE)
    assert failure.returncode == 0 and failure.stdout == b""  # given after the compaction
    [rec] = pending(home)
    assert rec["outcome"] == "failure" and rec["recalled_lesson_ids"] == [lesson]
    assert rec["task"] == "run the payments integration tests again"
    assert log_text(home) == ""


def test_events_without_an_answer_print_nothing(home: Path) -> None:
    for payload in (
        {**BASE, "hook_event_name": "SessionStart", "source": "startup"},
        {
            **BASE,
            "hook_event_name": "PostToolUse",
            "tool_name": "Read",
            "tool_input": {},
            "tool_response": {},
            "tool_use_id": "r",
        },
        FAILURE,
        {**BASE, "hook_event_name": "Stop", "stop_hook_active": False},
        {**BASE, "hook_event_name": "PreCompact", "trigger": "auto"},
        {**BASE, "hook_event_name": "SessionEnd", "reason": "other"},
        {**BASE, "hook_event_name": "SomethingNew", "x": 1},
    ):
        out = hook(home, payload)
        assert (out.returncode, out.stdout, out.stderr) == (0, b"", b"")
    assert len(pending(home)) == 1 and log_text(home) == ""


@pytest.mark.parametrize(
    "payload",
    [b"", b"not json", b"[1, 2]", b'{"session_id": "s", "hook_event_na', b"\xff\xfe\x00", b"null"],
)
def test_bad_payloads_fail_open_and_are_logged(home: Path, payload: bytes) -> None:
    out = hook(home, payload)
    assert (out.returncode, out.stdout, out.stderr) == (0, b"", b"")
    assert "hook claude-code" in log_text(home)
    assert (home / "logs" / "hooks.log").stat().st_mode & 0o777 == 0o600


def test_unknown_host_and_unwritable_home_fail_open(tmp_path: Path) -> None:
    out = hook(tmp_path / "h", PROMPT, host="vim")
    assert (out.returncode, out.stdout) == (0, b"") and "unknown host" in log_text(tmp_path / "h")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = hook(blocker / "home", FAILURE)  # the home cannot even be created
    assert (out.returncode, out.stdout, out.stderr) == (0, b"", b"")


def test_huge_payload_is_captured_in_one_short_line(home: Path) -> None:
    big = {**FAILURE, "error": "E" * 3_000_000 + "\nFinal: relation orders is missing"}
    out = hook(home, big)
    assert (out.returncode, out.stdout) == (0, b"")
    raw = (spool.spool_dir(home) / spool.PENDING).read_bytes()
    assert len(raw) <= spool.MAX_LINE and b"relation orders is missing" in raw


def test_cline_answers_with_context_and_never_cancels(home: Path) -> None:
    seed_digest(home)
    base = {"clineVersion": "3.x", "taskId": "task-9", "workspaceRoots": ["/repo/payments"]}
    start = hook(
        home,
        {
            **base,
            "hookName": "TaskStart",
            "timestamp": "1",
            "taskStart": {"taskMetadata": {"initialTask": "run the payments integration tests"}},
        },
        host="cline",
    )
    answer = json.loads(start.stdout)
    assert answer["cancel"] is False and RULE in answer["contextModification"]
    assert answer["context"] == answer["contextModification"]
    post = hook(
        home,
        {
            **base,
            "hookName": "PostToolUse",
            "timestamp": "2",
            "postToolUse": {
                "toolName": "execute_command",
                "parameters": {"command": "npm test"},
                "result": "1 failing",
                "success": False,
            },
        },
        host="cline",
    )
    assert post.returncode == 0 and post.stdout == b""  # same block: not repeated
    [rec] = pending(home)
    assert rec["source"] == "cline" and rec["task"] == "run the payments integration tests"
    assert rec["action"] == "npm test" and rec["outcome"] == "failure"


_IMPORTS = """
import io, json, sys
sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))
from mimir_integrations.cli import main
main(["hook", "claude-code"])
heavy = [m for m in ("lancedb", "numpy", "pyarrow", "pydantic", "fastembed", "onnxruntime",
                     "mimir_core.memory", "mimir_core.store.core", "mimir_integrations.cli_core",
                     "mimir_integrations.cli_capture") if m in sys.modules]
sys.stderr.write("HEAVY=" + json.dumps(heavy))
"""


def test_the_hook_hot_path_stays_stdlib_only(home: Path) -> None:
    lesson = seed_digest(home)
    for payload in (PROMPT, FAILURE):  # injection (answered from the digest), then capture
        out = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(_IMPORTS), json.dumps(payload)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "MIMIR_HOME": str(home), "MIMIR_AUTO_CONSOLIDATE": "0"},
        )
        assert out.returncode == 0, out.stderr
        assert out.stderr.endswith("HEAVY=[]"), out.stderr
        if payload is PROMPT:  # the lesson really was injected, not skipped on an error
            context = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
            assert f"[{lesson}]" in context
    [rec] = pending(home)
    assert rec["outcome"] == "failure" and rec["recalled_lesson_ids"] == [lesson]


def test_many_hooks_at_once_lose_nothing_and_tear_nothing(home: Path) -> None:
    n = 48

    def one(i: int) -> subprocess.CompletedProcess[bytes]:
        payload = {
            **FAILURE,
            "session_id": f"s{i % 6}",
            "tool_use_id": f"t{i}",
            "tool_input": {"command": f"pytest -k case{i} " + "v" * 600},
            "error": f"Exit code 1\ncase{i} failed " + "trace " * 300,
        }
        return hook(home, payload)

    with ThreadPoolExecutor(max_workers=n) as pool:
        results = list(pool.map(one, range(n)))
    assert all(r.returncode == 0 and r.stdout == b"" for r in results)
    raw = (spool.spool_dir(home) / spool.PENDING).read_bytes().splitlines()
    assert len(raw) == n and all(json.loads(line)["v"] == 1 for line in raw)  # none torn
    keys = {r["idempotency_key"] for r in spool.records(raw)}
    assert len(keys) == n and log_text(home) == ""

    from mimir_core import Mimir

    m = Mimir(home, embedder="hash")
    assert m.ingest().ingested == n and m.stats().experiences == n
    m.close()


def test_a_hook_installed_twice_captures_and_answers_once(home: Path) -> None:
    seed_digest(home)
    payload = {
        "clineVersion": "",
        "hookName": "tool_result",
        "timestamp": "2026-11-30T04:11:43Z",
        "taskId": "conv_1",
        "workspaceRoots": ["/repo/payments"],
        "tool_result": {
            "id": "call_1",
            "name": "run_commands",
            "input": {"commands": ["pytest tests/integration"]},
            "output": [
                {
                    "query": "pytest tests/integration",
                    "error": "Command exited with code 1",
                    "result": "payments integration tests failed",
                    "success": False,
                }
            ],
        },
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda _: hook(home, payload, host="cline"), range(2)))
    assert sorted(bool(r.stdout) for r in runs) == [False, True]
    assert len(pending(home)) == 1


def test_session_end_drains_in_the_background(home: Path) -> None:
    hook(home, FAILURE)
    out = hook(
        home,
        {**BASE, "hook_event_name": "SessionEnd", "reason": "other"},
        MIMIR_AUTO_CONSOLIDATE="1",
        MIMIR_EMBEDDER="hash",
    )
    assert (out.returncode, out.stdout) == (0, b"")
    deadline = time.monotonic() + 120
    while spool.has_pending(spool.spool_dir(home)):
        assert time.monotonic() < deadline, log_text(home)
        time.sleep(0.2)
    from mimir_core import Mimir

    m = Mimir(home, embedder="hash")
    assert m.stats().by_source.get("claude-code") == 1
    m.close()


def test_config_mapping_hook(home: Path, tmp_path: Path) -> None:
    seed_digest(home)
    mapping = {
        "host": "my-agent",
        "session": "sid",
        "cwd": "dir",
        "events": [
            {"when": {"ev": "ask"}, "kind": "task", "text": "q", "inject": True},
            {
                "when": {"ev": "ran"},
                "kind": "tool",
                "tool": "name",
                "input": "cmd",
                "ok": {"path": "code", "equals": 0},
                "error": "err",
                "id": "id",
            },
        ],
        "reply": {"field": "context"},
    }
    path = tmp_path / "map.json"
    path.write_text(json.dumps(mapping))
    run = lambda p: subprocess.run(  # noqa: E731
        [MIMIR, "hook", "--config", str(path), "--home", str(home)],
        input=json.dumps(p).encode(),
        capture_output=True,
        timeout=60,
        env={**os.environ, "MIMIR_AUTO_CONSOLIDATE": "0"},
    )
    out = run({"sid": "a", "dir": "/w", "ev": "ask", "q": "run the payments integration tests"})
    assert RULE in json.loads(out.stdout)["context"]
    out = run(
        {
            "sid": "a",
            "dir": "/w",
            "ev": "ran",
            "name": "sh",
            "cmd": "make",
            "code": 2,
            "err": "no rule to make target",
            "id": "1",
        }
    )
    assert out.stdout == b"" and pending(home)[0]["source"] == "my-agent"


# -- setup -------------------------------------------------------------------------------------


def setup_cmd(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PATH": f"{BIN}:/usr/bin:/bin"}
    return subprocess.run([MIMIR, *args], env=env, capture_output=True, text=True, timeout=120)


def test_setup_claude_code_merges_idempotently_and_uninstalls_exactly(tmp_path: Path) -> None:
    home = tmp_path / "user"
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    mine = {"matcher": "Bash", "hooks": [{"type": "command", "command": "my-linter"}]}
    original = {"theme": "dark", "hooks": {"PostToolUse": [mine], "Notification": [mine]}}
    settings.write_text(json.dumps(original, indent=1))
    first = setup_cmd(home, "setup", "claude-code")
    assert first.returncode == 0, first.stderr
    assert "claude CLI not found on PATH" in first.stdout and "claude mcp add" in first.stdout
    data = json.loads(settings.read_text())
    assert data["theme"] == "dark" and data["hooks"]["Notification"] == [mine]
    assert data["hooks"]["PostToolUse"][0] == mine
    cmd = data["hooks"]["PostToolUseFailure"][0]["hooks"][0]["command"]
    assert cmd.endswith(" hook claude-code") and " -I -S -c " in cmd
    assert len(list(settings.parent.glob("settings.json.mimir-backup-*"))) == 1
    second = setup_cmd(home, "setup", "claude-code")
    assert "already up to date" in second.stdout
    assert json.loads(settings.read_text()) == data
    setup_cmd(home, "uninstall", "claude-code")
    assert json.loads(settings.read_text()) == original


def test_setup_refuses_a_broken_settings_file(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text("{ not json")
    out = setup_cmd(tmp_path, "setup", "claude-code")
    assert out.returncode == 1 and "settings.json is not valid JSON" in out.stderr
    assert settings.read_text() == "{ not json"


def test_setup_cline_keeps_the_users_own_hooks_and_servers(tmp_path: Path) -> None:
    home = tmp_path / "user"
    own = home / ".cline" / "hooks" / "PreToolUse"
    own.parent.mkdir(parents=True)
    own.write_text("#!/bin/sh\necho '{}'\n")
    mcp = home / ".cline" / "data" / "settings" / "cline_mcp_settings.json"
    mcp.parent.mkdir(parents=True)
    mcp.write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    out = setup_cmd(home, "setup", "cline", "--home", str(tmp_path / "mh"))
    assert out.returncode == 0, out.stderr
    assert "a hook of yours is there" in out.stderr and own.read_text() == "#!/bin/sh\necho '{}'\n"
    script = (home / "Documents" / "Cline" / "Hooks" / "PostToolUse").read_text()
    assert "hook cline --home" in script and os.access(own.parent / "PostToolUse", os.X_OK)
    servers = json.loads(mcp.read_text())["mcpServers"]
    assert servers["other"] == {"command": "x"}
    assert servers["mimir"]["env"] == {"MIMIR_HOME": str((tmp_path / "mh").resolve())}
    assert setup_cmd(home, "uninstall", "cline").returncode == 0
    assert own.exists() and not (own.parent / "PostToolUse").exists()
    assert json.loads(mcp.read_text())["mcpServers"] == {"other": {"command": "x"}}


def test_unknown_setup_target_is_an_error(tmp_path: Path) -> None:
    out = setup_cmd(tmp_path, "setup", "emacs")
    assert out.returncode != 0 and "emacs" in out.stderr


def test_the_hook_cost_benchmark_runs() -> None:
    from bench.hook_cost import measure

    res = measure(rounds=1, lessons=20)
    assert res["inject_answered"] and res["records_spooled"] == 2  # warm-up + one round
    assert res["guard_answered"] and res["guard_new_over_bare"] > 0
    assert {"bare", "capture", "capture-noise", "failure", "inject"} <= set(res)


def run_installed(command: str, home: Path, payload: Any, cwd: Path) -> bytes:
    """Run a hook command line the way hosts do (``sh -c``), from ``cwd``."""
    out = subprocess.run(
        ["sh", "-c", command],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, "MIMIR_HOME": str(home), "MIMIR_AUTO_CONSOLIDATE": "0"},
    )
    assert out.returncode == 0 and not out.stderr, out.stderr
    return out.stdout


def test_installed_hook_command_runs_without_site_and_ignores_the_project_dir(
    tmp_path: Path,
) -> None:
    """The command setup writes (``python -I -S -c <bootstrap>``) captures and injects like
    ``mimir hook``, and a project whose root holds ``json.py`` cannot hijack its imports."""
    from mimir_integrations.setup_cmd import SetupEnv

    home = tmp_path / "mh"
    seed_digest(home)
    project = tmp_path / "project"
    project.mkdir()
    (project / "json.py").write_text("raise SystemExit('project json.py imported')\n")
    command = SetupEnv(user_home=tmp_path).hook_command("claude-code")
    answer = json.loads(run_installed(command, home, PROMPT, project))
    assert RULE in answer["hookSpecificOutput"]["additionalContext"]
    seed_digest(tmp_path / "mh2")
    assert answer == json.loads(hook(tmp_path / "mh2", PROMPT).stdout)  # as `mimir hook` says
    run_installed(command, home, FAILURE, project)
    [rec] = pending(home)
    assert rec["outcome"] == "failure" and rec["task"] == PROMPT["prompt"]
    assert log_text(home) == ""


def test_hook_launcher_on_a_regular_site_packages_layout(tmp_path: Path) -> None:
    """A non-editable install: both packages side by side in one directory, no alias needed."""
    import shlex
    import shutil

    import mimir_core
    import mimir_integrations
    from mimir_integrations.setup_cmd import hook_launcher

    site = tmp_path / "site-packages"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(Path(mimir_core.__file__).parent, site / "mimir_core", ignore=ignore)
    shutil.copytree(
        Path(mimir_integrations.__file__).parent, site / "mimir_integrations", ignore=ignore
    )
    argv = hook_launcher(site / "mimir_core", site / "mimir_integrations")
    assert "type(sys)" not in argv[-2]  # no alias: the folder has the package's name
    probe = argv[-2].replace(
        "from mimir_integrations.hooks import main;raise SystemExit(main(sys.argv[2:]))",
        "import mimir_integrations.hooks as h;print(h.__file__)",
    )
    where = subprocess.run([*argv[:-2], probe], capture_output=True, text=True, timeout=60)
    assert where.stdout.strip() == str(site / "mimir_integrations" / "hooks.py"), where.stderr
    home = tmp_path / "mh"
    seed_digest(home)
    answer = json.loads(run_installed(shlex.join([*argv, "claude-code"]), home, PROMPT, tmp_path))
    assert RULE in answer["hookSpecificOutput"]["additionalContext"]


def test_digest_verification_reads_the_file_as_written_and_refuses_edits(tmp_path: Path) -> None:
    """The hook verifies the digest's bytes as written; a re-formatted copy of the same signed
    content still verifies, and any edit to a lesson fails."""
    from mimir_core.tools.digest import digest_path, read_digest

    seed_digest(tmp_path)
    path = digest_path(tmp_path)
    [entry] = read_digest(tmp_path) or []
    assert entry["rule"] == RULE
    raw = path.read_bytes()
    path.write_text(json.dumps(json.loads(raw), indent=2))  # same content, other bytes
    assert read_digest(tmp_path) == [entry]
    path.write_bytes(raw.replace(b"alembic upgrade head", b"rm -rf / --no-preserve"))
    assert read_digest(tmp_path) is None
    path.write_bytes(raw.replace(b'"confidence":0.8', b'"confidence":1.0'))
    assert read_digest(tmp_path) is None
