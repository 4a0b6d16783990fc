"""Gemini CLI: ``mimir hook gemini`` (the shipped mapping, ``mapping.json``) and
``mimir setup gemini``.

``SessionStart`` and ``BeforeAgent`` answer with the task's lessons and past attempts in
``hookSpecificOutput.additionalContext`` (Gemini CLI adds it to the prompt as
``<hook_context>``, with ``<`` and ``>`` escaped); a failed ``AfterTool`` answers with what is
known about the error, the repeat guard's facts included (appended to the tool's result).

Setup merges the hooks and the MCP server into ``~/.gemini/settings.json`` (one file holds
both), with a backup first; uninstall removes exactly those entries.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import hook_entries
from ..hosts import host
from .payload import mapping

if TYPE_CHECKING:
    from ..hooks import HookContext
    from ..setup_cmd import SetupEnv

EVENTS = host("gemini").events
TOOL_EVENTS = frozenset({"BeforeTool", "AfterTool"})
#: Gemini CLI's hook timeout is in milliseconds.
HOOK_TIMEOUT_MS = 15000
MCP_NAME = "mimir"


def handle(payload: dict[str, Any], ctx: HookContext) -> dict[str, Any] | None:
    """Capture one Gemini CLI event through the shipped mapping; answer with lessons."""
    from ..hooks import mapping_handler

    return mapping_handler(mapping())(payload, ctx)


def hooks_config(command: str) -> dict[str, list[dict[str, Any]]]:
    """The ``hooks`` entries Mimir adds to ``settings.json``."""
    out: dict[str, list[dict[str, Any]]] = {}
    for event in EVENTS:
        entry: dict[str, Any] = {
            "hooks": [
                {"name": "mimir", "type": "command", "command": command, "timeout": HOOK_TIMEOUT_MS}
            ]
        }
        if event in TOOL_EVENTS:
            entry = {"matcher": ".*", **entry}
        out[event] = [entry]
    return out


def _is_ours(entry: Any) -> bool:
    hooks = entry.get("hooks") if isinstance(entry, dict) else None
    return isinstance(hooks, list) and any(
        isinstance(h, dict) and "hook gemini" in str(h.get("command", "")) for h in hooks
    )


def _settings_path(env: SetupEnv) -> Path:
    return env.user_home / ".gemini" / "settings.json"


def setup(env: SetupEnv) -> list[str]:
    """Merge the hooks and the MCP server into ``~/.gemini/settings.json``."""
    path = _settings_path(env)
    settings = env.read_json(path)
    hooks = settings.setdefault("hooks", {})
    servers = settings.setdefault("mcpServers", {})
    if not isinstance(hooks, dict) or not isinstance(servers, dict):
        raise env.error(f"{path}: 'hooks' or 'mcpServers' is not an object; fix it by hand first")
    hook_entries.merge(hooks, hooks_config(env.hook_command("gemini")), _is_ours)
    command = env.mcp_command()
    server: dict[str, Any] = {"command": command[0], "args": command[1:]}
    if env.mimir_home_env:
        server["env"] = dict(env.mimir_home_env)
    servers[MCP_NAME] = server
    return [env.write_json(path, settings, "hooks for " + ", ".join(EVENTS) + " + MCP server")]


def uninstall(env: SetupEnv) -> list[str]:
    """Remove exactly the hooks and the MCP server that setup added."""
    path = _settings_path(env)
    if not path.exists():
        return [f"{path}: not there, nothing to remove"]
    settings = env.read_json(path)
    hook_entries.remove(settings, _is_ours)
    servers = settings.get("mcpServers")
    if isinstance(servers, dict):
        servers.pop(MCP_NAME, None)
        if not servers:
            del settings["mcpServers"]
    return [env.write_json(path, settings, "Mimir's hooks and MCP server removed")]
