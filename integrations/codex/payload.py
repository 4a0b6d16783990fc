"""Codex CLI hook payloads → :class:`Event` (stdlib only).

Codex 0.171 sends Claude-Code-shaped payloads on stdin (``session_id``, ``turn_id``, ``cwd``,
``hook_event_name``, ``transcript_path`` and the event's fields; recorded in
``tests/data/codex-0.171.0-hooks.json``). One difference matters: a shell call's
``PostToolUse`` ``tool_response`` is the command's output text alone, with no exit code, so
the failure signal is read where Codex wrote it just before the hook ran: the session's
transcript (``transcript_path``), whose ``item_completed`` line for the call (its id is the
hook's ``tool_use_id``) carries ``exit_code`` and ``status``. An object ``tool_response`` (an
MCP tool's result) is judged like Claude Code's. The rest is the shared
:func:`mimir_core.ingest.capture.hook_payload.decode`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from mimir_core.ingest.capture.events import Event
from mimir_core.ingest.capture.hook_payload import decode, judge_response

HOST = "codex"
_KIND = {
    "SessionStart": "start",
    "UserPromptSubmit": "task",
    "PreToolUse": "pretool",
    "PostToolUse": "tool",
    "Stop": "stop",
    "SessionEnd": "end",
    "PreCompact": "compact",
}
#: Events whose answer may carry ``hookSpecificOutput.additionalContext`` (Codex adds it to
#: the model's input as a developer message).
INJECT_EVENTS = frozenset({"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse"})
#: How much of the transcript's end is searched for the call's outcome (bytes).
TRANSCRIPT_TAIL = 1024 * 1024


def call_outcome(transcript: str, call_id: str) -> dict[str, Any] | None:
    """The completed item of ``call_id`` in the end of a Codex transcript (``None``: not there).

    Reads at most :data:`TRANSCRIPT_TAIL` bytes from the end; the newest matching line wins."""
    if not transcript or not call_id:
        return None
    try:
        with open(transcript, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - TRANSCRIPT_TAIL))
            tail = f.read()
    except OSError:
        return None
    needle = json.dumps(call_id).encode()
    for line in reversed(tail.splitlines()):
        if needle not in line or b"item_completed" not in line:
            continue
        try:
            item = json.loads(line).get("payload", {}).get("item")
        except (ValueError, AttributeError):
            continue
        if isinstance(item, dict) and item.get("id") == call_id:
            return item
    return None


def judge(payload: Mapping[str, Any]) -> tuple[bool, bool, str]:
    """(ok, interrupted, error) of a ``PostToolUse``: the transcript's exit code and status
    first, else the ``tool_response`` object; a bare text with no record says nothing failed."""
    response = payload.get("tool_response")
    item = call_outcome(
        str(payload.get("transcript_path") or ""), str(payload.get("tool_use_id") or "")
    )
    if item is not None:
        code = item.get("exit_code")
        failed = item.get("status") == "failed"
        if (isinstance(code, int) and not isinstance(code, bool) and code != 0) or failed:
            out = str(item.get("aggregated_output") or "")
            if not out and isinstance(response, str):
                out = response
            head = f"Exit code {code}" if isinstance(code, int) else "the tool call failed"
            return False, False, f"{head}\n{out}".strip()
        if item.get("status") == "declined":
            return False, True, "declined"
        return True, False, ""
    return judge_response(response)


def from_codex(payload: dict[str, Any]) -> Event:
    """The :class:`Event` of one Codex hook payload (``ignore`` for other events)."""
    return decode(payload, host=HOST, kinds=_KIND, inject=INJECT_EVENTS, judge=judge)
