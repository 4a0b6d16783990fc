"""What hook hosts show from the first repeat, through real ``mimir hook`` processes: past
attempts at task start, the repeat guard before a tool runs, the note after a failure; before
any drain (the spool's tail) and after it (the signed attempts digest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mimir_core.observations import attempt_digest as ad

BIN = Path(sys.executable).parent
MIMIR = str(BIN / "mimir")
CWD = "/repo/billing"
TASK = "deploy the billing service to staging"
BAD = "make deploy-staging"
GOOD = "./scripts/deploy.sh staging billing"
ERR = "Exit code 2\nmake: *** No rule to make target 'deploy-staging'.  Stop."


def hook(home: Path, payload: Any, host: str = "claude-code", **env: str) -> Any:
    out = subprocess.run(
        [MIMIR, "hook", host],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
        env={**os.environ, "MIMIR_HOME": str(home), "MIMIR_AUTO_CONSOLIDATE": "0", **env},
    )
    assert out.returncode == 0 and out.stderr == b""
    return json.loads(out.stdout) if out.stdout.strip() else None


def context(answer: Any) -> str:
    return "" if answer is None else str(answer["hookSpecificOutput"].get("additionalContext", ""))


def claude_session(home: Path, sid: str, prompt: str, calls: list[tuple[str, bool]]) -> list[Any]:
    """One Claude Code session: its answers, in order (start, prompt, then pre/post per call)."""
    base = {"session_id": sid, "transcript_path": "/t.jsonl", "cwd": CWD}
    said = [
        hook(home, {**base, "hook_event_name": "SessionStart", "source": "startup"}),
        hook(home, {**base, "hook_event_name": "UserPromptSubmit", "prompt": prompt}),
    ]
    for i, (cmd, ok) in enumerate(calls):
        call = {
            **base,
            "tool_name": "Bash",
            "tool_input": {"command": cmd, "description": "deploy"},
            "tool_use_id": f"{sid}-{i}",
        }
        said.append(hook(home, {**call, "hook_event_name": "PreToolUse"}))
        if ok:
            response = {"stdout": "deployed", "stderr": "", "interrupted": False}
            said.append(
                hook(home, {**call, "hook_event_name": "PostToolUse", "tool_response": response})
            )
        else:
            failure = {**call, "hook_event_name": "PostToolUseFailure", "error": ERR}
            said.append(hook(home, {**failure, "is_interrupt": False}))
    hook(home, {**base, "hook_event_name": "Stop", "stop_hook_active": False})
    hook(home, {**base, "hook_event_name": "SessionEnd", "reason": "other"})
    return said


def test_claude_code_speaks_up_from_the_first_repeat_without_any_drain(home: Path) -> None:
    first = claude_session(home, "s1", TASK, [(BAD, False), (GOOD, True)])
    assert first == [None] * 6  # nothing known yet
    second = claude_session(home, "s2", "deploy billing to the staging environment", [(BAD, False)])
    start, prompt, pre, post = (context(a) for a in second)
    assert start == ""
    assert f"- failed here: `{BAD}` — 1 of 1 try, in 1 session; last error: make: *** No rule" in (
        prompt
    )
    assert f"- worked here instead: `{GOOD}` — 1 of 1 try, in 1 session" in prompt
    assert f"- failed here before on this task: `{BAD}` — 1 of 1 try, in 1 session" in pre
    assert second[2]["hookSpecificOutput"]["hookEventName"] == "PreToolUse"
    assert "permissionDecision" not in second[2]["hookSpecificOutput"]
    assert post == ""  # the guard said it before this very call: not said twice
    for block in (prompt, pre):
        assert block.startswith("<mimir-memory>\n") and block.endswith("\n</mimir-memory>")
        assert "Observed on tasks like this (facts from past attempts, not rules):" in block
    # A host that runs no pre-tool hook still hears it right after the failure.
    base = {"session_id": "s3", "transcript_path": "/t.jsonl", "cwd": CWD}
    hook(home, {**base, "hook_event_name": "UserPromptSubmit", "prompt": TASK})
    failure = {
        **base,
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash",
        "tool_input": {"command": BAD},
        "tool_use_id": "s3-0",
        "error": ERR,
    }
    after = context(hook(home, failure))
    assert f"failed here before on this task too: `{BAD}` — 2 earlier failures" in after
    assert f"worked instead on this task: `{GOOD}`" in after
    assert not (home / "logs" / "hooks.log").exists()
    assert not list((home / "spool" / "local").glob("attempts/*.json"))  # no drain ran


def test_a_command_with_no_history_gets_no_answer_and_imports_nothing_heavy(home: Path) -> None:
    claude_session(home, "s1", TASK, [(BAD, False), (GOOD, True)])
    payload = {
        "session_id": "s2",
        "cwd": CWD,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "npm run build"},
        "tool_use_id": "t9",
    }
    probe = (
        "import io, json, sys\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))\n"
        "from mimir_integrations.cli import main\n"
        "main(['hook', 'claude-code'])\n"
        "heavy = [m for m in ('lancedb', 'numpy', 'pyarrow', 'pydantic', 'mimir_core.memory',"
        " 'mimir_core.store.core', 'mimir_core.observations.from_store') if m in sys.modules]\n"
        "sys.stderr.write('HEAVY=' + json.dumps(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(payload)],
        capture_output=True,
        env={**os.environ, "MIMIR_HOME": str(home), "MIMIR_AUTO_CONSOLIDATE": "0"},
        timeout=60,
    )
    assert out.stdout == b""
    assert out.stderr.decode().endswith("HEAVY=[]")
    payload["tool_input"] = {"command": BAD}
    out = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(payload)],
        capture_output=True,
        env={**os.environ, "MIMIR_HOME": str(home), "MIMIR_AUTO_CONSOLIDATE": "0"},
        timeout=60,
    )
    assert b"failed here before on this task" in out.stdout
    assert out.stderr.decode().endswith("HEAVY=[]")


def test_read_only_tools_are_never_looked_up(home: Path) -> None:
    answer = hook(
        home,
        {
            "session_id": "s",
            "cwd": CWD,
            "hook_event_name": "PreToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": "/repo/billing/Makefile"},
        },
    )
    assert answer is None and not (home / "spool" / "local" / "pending.jsonl").exists()


def test_ask_mode_needs_the_setting_and_a_command_that_never_worked(home: Path) -> None:
    for n in range(3):
        claude_session(home, f"s{n}", TASK, [(BAD, False)])
    pre = {
        "session_id": "s9",
        "cwd": CWD,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": BAD},
        "tool_use_id": "t",
    }
    hook(home, {**pre, "hook_event_name": "UserPromptSubmit", "prompt": TASK})
    out = hook(home, pre, MIMIR_GUARD_ASK_AFTER="3")["hookSpecificOutput"]
    assert out["permissionDecision"] == "ask"
    assert out["permissionDecisionReason"].startswith(
        f"Mimir: failed here before on this task: `{BAD}` — 3 of 3 tries, in 3 sessions"
    )
    again = hook(home, {**pre, "tool_use_id": "t2"}, MIMIR_GUARD_ASK_AFTER="4")
    assert again is None or "permissionDecision" not in again["hookSpecificOutput"]
    default = hook(home, {**pre, "tool_use_id": "t3"})
    assert default is None or "permissionDecision" not in default["hookSpecificOutput"]


def test_after_a_drain_the_signed_digest_answers_and_a_tampered_one_is_ignored(
    home: Path,
) -> None:
    from mimir_core import Mimir

    claude_session(home, "s1", TASK, [(BAD, False), (GOOD, True)])
    m = Mimir(home, embedder="hash")
    assert m.ingest().ingested == 2
    m.close()
    assert not (home / "spool" / "local" / "pending.jsonl").exists()
    [path] = list((home / "spool" / "local").glob("attempts/*.json"))
    said = claude_session(home, "s2", TASK, [(BAD, False)])
    assert "failed here before on this task" in context(said[2])
    path.write_bytes(path.read_bytes().replace(b"deploy-staging", b"deploy-prod"))
    third = claude_session(home, "s3", TASK, [(BAD, False)])
    assert not any("deploy-prod" in context(a) for a in third)
    # Only the spool's own record is left (session 2's failure): one failure alone says
    # nothing at task start, and the guard counts that one, not the tampered digest's.
    assert context(third[1]) == ""
    assert f"`{BAD}` — 1 of 1 try, in 1 session, never worked" in context(third[2])


def test_cline_guard_and_task_start(home: Path) -> None:
    base = {"clineVersion": "3.x", "workspaceRoots": [CWD]}

    def session(tid: str, calls: list[tuple[str, bool]]) -> list[Any]:
        said = [
            hook(
                home,
                {
                    **base,
                    "taskId": tid,
                    "hookName": "TaskStart",
                    "taskStart": {"taskMetadata": {"task": TASK}},
                },
                "cline",
            )
        ]
        for cmd, ok in calls:
            params = {"command": cmd}
            said.append(
                hook(
                    home,
                    {
                        **base,
                        "taskId": tid,
                        "hookName": "PreToolUse",
                        "preToolUse": {"toolName": "execute_command", "parameters": params},
                    },
                    "cline",
                )
            )
            post = {
                "toolName": "execute_command",
                "parameters": params,
                "success": ok,
                "result": "deployed" if ok else ERR,
            }
            said.append(
                hook(
                    home,
                    {**base, "taskId": tid, "hookName": "PostToolUse", "postToolUse": post},
                    "cline",
                )
            )
        hook(home, {**base, "taskId": tid, "hookName": "TaskComplete"}, "cline")
        return said

    session("t1", [(BAD, False), (GOOD, True)])
    start, pre, _post = session("t2", [(BAD, False)])
    assert start["cancel"] is False and f"failed here: `{BAD}`" in start["contextModification"]
    assert f"failed here before on this task: `{BAD}`" in pre["contextModification"]
    assert pre["context"] == pre["contextModification"] and pre["cancel"] is False


def test_a_declarative_host_gets_the_guard_too(home: Path, tmp_path: Path) -> None:
    mapping = {
        "host": "my-agent",
        "session": "sid",
        "cwd": "dir",
        "events": [
            {"when": {"type": "prompt"}, "kind": "task", "text": "text", "inject": True},
            {
                "when": {"type": "before"},
                "kind": "pretool",
                "tool": "tool",
                "input": "args",
                "inject": True,
            },
            {
                "when": {"type": "after"},
                "kind": "tool",
                "tool": "tool",
                "input": "args",
                "ok": {"path": "code", "equals": 0},
                "error": "stderr",
                "id": "call",
            },
        ],
        "reply": {"field": "context"},
    }
    path = tmp_path / "mapping.json"
    path.write_text(json.dumps(mapping))

    def run(payload: dict[str, Any]) -> Any:
        out = subprocess.run(
            [MIMIR, "hook", "--config", str(path)],
            input=json.dumps({"sid": "a", "dir": CWD, **payload}).encode(),
            capture_output=True,
            timeout=60,
            env={**os.environ, "MIMIR_HOME": str(home), "MIMIR_AUTO_CONSOLIDATE": "0"},
        )
        return json.loads(out.stdout) if out.stdout.strip() else None

    run({"type": "prompt", "text": TASK})
    args = {"command": BAD}
    assert run({"type": "before", "tool": "shell", "args": args}) is None
    run({"type": "after", "tool": "shell", "args": args, "code": 2, "stderr": ERR, "call": "c1"})
    said = run({"type": "before", "tool": "shell", "args": args, "call": "c2"})
    assert f"failed here before on this task: `{BAD}`" in said["context"]


def test_setup_installs_the_pre_tool_hook(tmp_path: Path) -> None:
    home = tmp_path / "user"
    env = {**os.environ, "HOME": str(home), "PATH": f"{BIN}:/usr/bin:/bin"}
    out = subprocess.run([MIMIR, "setup", "claude-code"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    hooks = json.loads((home / ".claude" / "settings.json").read_text())["hooks"]
    [entry] = hooks["PreToolUse"]
    assert entry["matcher"] == "*" and entry["hooks"][0]["command"].endswith("hook claude-code")


def test_the_guard_index_lists_normalised_actions(home: Path) -> None:
    claude_session(home, "s1", TASK, [(BAD, False)])
    from mimir_core import Mimir

    m = Mimir(home, embedder="hash")
    m.ingest()
    m.close()
    spool_dir = home / "spool" / "local"
    from mimir_core.observations.attempt_digest import has_action

    [index] = list(spool_dir.glob("attempts/*.idx"))
    assert index.read_text() == "\nmake deploy staging\n"
    scope = json.loads(next(spool_dir.glob("attempts/*.json")).read_text())["scope"]
    assert has_action(spool_dir, scope, ad.action_key("MAKE deploy-staging"))
