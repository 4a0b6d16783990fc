"""Claude-Code-shaped hook payloads → :class:`Event`, for every host that sends them (stdlib only).

Claude Code and Codex CLI send the same payloads on stdin: ``session_id``, ``cwd``,
``hook_event_name`` and the event's own fields (``prompt``; ``tool_name``, ``tool_input``,
``tool_use_id``; a ``PostToolUse``'s ``tool_response``). They differ in event names and in
where a tool call's failure shows, so :func:`decode` reads the shared shape once and takes the
host's event table and its *judge* of a finished tool call. :func:`judge_response` reads a
``tool_response`` the way both hosts write one. Hook processes import this on every tool call:
it imports nothing beyond the standard library.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from typing import Any

from .events import Event

#: (ok, interrupted, error) of a finished tool call, from its whole payload.
Judge = Callable[[Mapping[str, Any]], tuple[bool, bool, str]]
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
    """(ok, interrupted, error) of a ``PostToolUse`` ``tool_response``: a failure when it says
    so (a non-zero exit code, ``is_error``, ``success: false``, ``interrupted``)."""
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


def judge_tool_response(payload: Mapping[str, Any]) -> tuple[bool, bool, str]:
    """The default judge: the payload's ``tool_response`` (:func:`judge_response`)."""
    return judge_response(payload.get("tool_response"))


def decode(
    payload: Mapping[str, Any],
    *,
    host: str,
    kinds: Mapping[str, str],
    inject: Collection[str],
    judge: Judge = judge_tool_response,
) -> Event:
    """The :class:`Event` of one payload. ``kinds`` maps the host's event names to event kinds
    (others are ``ignore``); ``inject`` names the events whose answer reaches the model;
    ``judge`` says whether a finished tool call (a ``tool`` event) worked."""
    name = str(payload.get("hook_event_name") or "")
    kind = kinds.get(name, "ignore")
    ev = Event(
        host=host,
        kind=kind,
        session_id=str(payload.get("session_id") or "unknown"),
        name=name,
        cwd=str(payload.get("cwd") or ""),
        inject=name in inject,
    )
    if kind == "task":
        ev.text = str(payload.get("prompt") or "")
    elif kind in ("tool", "pretool"):
        ev.tool = str(payload.get("tool_name") or "tool")
        ev.tool_input = payload.get("tool_input")
        ev.event_id = str(payload.get("tool_use_id") or "")
        if kind == "tool":
            ev.ok, ev.interrupted, ev.error = judge(payload)
    return ev
