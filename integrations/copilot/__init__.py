"""GitHub Copilot CLI: ``mimir hook copilot`` (the shipped mapping, ``mapping.json``) and
``mimir setup copilot``.

``sessionStart`` and ``userPromptSubmitted`` answer with the task's lessons and past attempts,
``preToolUse`` with the repeat guard, a failed ``postToolUse`` with what is known about the
error, each in a top-level ``additionalContext`` (Copilot CLI adds it to the conversation).

Setup merges the hooks into ``settings.json`` and the MCP server into ``mcp-config.json``, both
in ``$COPILOT_HOME`` (``~/.copilot``), each with a backup first; uninstall removes exactly those
entries.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import hook_entries
from ..hosts import host
from .payload import mapping

if TYPE_CHECKING:
    from ..hooks import HookContext
    from ..setup_cmd import SetupEnv

EVENTS = host("copilot").events
HOOK_TIMEOUT = 15
MCP_NAME = "mimir"


def handle(payload: dict[str, Any], ctx: HookContext) -> dict[str, Any] | None:
    """Capture one Copilot CLI event through the shipped mapping; answer with lessons."""
    from ..hooks import mapping_handler

    return mapping_handler(mapping())(payload, ctx)


def copilot_home(env: SetupEnv) -> Path:
    """``$COPILOT_HOME``, else ``~/.copilot``."""
    found = os.environ.get("COPILOT_HOME")
    return Path(found).expanduser() if found else env.user_home / ".copilot"


def hooks_config(command: str) -> dict[str, list[dict[str, Any]]]:
    """The ``hooks`` entries Mimir adds to ``settings.json``."""
    entry = {"type": "command", "bash": command, "timeoutSec": HOOK_TIMEOUT}
    return {event: [dict(entry)] for event in EVENTS}


def _is_ours(entry: Any) -> bool:
    return isinstance(entry, dict) and "hook copilot" in str(entry.get("bash", ""))


def setup(env: SetupEnv) -> list[str]:
    """Merge the hooks into ``settings.json`` and the MCP server into ``mcp-config.json``."""
    home = copilot_home(env)
    path = home / "settings.json"
    settings = env.read_json(path)
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise env.error(f"{path}: 'hooks' is not an object; fix it by hand first")
    hook_entries.merge(hooks, hooks_config(env.hook_command("copilot")), _is_ours)
    done = [env.write_json(path, settings, "hooks for " + ", ".join(EVENTS))]
    mcp_path = home / "mcp-config.json"
    mcp = env.read_json(mcp_path)
    servers = mcp.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise env.error(f"{mcp_path}: 'mcpServers' is not an object; fix it by hand first")
    command = env.mcp_command()
    server: dict[str, Any] = {
        "type": "local",
        "command": command[0],
        "args": command[1:],
        "tools": ["*"],
    }
    if env.mimir_home_env:
        server["env"] = dict(env.mimir_home_env)
    servers[MCP_NAME] = server
    done.append(env.write_json(mcp_path, mcp, "the MCP server"))
    return done


def uninstall(env: SetupEnv) -> list[str]:
    """Remove exactly the hooks and the MCP server that setup added."""
    home = copilot_home(env)
    done: list[str] = []
    path = home / "settings.json"
    if path.exists():
        settings = env.read_json(path)
        hook_entries.remove(settings, _is_ours)
        done.append(env.write_json(path, settings, "Mimir's hooks removed"))
    mcp_path = home / "mcp-config.json"
    if mcp_path.exists():
        mcp = env.read_json(mcp_path)
        servers = mcp.get("mcpServers")
        if isinstance(servers, dict) and MCP_NAME in servers:
            del servers[MCP_NAME]
            done.append(env.write_json(mcp_path, mcp, "the MCP server removed"))
    return done
