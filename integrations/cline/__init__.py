"""Cline: the hook handler (``mimir hook cline``) and ``mimir setup cline``.

Accepts both payload generations (the VS Code extension's ``PreToolUse``/``PostToolUse``... and
the CLI's ``tool_call``/``tool_result``...). Lessons go back as ``contextModification`` (read by
both generations; the CLI appends it after the tool result). The answer never sets ``cancel``:
the CLI aborts the whole run on cancel.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..hosts import host
from .payload import from_cline

if TYPE_CHECKING:
    from ..hooks import HookContext
    from ..setup_cmd import SetupEnv

#: The events the hooks are installed for (from the hosts list).
HOOK_NAMES = host("cline").events
MCP_NAME = "mimir"
MARK = "# installed by mimir setup cline"


def handle(payload: dict[str, Any], ctx: HookContext) -> dict[str, Any] | None:
    """Capture one Cline event; the answer carries lessons when some are relevant."""
    ev = from_cline(payload)
    if ev.kind == "ignore" or not ctx.claim(ev):
        return None
    if ev.kind == "start" and not ev.text:  # the CLI's hooks do not carry the task: read it
        ev.text = cli_session_prompt(payload)
        ev.kind = "task" if ev.text else "start"
    ctx.capture.handle(ev)
    if ev.kind == "end":
        ctx.background(ev.name)
    if not ev.inject:
        return None
    text = ctx.answer(ev, lessons_before_tools=True).text
    # The extension reads ``contextModification``, the CLI ``context``: the same text in both.
    return {"cancel": False, "contextModification": text, "context": text} if text else None


def cli_session_prompt(payload: dict[str, Any]) -> str:
    """The task prompt of a Cline CLI session, from the CLI's own session file ("" if none)."""
    context = payload.get("sessionContext")
    sid = context.get("rootSessionId") if isinstance(context, dict) else None
    if not isinstance(sid, str) or not sid or "/" in sid or sid.startswith("."):
        return ""
    base = os.environ.get("CLINE_DATA_DIR") or str(
        Path(os.environ.get("CLINE_DIR") or Path.home() / ".cline") / "data"
    )
    path = Path(base).expanduser() / "sessions" / sid / f"{sid}.json"
    try:
        if path.stat().st_size > 4 * 1024 * 1024:
            return ""
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return ""
    prompt = data.get("prompt") if isinstance(data, dict) else None
    return prompt if isinstance(prompt, str) else ""


# -- setup -------------------------------------------------------------------------------------


def hook_dirs(env: SetupEnv) -> list[Path]:
    """The global hook directories: the extension's and the CLI's default."""
    return [env.user_home / "Documents" / "Cline" / "Hooks", env.user_home / ".cline" / "hooks"]


def mcp_settings_path(env: SetupEnv) -> Path:
    """Cline's MCP settings file (overridden by ``CLINE_MCP_SETTINGS_PATH``, ``CLINE_DATA_DIR``
    or ``CLINE_DIR``)."""
    if os.environ.get("CLINE_MCP_SETTINGS_PATH"):
        return Path(os.environ["CLINE_MCP_SETTINGS_PATH"]).expanduser()
    data = os.environ.get("CLINE_DATA_DIR")
    if not data:
        base = os.environ.get("CLINE_DIR") or str(env.user_home / ".cline")
        data = str(Path(base) / "data")
    return Path(data).expanduser() / "settings" / "cline_mcp_settings.json"


def script(env: SetupEnv) -> str:
    """The hook script: one line calling ``mimir hook cline``."""
    return f"#!/bin/sh\n{MARK}\nexec {env.hook_command('cline')}\n"


def setup(env: SetupEnv) -> list[str]:
    """Install the hook scripts and register the MCP server in Cline's MCP settings."""
    done = []
    body = script(env)
    for directory in hook_dirs(env):
        for name in HOOK_NAMES:
            env.write_executable(directory / name, body, MARK)
        done.append(f"hooks {', '.join(HOOK_NAMES)} in {directory}")
    path = mcp_settings_path(env)
    settings = env.read_json(path)
    servers = settings.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise env.error(f"{path}: 'mcpServers' is not an object; fix it by hand first")
    command, *args = env.mcp_command()
    entry: dict[str, Any] = {"type": "stdio", "command": command, "args": args, "disabled": False}
    if env.mimir_home_env:
        entry["env"] = dict(env.mimir_home_env)
    servers[MCP_NAME] = entry
    done.append(env.write_json(path, settings, f"MCP server {MCP_NAME!r}"))
    return done


def uninstall(env: SetupEnv) -> list[str]:
    """Remove the hook scripts Mimir wrote and its MCP server entry."""
    done = []
    for directory in hook_dirs(env):
        removed = [n for n in HOOK_NAMES if env.remove_file(directory / n, MARK)]
        if removed:
            done.append(f"removed hooks {', '.join(removed)} from {directory}")
    path = mcp_settings_path(env)
    if path.exists():
        settings = env.read_json(path)
        servers = settings.get("mcpServers")
        if isinstance(servers, dict) and MCP_NAME in servers:
            del servers[MCP_NAME]
            done.append(env.write_json(path, settings, f"MCP server {MCP_NAME!r} removed"))
    return done
