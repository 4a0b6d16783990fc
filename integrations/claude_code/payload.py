"""Claude Code hook payloads → :class:`Event` (stdlib only).

The payloads are those Claude Code 2.1.x sends on stdin (``session_id``, ``cwd``,
``hook_event_name`` and the event's own fields). A ``PostToolUse`` is a success unless its
``tool_response`` says otherwise (a non-zero exit code, ``is_error``, ``success: false``); a
``PostToolUseFailure`` carries the error text.
"""

from __future__ import annotations

import json
from typing import Any

from mimir_core.capture.events import Event

HOST = "claude-code"
_KIND = {
    "SessionStart": "start",
    "UserPromptSubmit": "task",
    "PreToolUse": "pretool",
    "PostToolUse": "tool",
    "PostToolUseFailure": "tool",
    "Stop": "stop",
    "SessionEnd": "end",
    "PreCompact": "compact",
}
#: Events whose hook answer may carry ``hookSpecificOutput.additionalContext``.
INJECT_EVENTS = frozenset({"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUseFailure"})
_EXIT_KEYS = ("exit_code", "exitCode", "returncode", "returnCode", "exit_status")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # MCP content blocks
        return "\n".join(
            str(b.get("text", "")) for b in value if isinstance(b, dict) and b.get("text")
        )
    if isinstance(value, dict):
        return _text(value.get("content") or value.get("text") or "")
    return ""


def judge_response(response: Any) -> tuple[bool, bool, str]:
    """(ok, interrupted, error) of a ``PostToolUse`` ``tool_response``."""
    if isinstance(response, str) and response[:1] in "{[":
        try:
            response = json.loads(response)
        except ValueError:
            return True, False, ""
    if not isinstance(response, dict):
        return True, False, ""
    if response.get("interrupted") is True:
        return False, True, "interrupted"
    if response.get("is_error") is True or response.get("isError") is True:
        return False, False, _text(response) or "the tool reported an error"
    if response.get("success") is False:
        return False, False, str(response.get("error") or response.get("message") or "failed")
    for key in _EXIT_KEYS:
        code = response.get(key)
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            out = str(response.get("stderr") or "") or str(response.get("stdout") or "")
            return False, False, f"Exit code {code}\n{out}".strip()
    return True, False, ""


def from_claude_code(payload: dict[str, Any]) -> Event:
    """The :class:`Event` of one Claude Code hook payload (``ignore`` for other events)."""
    name = str(payload.get("hook_event_name") or "")
    kind = _KIND.get(name, "ignore")
    ev = Event(
        host=HOST,
        kind=kind,
        session_id=str(payload.get("session_id") or "unknown"),
        name=name,
        cwd=str(payload.get("cwd") or ""),
        inject=name in INJECT_EVENTS,
    )
    if kind == "task":
        ev.text = str(payload.get("prompt") or "")
    elif kind in ("tool", "pretool"):
        ev.tool = str(payload.get("tool_name") or "tool")
        ev.tool_input = payload.get("tool_input")
        ev.event_id = str(payload.get("tool_use_id") or "")
        if name == "PostToolUseFailure":
            ev.ok = False
            ev.interrupted = payload.get("is_interrupt") is True
            ev.error = str(payload.get("error") or "the tool call failed")
        elif kind == "tool":
            ev.ok, ev.interrupted, ev.error = judge_response(payload.get("tool_response"))
    if payload.get("agent_id") and kind in ("stop", "task"):
        ev.kind = "ignore"  # a subagent's turn is part of the main agent's episode
    return ev
