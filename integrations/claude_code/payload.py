"""Claude Code hook payloads → :class:`Event` (stdlib only).

The payloads are those Claude Code 2.1.x sends on stdin, decoded by the shared
:func:`mimir_core.ingest.capture.hook_payload.decode`. Claude Code's own judge: a ``PostToolUse``
is a success unless its ``tool_response`` says otherwise (a non-zero exit code, ``is_error``,
``success: false``); a ``PostToolUseFailure`` carries the error text. A subagent's turn is part
of the main agent's episode.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mimir_core.ingest.capture.events import Event
from mimir_core.ingest.capture.hook_payload import decode, judge_response

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


def judge(payload: Mapping[str, Any]) -> tuple[bool, bool, str]:
    """(ok, interrupted, error) of a finished tool call."""
    if payload.get("hook_event_name") == "PostToolUseFailure":
        error = str(payload.get("error") or "the tool call failed")
        return False, payload.get("is_interrupt") is True, error
    return judge_response(payload.get("tool_response"))


def from_claude_code(payload: dict[str, Any]) -> Event:
    """The :class:`Event` of one Claude Code hook payload (``ignore`` for other events)."""
    ev = decode(payload, host=HOST, kinds=_KIND, inject=INJECT_EVENTS, judge=judge)
    if payload.get("agent_id") and ev.kind in ("stop", "task"):
        ev.kind = "ignore"  # a subagent's turn is part of the main agent's episode
    return ev


__all__ = ["HOST", "INJECT_EVENTS", "from_claude_code", "judge", "judge_response"]
