"""Capture: recorded host payloads → events → episodes in the spool (in process, stdlib only)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mimir_core.ingest import spool
from mimir_core.ingest.capture import (
    Capture,
    Event,
    HookMapping,
    MappingError,
    describe_action,
    is_noise,
)
from mimir_core.ingest.capture.episodes import remove_tree
from mimir_integrations.claude_code.payload import from_claude_code, judge_response
from mimir_integrations.cline.payload import from_cline

SID = "c60c2f4e-session"
BASE = {"session_id": SID, "transcript_path": "/x.jsonl", "cwd": "/repo/payments"}

# Payloads as Claude Code 2.1.112 sends them (hosts.md §2.4).
CC = {
    "SessionStart": {**BASE, "hook_event_name": "SessionStart", "source": "startup"},
    "UserPromptSubmit": {
        **BASE,
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "run the payments integration tests",
    },
    "PostToolUse": {
        **BASE,
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "alembic upgrade head", "description": "migrate"},
        "tool_response": {
            "stdout": "ok",
            "stderr": "",
            "interrupted": False,
            "isImage": False,
            "noOutputExpected": False,
        },
        "tool_use_id": "toolu_02",
    },
    "PostToolUseFailure": {
        **BASE,
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash",
        "tool_input": {"command": "pytest tests/integration", "description": "run the tests"},
        "tool_use_id": "toolu_01",
        "error": 'Exit code 1\nUndefinedTable: relation "orders" does not exist',
        "is_interrupt": False,
    },
    "Stop": {
        **BASE,
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "last_assistant_message": "Done.",
    },
    "SessionEnd": {**BASE, "hook_event_name": "SessionEnd", "reason": "other"},
    "PreCompact": {
        **BASE,
        "hook_event_name": "PreCompact",
        "trigger": "manual",
        "custom_instructions": "",
    },
    "Notification": {**BASE, "hook_event_name": "Notification", "message": "waiting"},
}


def test_claude_code_events_normalise() -> None:
    kinds = {name: from_claude_code(p).kind for name, p in CC.items()}
    assert kinds == {
        "SessionStart": "start",
        "UserPromptSubmit": "task",
        "PostToolUse": "tool",
        "PostToolUseFailure": "tool",
        "Stop": "stop",
        "SessionEnd": "end",
        "PreCompact": "compact",
        "Notification": "ignore",
    }
    fail = from_claude_code(CC["PostToolUseFailure"])
    assert not fail.ok and "UndefinedTable" in fail.error and fail.event_id == "toolu_01"
    assert fail.inject and fail.cwd == "/repo/payments" and fail.session_id == SID
    ok = from_claude_code(CC["PostToolUse"])
    assert ok.ok and not ok.inject and ok.tool == "Bash"
    assert from_claude_code(CC["UserPromptSubmit"]).text == "run the payments integration tests"
    sub = from_claude_code({**CC["Stop"], "agent_id": "a9d5", "agent_type": "general-purpose"})
    assert sub.kind == "ignore"
    assert from_claude_code({}).kind == "ignore"


@pytest.mark.parametrize(
    ("response", "ok", "interrupted"),
    [
        ({"stdout": "hi", "stderr": "", "interrupted": False}, True, False),
        ({"stdout": "", "stderr": "boom", "exit_code": 2}, False, False),
        ({"stdout": "", "stderr": "", "exitCode": 0}, True, False),
        ({"stdout": "", "interrupted": True}, False, True),
        ('{"isError": true, "content": [{"type": "text", "text": "nope"}]}', False, False),
        ('{"id": 1, "ok": true}', True, False),
        ("[{not json", True, False),
        ({"success": False, "error": "denied"}, False, False),
        (None, True, False),
    ],
)
def test_post_tool_use_responses_are_judged(response: Any, ok: bool, interrupted: bool) -> None:
    got_ok, got_int, error = judge_response(response)
    assert (got_ok, got_int) == (ok, interrupted)
    assert bool(error) == (not ok)


CLINE_CLI = {
    "clineVersion": "",
    "timestamp": "2026-11-30T04:11:43.270Z",
    "taskId": "conv_1796011897530",
    "sessionContext": {"rootSessionId": "1796011893639_nm5x5"},
    "workspaceRoots": ["/repo/billing"],
    "workspaceInfo": {"rootPath": "/repo/billing", "hint": "billing"},
    "userId": "unknown",
    "agent_id": "agent_1",
    "parent_agent_id": None,
}
CLI_RESULT = {
    **CLINE_CLI,
    "hookName": "tool_result",
    "tool_result": {
        "id": "call_91e0c367",
        "name": "run_commands",
        "input": {"commands": ["ls /srv", "ls /nonexistent_xyz"]},
        "output": [
            {"query": "ls /srv", "result": "www", "success": True},
            {
                "query": "ls /nonexistent_xyz",
                "result": "[Command exited with code 2]\n\n[stderr]\nls: cannot access",
                "error": "Command exited with code 2",
                "success": False,
            },
        ],
    },
    "postToolUse": {
        "toolName": "run_commands",
        "parameters": {"commands": '["ls /srv", "ls /nonexistent_xyz"]'},
        "result": "...",
        "success": True,
    },
}
EXTENSION_POST = {
    "clineVersion": "3.x",
    "hookName": "PostToolUse",
    "timestamp": "t",
    "taskId": "task-7",
    "workspaceRoots": ["/repo"],
    "postToolUse": {
        "toolName": "execute_command",
        "parameters": {"command": "npm test"},
        "result": "1 failing: expected 200, got 500",
        "success": False,
        "executionTimeMs": 900,
    },
}


def test_cline_both_generations_normalise() -> None:
    cli = from_cline(CLI_RESULT)
    assert cli.kind == "tool" and not cli.ok and cli.inject and cli.event_id == "call_91e0c367"
    assert describe_action(cli.tool, cli.tool_input) == "ls /nonexistent_xyz"
    assert "exited with code 2" in cli.error and cli.cwd == "/repo/billing"
    ext = from_cline(EXTENSION_POST)
    assert ext.kind == "tool" and not ext.ok and "500" in ext.error
    assert describe_action(ext.tool, ext.tool_input) == "npm test"
    pre = from_cline(
        {
            **CLINE_CLI,
            "hookName": "tool_call",
            "tool_call": {"id": "c1", "name": "run_commands", "input": {"commands": ["make"]}},
        }
    )
    assert pre.kind == "pretool" and pre.inject
    legacy_pre = from_cline(
        {
            "hookName": "PreToolUse",
            "taskId": "t",
            "preToolUse": {"toolName": "execute_command", "parameters": {"command": "make"}},
        }
    )
    assert (
        legacy_pre.kind == "pretool"
        and describe_action(legacy_pre.tool, legacy_pre.tool_input) == "make"
    )
    start = from_cline(
        {
            "hookName": "TaskStart",
            "taskId": "t",
            "taskStart": {"taskMetadata": {"initialTask": "fix the flaky login test"}},
        }
    )
    assert start.kind == "task" and start.text == "fix the flaky login test" and start.inject
    cli_start = from_cline(
        {**CLINE_CLI, "hookName": "agent_start", "taskStart": {"taskMetadata": {}}}
    )
    assert cli_start.kind == "start" and not cli_start.inject  # the CLI ignores its answer
    ends = [
        from_cline({**CLINE_CLI, "hookName": n}).kind
        for n in ("agent_end", "TaskComplete", "TaskCancel", "agent_abort", "session_shutdown")
    ]
    assert ends == ["end"] * 5
    assert from_cline({"hookName": "Notification"}).kind == "ignore"
    assert from_cline({}).kind == "ignore"


@pytest.mark.parametrize(
    ("tool", "tool_input", "noise"),
    [
        ("Read", {"file_path": "/a.py"}, True),
        ("Grep", {"pattern": "x"}, True),
        ("Bash", {"command": "ls -la && git status"}, True),
        ("Bash", {"command": "cat a.txt | head -5"}, True),
        ("Bash", {"command": "pytest -x"}, False),
        ("Bash", {"command": "echo hi > out.txt"}, False),
        ("Edit", {"file_path": "/a.py"}, False),
        ("mcp__mimir__recall", {"query": "x"}, True),
        ("read_files", {"paths": ["a"]}, True),
        ("run_commands", {"commands": ["git log", "pwd"]}, True),
    ],
)
def test_noise_is_successful_read_only_calls(tool: str, tool_input: Any, noise: bool) -> None:
    ev = Event(host="h", kind="tool", session_id="s", tool=tool, tool_input=tool_input)
    assert is_noise(ev) is noise
    ev.ok = False
    assert is_noise(ev) is False  # a failure always tells something


def lines(capture: Capture) -> list[dict[str, Any]]:
    path = capture.spool / spool.PENDING
    return spool.records(path.read_bytes().splitlines()) if path.exists() else []


def feed(capture: Capture, *payloads: dict[str, Any]) -> None:
    for p in payloads:
        capture.handle(from_claude_code(p))


def tool(i: int, command: str, *, fail: str = "") -> dict[str, Any]:
    if fail:
        return {
            **CC["PostToolUseFailure"],
            "tool_use_id": f"t{i}",
            "tool_input": {"command": command},
            "error": fail,
        }
    return {**CC["PostToolUse"], "tool_use_id": f"t{i}", "tool_input": {"command": command}}


def test_an_episode_is_task_attempts_and_how_it_ended(tmp_path: Path) -> None:
    c = Capture(tmp_path / "spool", scope="proj")
    feed(
        c,
        CC["SessionStart"],
        CC["UserPromptSubmit"],
        {
            **CC["PostToolUse"],
            "tool_name": "Read",
            "tool_use_id": "r1",
            "tool_input": {"file_path": "/repo/a.py"},
        },
        tool(1, "pytest tests/integration", fail="Exit code 1\nUndefinedTable: orders"),
    )
    [failure] = lines(c)  # the failure is spooled at once, the read is noise
    assert failure["outcome"] == "failure" and failure["action"] == "pytest tests/integration"
    assert failure["task"] == "run the payments integration tests"
    assert failure["reason"].endswith("UndefinedTable: orders") and failure["scope"] == "proj"
    assert failure["idempotency_key"] == f"claude-code:{SID}:fail:t1"
    feed(
        c,
        tool(2, "alembic upgrade head"),
        tool(3, "pytest tests/integration"),
        tool(4, "pytest tests/integration"),
        CC["Stop"],
    )
    failure2, success = lines(c)
    assert failure2 == failure
    assert success["outcome"] == "success"
    assert success["action"] == "alembic upgrade head → pytest tests/integration ×2"
    assert success["reason"].startswith("worked after 1 failed attempt(s)")
    assert success["context"]["failed_attempts"] == 1 and success["session_id"] == SID
    feed(c, CC["Stop"], CC["SessionEnd"])  # closing again adds nothing
    assert len(lines(c)) == 2
    assert not (c.sessions / SID).exists()


def test_hooks_and_chat_turns_give_an_episode_the_same_shape(tmp_path: Path) -> None:
    """One episode model: the same attempts captured by hooks and read from chat messages make
    the same failure and the same success (action, steps, failed attempts, steps before)."""
    from mimir_core.hosting.turns import turn_records

    commands = ["make build", "pytest tests/integration", "alembic upgrade head"]
    commands += ["pytest tests/integration"] * 2 + [f"step {i}" for i in range(9)]
    c = Capture(tmp_path / "spool")
    feed(c, CC["UserPromptSubmit"])
    messages: list[dict[str, Any]] = [{"role": "user", "content": CC["UserPromptSubmit"]["prompt"]}]
    for i, command in enumerate(commands):
        failed = i == 1
        feed(c, {**tool(i, command, fail="boom" if failed else ""), "tool_name": "bash"})
        fn = {"name": "bash", "arguments": json.dumps({"command": command})}
        messages.append({"role": "assistant", "tool_calls": [{"id": f"c{i}", "function": fn}]})
        body = {"output": "boom" if failed else "ok", "exit_code": int(failed)}
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": json.dumps(body)})
    feed(c, CC["Stop"])
    hooked = lines(c)
    chat = turn_records(messages, source="chat")
    assert [r["outcome"] for r in hooked] == [r["outcome"] for r in chat] == ["failure", "success"]
    for key in ("task", "action"):
        assert [r[key] for r in hooked] == [r[key] for r in chat]
    assert (
        hooked[0]["context"]["after_steps"] == chat[0]["context"]["after_steps"] == ["make build"]
    )
    shape = ("steps", "tools", "failed_attempts")
    assert {k: hooked[1]["context"][k] for k in shape} == {k: chat[1]["context"][k] for k in shape}
    assert "… 4 more …" in chat[1]["action"]  # long sequences are elided the same way


def test_reading_only_or_ending_in_failure_adds_no_success(tmp_path: Path) -> None:
    c = Capture(tmp_path / "spool")
    feed(c, CC["UserPromptSubmit"], tool(1, "ls"), tool(2, "git status"), CC["Stop"])
    assert lines(c) == []
    feed(
        c,
        CC["UserPromptSubmit"],
        tool(3, "make deploy"),
        tool(4, "make check", fail="E"),
        CC["Stop"],
    )
    [only] = lines(c)
    assert only["outcome"] == "failure" and only["context"]["after_steps"] == ["make deploy"]


def test_a_new_task_closes_the_previous_one(tmp_path: Path) -> None:
    c = Capture(tmp_path / "spool")
    feed(
        c,
        CC["UserPromptSubmit"],
        tool(1, "npm run build"),
        {**CC["UserPromptSubmit"], "prompt": "now deploy it"},
        tool(2, "make deploy", fail="x"),
    )
    first, second = lines(c)
    assert first["task"] == "run the payments integration tests" and first["outcome"] == "success"
    assert second["task"] == "now deploy it" and second["outcome"] == "failure"


def test_without_a_task_the_tool_description_or_project_stands_in(tmp_path: Path) -> None:
    c = Capture(tmp_path / "spool")
    feed(c, CC["PostToolUseFailure"])
    assert lines(c)[0]["task"] == "run the tests"
    feed(c, {**tool(9, "make"), "session_id": "other"}, {**CC["Stop"], "session_id": "other"})
    assert lines(c)[1]["task"] == "work in payments"


def test_interrupted_calls_are_partial(tmp_path: Path) -> None:
    c = Capture(tmp_path / "spool")
    feed(c, {**CC["PostToolUseFailure"], "is_interrupt": True})
    assert lines(c)[0]["outcome"] == "partial"


def test_stale_episodes_are_closed_by_the_drain(tmp_path: Path) -> None:
    import time

    c = Capture(tmp_path / "spool")
    feed(c, CC["UserPromptSubmit"], tool(1, "cargo build"))
    assert lines(c) == []
    assert c.close_stale(now=time.time() + 10) == 0
    assert c.close_stale(now=time.time() + 7 * 3600) == 1
    assert lines(c)[0]["action"] == "cargo build"
    c.close_stale(now=time.time() + 30 * 86400)
    assert not any(c.sessions.iterdir())


def test_a_block_still_in_context_is_credited_to_the_next_task(tmp_path: Path) -> None:
    # A new task starts a fresh list of the lessons in context; a block given for the previous
    # task is not given again (it is still in the context window), so its lessons must still be
    # credited to what the agent does next, or their effect on that task is never counted.
    c = Capture(tmp_path / "spool")
    block = "<mimir-memory>\nnote\n- [L1] avoid, confidence 0.70: x\n</mimir-memory>"
    prompt = {**CC["UserPromptSubmit"], "session_id": "s"}
    feed(c, {**prompt, "prompt": "run the payments integration tests"})
    assert c.offer_context("s", block)
    feed(c, {**prompt, "prompt": "run the payments integration tests again"})
    assert not c.offer_context("s", block)  # not repeated...
    feed(c, {**CC["PostToolUseFailure"], "session_id": "s"})
    assert lines(c)[-1]["recalled_lesson_ids"] == ["L1"]  # ...but credited
    feed(c, {**prompt, "prompt": "something else entirely"})  # nothing offered this time
    feed(c, {**CC["PostToolUseFailure"], "session_id": "s", "tool_use_id": "t-other"})
    assert lines(c)[-1]["recalled_lesson_ids"] == []


def test_duplicate_runs_of_one_payload_are_claimed_once(tmp_path: Path) -> None:
    c = Capture(tmp_path / "spool")
    assert c.claim("s", "f" * 64) and not c.claim("s", "f" * 64)
    assert c.claim("s", "f" * 64, window=0.0)  # the same payload much later is a new event


def test_context_blocks_are_offered_once_per_session(tmp_path: Path) -> None:
    c = Capture(tmp_path / "spool")
    block = "<mimir-memory>\nnote\n- [L1] avoid, confidence 0.70: x\n</mimir-memory>"
    assert c.offer_context("s", block)
    assert not c.offer_context("s", block)
    c.reset_context("s")
    assert c.offer_context("s", block)
    feed(c, {**CC["PostToolUseFailure"], "session_id": "s"})
    assert lines(c)[0]["recalled_lesson_ids"] == ["L1"]


def test_huge_payloads_are_capped_to_one_short_line(tmp_path: Path) -> None:
    c = Capture(tmp_path / "spool")
    big = "\n".join(f"line {i}: AssertionError somewhere deep" for i in range(200_000))
    feed(
        c,
        {**CC["UserPromptSubmit"], "prompt": "p " * 500_000},
        {
            **CC["PostToolUseFailure"],
            "tool_input": {"command": "pytest " + "x" * 100_000},
            "error": big,
        },
    )
    raw = (c.spool / spool.PENDING).read_bytes()
    assert len(raw) <= spool.MAX_LINE and raw.count(b"\n") == 1
    rec = lines(c)[0]
    assert "line 199999" in rec["reason"]  # the end of an error is what matters


def test_secrets_never_reach_the_spool_or_the_store(home: Path) -> None:
    from mimir_core import Mimir

    corpus = json.loads((Path(__file__).parents[1] / "data" / "secrets_corpus.json").read_text())
    m = Mimir(home, embedder="hash")
    c = Capture(m.spool_dir)
    secrets = []
    for i, item in enumerate(corpus["secrets"]):
        secrets.append(item["secret"])
        sid = f"s{i}"
        feed(
            c,
            {**CC["UserPromptSubmit"], "session_id": sid, "prompt": "deploy " + item["text"]},
            {
                **CC["PostToolUseFailure"],
                "session_id": sid,
                "tool_use_id": f"f{i}",
                "tool_input": {"command": item["text"]},
                "error": "failed:\n" + item["text"],
            },
            {
                **CC["PostToolUse"],
                "session_id": sid,
                "tool_use_id": f"o{i}",
                "tool_input": {"command": "deploy.sh " + item["text"]},
            },
            {**CC["Stop"], "session_id": sid},
        )
    on_disk = b"".join(p.read_bytes() for p in c.spool.rglob("*") if p.is_file())
    assert m.ingest().ingested == 2 * len(corpus["secrets"])
    stored = json.dumps([e.model_dump(mode="json") for e in m.recent(100, scope="*")])
    leaked = [s for s in secrets if s.encode() in on_disk or s in stored]
    assert leaked == []
    m.close()


MAPPING = {
    "host": "my-agent",
    "session": "session.id",
    "cwd": "workspace",
    "events": [
        {"when": {"type": "prompt"}, "kind": "task", "text": "message", "inject": True},
        {
            "when": {"type": "tool_end"},
            "kind": "tool",
            "tool": "tool.name",
            "input": "tool.args",
            "id": "tool.call_id",
            "ok": {"path": "tool.exit_code", "equals": 0},
            "error": "tool.stderr",
        },
        {"when": {"type": ["done", "exit"]}, "kind": "stop"},
    ],
    "reply": {"field": "additionalContext", "wrap": ["hookSpecificOutput"]},
}


def test_a_declarative_mapping_captures_any_host(tmp_path: Path) -> None:
    path = tmp_path / "map.json"
    path.write_text(json.dumps(MAPPING))
    mapping = HookMapping.load(path)
    c = Capture(tmp_path / "spool", scope="p")
    base = {"session": {"id": "S1"}, "workspace": "/w"}
    events = [
        {**base, "type": "prompt", "message": "build the docs site"},
        {
            **base,
            "type": "tool_end",
            "tool": {
                "name": "shell",
                "args": {"command": "mkdocs build"},
                "call_id": "k1",
                "exit_code": 1,
                "stderr": "Config file 'mkdocs.yml' does not exist",
            },
        },
        {
            **base,
            "type": "tool_end",
            "tool": {
                "name": "shell",
                "args": {"command": "mkdocs new ."},
                "call_id": "k2",
                "exit_code": 0,
            },
        },
        {**base, "type": "exit"},
        {**base, "type": "unknown"},
    ]
    evs = [mapping.event(e) for e in events]
    assert [e.kind for e in evs] == ["task", "tool", "tool", "stop", "ignore"]
    assert evs[0].inject and not evs[1].ok and evs[2].ok
    for ev in evs:
        c.handle(ev)
    fail, ok = lines(c)
    assert fail["source"] == "my-agent" and fail["task"] == "build the docs site"
    assert "mkdocs.yml" in fail["reason"] and ok["action"] == "mkdocs new ."
    assert mapping.answer("CTX") == {"hookSpecificOutput": {"additionalContext": "CTX"}}
    assert mapping.answer("") is None


@pytest.mark.parametrize(
    ("data", "names"),
    [
        ([], "object"),
        ({"events": [{"kind": "task"}]}, "host"),
        ({"host": "h"}, "events"),
        ({"host": "h", "events": [{"kind": "explode"}]}, "events[0].kind"),
        ({"host": "h", "events": [{"kind": "task", "when": []}]}, "events[0].when"),
        ({"host": "h", "events": [{"kind": "task"}], "reply": {"wrap": []}}, "reply"),
    ],
)
def test_bad_mappings_name_the_bad_key(data: Any, names: str) -> None:
    from mimir_core.errors import MimirError

    with pytest.raises(MappingError, match=names.replace("[", r"\[").replace("]", r"\]")) as exc:
        HookMapping.from_dict(data)
    assert isinstance(exc.value, MimirError)  # the one error family of the public API


def test_the_twin_of_an_end_event_finds_the_claim_after_the_session_is_gone(
    tmp_path: Path,
) -> None:
    # Two hook directories run one end event at once. The first run closes the episode and
    # removes the session's state; the twin must still see the claim, or it handles the end
    # again and, under load, trips over the half-done removal (seen in CI as FileNotFoundError
    # in hooks.log from the Cline e2e test).
    c = Capture(tmp_path / "spool")
    feed(c, CC["UserPromptSubmit"], tool(1, "cargo build"))
    assert c.claim(SID, "e" * 64)
    feed(c, CC["SessionEnd"])
    assert not c.session_path(SID).exists()
    assert not c.claim(SID, "e" * 64)  # the twin: already handled
    assert not c.session_path(SID).exists()  # and it left no state behind


def test_the_drain_prunes_old_claims_only(tmp_path: Path) -> None:
    import time

    c = Capture(tmp_path / "spool")
    assert c.claim("s", "f" * 64) and c.claim("t", "f" * 64)
    assert c.close_stale(now=time.time() + 10) == 0
    assert sorted(p.name for p in c.claims.iterdir()) == ["s", "t"]
    c.close_stale(now=time.time() + 7 * 3600)
    assert not any(c.claims.iterdir())
    assert c.claim("s", "f" * 64)  # pruned: the directory comes back


def test_private_dirs_survive_a_parent_removed_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A twin hook may remove a session directory between the check and the mkdir of its child.
    from mimir_core.ingest import spool

    real = Path.mkdir
    raced: list[Path] = []

    def mkdir(self: Path, *args: Any, **kwargs: Any) -> None:
        if self.name == "seen" and not raced:
            raced.append(self)
            remove_tree(self.parent)  # the twin's removal lands right now
        real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    target = tmp_path / "a" / "session" / "seen"
    spool.ensure_private_dir(target)
    assert raced and target.is_dir() and (target.parent.stat().st_mode & 0o777) == 0o700


def test_mapping_fields_read_an_exit_code_inside_text_and_combine_tests() -> None:
    """``regex`` reads a value out of a text, ``all`` combines tests, ``first`` falls back: what a
    host that reports a shell's exit code only inside its output (Gemini CLI) needs."""
    mapping = HookMapping.from_dict(
        {
            "host": "h",
            "events": [
                {
                    "when": {"e": "after"},
                    "kind": "tool",
                    "tool": "name",
                    "ok": {
                        "all": [
                            {"path": "out.error", "equals": None},
                            {"path": "out.text", "regex": r"Exit Code: (-?\d+)", "in": [None, "0"]},
                        ]
                    },
                    "error": {"first": ["out.error.message", "out.text"]},
                }
            ],
        }
    )

    def event(out: dict[str, Any]) -> tuple[bool, str]:
        ev = mapping.event({"e": "after", "name": "run_shell_command", "out": out})
        return ev.ok, ev.error

    assert event({"text": "Output: done\nExit Code: 0"}) == (True, "Output: done\nExit Code: 0")
    assert event({"text": "Output: no rule\nExit Code: 2"})[0] is False
    assert event({"text": "no exit code at all"})[0] is True
    assert event({"text": "x", "error": {"message": "File not found"}}) == (False, "File not found")
    assert mapping.event({"e": "after", "out": {"text": "Exit Code: 1"}}).ok is False
    not_in = HookMapping.from_dict(
        {"host": "h", "events": [{"kind": "tool", "ok": {"path": "c", "not_in": [1, 2]}}]}
    )
    assert not_in.event({"c": 0}).ok and not not_in.event({"c": 2}).ok
    bad = {"host": "h", "events": [{"kind": "tool", "ok": {"all": [{"path": "t", "regex": "("}]}}]}
    with pytest.raises(MappingError, match=r"events\[0\]\.ok\.all\[0\]\.regex: '\('"):
        HookMapping.from_dict(bad)


def test_a_mapping_tells_apart_payloads_that_do_not_name_their_event() -> None:
    """``{"exists": bool}`` in ``when``: Copilot CLI's payloads carry no event name, only their
    own fields."""
    mapping = HookMapping.from_dict(
        {
            "host": "h",
            "session": "sid",
            "events": [
                {"when": {"result": {"exists": True}}, "kind": "tool", "tool": "name"},
                {
                    "when": {"name": {"exists": True}, "result": {"exists": False}},
                    "kind": "pretool",
                },
                {"when": {"prompt": {"exists": True}}, "kind": "task", "text": "prompt"},
            ],
        }
    )
    assert mapping.event({"sid": "s", "name": "bash", "result": {}}).kind == "tool"
    assert mapping.event({"sid": "s", "name": "bash"}).kind == "pretool"
    assert mapping.event({"sid": "s", "prompt": "deploy"}).text == "deploy"
    assert mapping.event({"sid": "s", "other": 1}).kind == "ignore"
