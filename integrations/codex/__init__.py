"""Codex CLI: the hook handler (``mimir hook codex``) and ``mimir setup codex``.

Codex's hooks are Claude Code's in shape: ``SessionStart`` and ``UserPromptSubmit`` answer with
the task's lessons and past attempts, ``PreToolUse`` with the repeat guard (and asks first when
``MIMIR_GUARD_ASK_AFTER`` says so), a failed ``PostToolUse`` with what is known about the error;
Codex adds each ``hookSpecificOutput.additionalContext`` to the model's input as a developer
message. ``PreCompact`` and ``SessionEnd`` start a background ingest.

Setup merges the hooks into ``$CODEX_HOME/hooks.json`` (``~/.codex``) and registers the MCP
server with ``codex mcp add`` when ``codex`` is on PATH. Codex runs a new or changed hook only
once the user trusted it (``/hooks`` in the TUI); setup says so. The declarative
``mimir hook --config`` mapping cannot carry Codex: a shell call's failure is not in the
payload but in the session transcript (see :mod:`.payload`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import hook_entries
from ..hosts import host
from .payload import from_codex

if TYPE_CHECKING:
    from ..hooks import HookContext
    from ..setup_cmd import SetupEnv

EVENTS = host("codex").events
HOOK_TIMEOUT = 15
MCP_NAME = "mimir"
TRUST_NOTE = (
    "Codex runs new hooks only once you trust them: open `codex`, type /hooks and trust "
    "Mimir's (headless runs: `codex exec --dangerously-bypass-hook-trust`)"
)


def handle(payload: dict[str, Any], ctx: HookContext) -> dict[str, Any] | None:
    """Capture one Codex event; answer with lessons, past attempts or the repeat guard."""
    ev = from_codex(payload)
    if ev.kind == "ignore" or not ctx.claim(ev):
        return None
    ctx.capture.handle(ev)
    if ev.name in ("PreCompact", "SessionEnd"):
        ctx.background(ev.name)
    if ev.name == "SessionStart":
        ctx.capture.reset_context(ev.session_id)
    if not ev.inject or (ev.kind == "tool" and ev.ok):
        return None
    said = ctx.answer(ev)
    out: dict[str, Any] = {"hookEventName": ev.name}
    if said.text:
        out["additionalContext"] = said.text
    if said.ask and ev.kind == "pretool":
        out["permissionDecision"] = "ask"
        out["permissionDecisionReason"] = said.ask
    return {"hookSpecificOutput": out} if len(out) > 1 else None


# -- setup -------------------------------------------------------------------------------------


def codex_home(env: SetupEnv) -> Path:
    """``$CODEX_HOME``, else ``~/.codex``: where Codex reads ``hooks.json``."""
    found = os.environ.get("CODEX_HOME")
    return Path(found).expanduser() if found else env.user_home / ".codex"


def hooks_config(command: str) -> dict[str, list[dict[str, Any]]]:
    """The ``hooks`` entries Mimir adds to ``hooks.json``."""
    out: dict[str, list[dict[str, Any]]] = {}
    for event in EVENTS:
        # No ``matcher``: Codex then runs the hook for every tool (its matcher is a regex).
        out[event] = [{"hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT}]}]
    return out


def _is_ours(entry: Any) -> bool:
    hooks = entry.get("hooks") if isinstance(entry, dict) else None
    return isinstance(hooks, list) and any(
        isinstance(h, dict) and "hook codex" in str(h.get("command", "")) for h in hooks
    )


def setup(env: SetupEnv) -> list[str]:
    """Merge the hooks into ``hooks.json`` and add the MCP server."""
    path = codex_home(env) / "hooks.json"
    data = env.read_json(path)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise env.error(f"{path}: 'hooks' is not an object; fix it by hand first")
    hook_entries.merge(hooks, hooks_config(env.hook_command("codex")), _is_ours)
    done = [env.write_json(path, data, "hooks for " + ", ".join(EVENTS))]
    done.append(
        env.run_host_cli(
            "codex",
            ["mcp", "add", *env.env_args("--env"), MCP_NAME, "--", *env.mcp_command()],
            what="the MCP server",
            undo=["mcp", "remove", MCP_NAME],
        )
    )
    done.append(TRUST_NOTE)
    return done


def uninstall(env: SetupEnv) -> list[str]:
    """Remove exactly the hooks and the MCP server that setup added."""
    path = codex_home(env) / "hooks.json"
    done: list[str] = []
    if path.exists():
        data = env.read_json(path)
        hook_entries.remove(data, _is_ours)
        done.append(env.write_json(path, data, "Mimir's hooks removed"))
    done.append(
        env.run_host_cli("codex", ["mcp", "remove", MCP_NAME], what="the MCP server", undo=None)
    )
    return done
