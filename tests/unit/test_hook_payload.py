"""``mimir_core.ingest.capture.hook_payload``: one decoder for the Claude-Code-shaped payloads that
Claude Code and Codex CLI send, with each host's judge of a finished tool call."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mimir_core.ingest.capture.hook_payload import decode, judge_response
from mimir_integrations.claude_code.payload import from_claude_code
from mimir_integrations.codex.payload import from_codex

ROOT = Path(__file__).resolve().parents[2]
BASE = {"session_id": "s1", "cwd": "/repo", "tool_name": "Bash", "tool_use_id": "t1"}


def test_the_shared_shape_is_read_once_and_the_host_judges() -> None:
    judged: list[Mapping[str, Any]] = []

    def judge(payload: Mapping[str, Any]) -> tuple[bool, bool, str]:
        judged.append(payload)
        return False, False, "Exit code 2"

    kinds = {"Before": "pretool", "After": "tool", "Ask": "task"}
    pre = decode(
        {**BASE, "hook_event_name": "Before", "tool_input": {"command": "make"}},
        host="h",
        kinds=kinds,
        inject={"Before"},
        judge=judge,
    )
    assert (pre.kind, pre.tool, pre.tool_input, pre.event_id, pre.inject) == (
        "pretool",
        "Bash",
        {"command": "make"},
        "t1",
        True,
    )
    assert judged == []  # only a finished call is judged
    post = decode(
        {**BASE, "hook_event_name": "After"}, host="h", kinds=kinds, inject=(), judge=judge
    )
    assert (post.ok, post.error, post.inject, post.host, post.cwd) == (
        False,
        "Exit code 2",
        False,
        "h",
        "/repo",
    )
    task = decode({"hook_event_name": "Ask", "prompt": "fix it"}, host="h", kinds=kinds, inject=())
    assert (task.kind, task.text, task.session_id) == ("task", "fix it", "unknown")
    assert decode({"hook_event_name": "Other"}, host="h", kinds=kinds, inject=()).kind == "ignore"


def test_claude_code_and_codex_decode_a_shared_payload_alike() -> None:
    payload = {
        **BASE,
        "hook_event_name": "PostToolUse",
        "tool_response": {"exit_code": 1, "stderr": "boom"},
    }
    cc, cx = from_claude_code(payload), from_codex(payload)
    assert (cc.host, cx.host) == ("claude-code", "codex")
    for ev in (cc, cx):
        assert (ev.kind, ev.ok, ev.error, ev.event_id) == ("tool", False, "Exit code 1\nboom", "t1")
    assert judge_response({"exit_code": 1, "stderr": "boom"}) == (False, False, "Exit code 1\nboom")


def test_no_host_copies_the_decoder() -> None:
    for host in ("claude_code", "codex"):
        source = (ROOT / "integrations" / host / "payload.py").read_text(encoding="utf-8")
        assert "Event(" not in source and "def judge_response" not in source, host
    for host in ("claude_code", "codex"):
        source = (ROOT / "integrations" / host / "__init__.py").read_text(encoding="utf-8")
        assert '"hookSpecificOutput"' not in source and 'setdefault("hooks"' not in source, host
