"""Cline hook payloads → :class:`Event`, both generations (stdlib only).

The VS Code extension sends ``hookName`` = ``PreToolUse``/``PostToolUse``/``TaskStart``... with
camelCase payloads (``postToolUse{toolName, parameters, result, success}``); the CLI and SDK
send ``hookName`` = ``tool_call``/``tool_result``/``agent_start``... with ``tool_call`` and
``tool_result`` objects, and the legacy keys side by side. The new keys win when present.
"""

from __future__ import annotations

from typing import Any

from mimir_core.ingest.capture.events import Event

HOST = "cline"
_KIND = {
    "TaskStart": "start",
    "agent_start": "start",
    "TaskResume": "start",
    "agent_resume": "start",
    "UserPromptSubmit": "task",
    "prompt_submit": "task",
    "PreToolUse": "pretool",
    "tool_call": "pretool",
    "PostToolUse": "tool",
    "tool_result": "tool",
    "TaskComplete": "end",
    "agent_end": "end",
    "TaskCancel": "end",
    "agent_abort": "end",
    "TaskError": "end",
    "agent_error": "end",
    "session_shutdown": "end",
    "SessionShutdown": "end",
    "PreCompact": "compact",
}
_EXTENSION_TASK_HOOKS = frozenset({"TaskStart", "TaskResume", "UserPromptSubmit"})
_TASK_KEYS = ("initialTask", "task", "prompt", "text", "userMessage")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _task_text(payload: dict[str, Any]) -> str:
    for holder in ("userPromptSubmit", "taskStart", "taskResume"):
        part = _dict(payload.get(holder))
        meta = _dict(part.get("taskMetadata"))
        for source in (part, meta):
            for key in _TASK_KEYS:
                value = source.get(key)
                if isinstance(value, str) and value.strip():
                    return value
    for key in ("prompt", "input"):
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def _judge_output(output: Any) -> tuple[bool, str, str]:
    """(ok, error, failed command) of a CLI ``tool_result.output``."""
    items = output if isinstance(output, list) else [output]
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("success") is False or (item.get("error") and item.get("success") is not True):
            error = str(item.get("error") or "failed")
            result = str(item.get("result") or "")
            return False, f"{error}\n{result}".strip(), str(item.get("query") or "")
    return True, "", ""


def from_cline(payload: dict[str, Any]) -> Event:
    """The :class:`Event` of one Cline hook payload (``ignore`` for unknown hooks)."""
    name = str(payload.get("hookName") or payload.get("hook_name") or "")
    kind = _KIND.get(name, "ignore")
    roots = payload.get("workspaceRoots")
    cwd = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else ""
    cwd = cwd or str(_dict(payload.get("workspaceInfo")).get("rootPath") or "")
    ev = Event(
        host=HOST,
        kind=kind,
        session_id=str(payload.get("taskId") or payload.get("task_id") or "unknown"),
        name=name,
        cwd=cwd,
        # The CLI runs agent_start/prompt_submit detached and ignores their output.
        inject=kind == "pretool" or (kind in ("start", "task") and name in _EXTENSION_TASK_HOOKS),
    )
    if kind in ("start", "task"):
        ev.text = _task_text(payload)
        if ev.text:
            ev.kind = "task"
    elif kind in ("pretool", "tool"):
        new = _dict(payload.get("tool_call" if kind == "pretool" else "tool_result"))
        old = _dict(payload.get("preToolUse" if kind == "pretool" else "postToolUse"))
        ev.tool = str(new.get("name") or old.get("toolName") or "tool")
        ev.tool_input = new.get("input") if "input" in new else old.get("parameters")
        ev.event_id = str(new.get("id") or "")
        if kind == "tool":
            if "output" in new:
                ev.ok, ev.error, failed = _judge_output(new.get("output"))
                if failed:
                    ev.tool_input = {"command": failed}
            if old.get("success") is False and ev.ok:
                ev.ok, ev.error = False, str(old.get("result") or "the tool call failed")
            ev.inject = not ev.ok  # lessons about the error, right after it
    return ev
