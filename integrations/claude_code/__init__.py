"""Claude Code: the hook handler (``mimir hook claude-code``) and ``mimir setup claude-code``.

Hooks capture tool calls (``PostToolUse``, ``PostToolUseFailure``), the task
(``UserPromptSubmit``) and the end of turns and sessions (``Stop``, ``SessionEnd``), and answer
``SessionStart``, ``UserPromptSubmit`` and ``PostToolUseFailure`` with the relevant lessons and
past attempts in ``hookSpecificOutput.additionalContext``; ``PreToolUse`` answers with the repeat
guard (this command failed here before), and asks the user first when ``MIMIR_GUARD_ASK_AFTER``
says so. ``PreCompact`` and ``SessionEnd`` start a background
ingest and consolidation. Setup merges the hooks into ``~/.claude/settings.json`` and registers
the MCP server with ``claude mcp add`` when the ``claude`` CLI is on PATH.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..hosts import host
from .payload import from_claude_code

if TYPE_CHECKING:
    from ..hooks import HookContext
    from ..setup_cmd import SetupEnv

#: The events the hooks are installed for (from the hosts list).
EVENTS = host("claude-code").events
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
HOOK_TIMEOUT = 15
MCP_NAME = "mimir"


def handle(payload: dict[str, Any], ctx: HookContext) -> dict[str, Any] | None:
    """Capture one Claude Code event; the answer carries lessons and past attempts when some
    are relevant, and the repeat guard before a tool runs."""
    ev = from_claude_code(payload)
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
    if said.ask:  # MIMIR_GUARD_ASK_AFTER: the user confirms a command that never worked here
        out["permissionDecision"] = "ask"
        out["permissionDecisionReason"] = said.ask
    return {"hookSpecificOutput": out} if len(out) > 1 else None


# -- setup -------------------------------------------------------------------------------------


def hooks_config(command: str) -> dict[str, list[dict[str, Any]]]:
    """The ``hooks`` entries Mimir adds (the same shape for settings.json and the plugin)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for event in EVENTS:
        entry: dict[str, Any] = {
            "hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT}]
        }
        if event in TOOL_EVENTS:
            entry = {"matcher": "*", **entry}
        out[event] = [entry]
    return out


def _is_ours(entry: Any) -> bool:
    hooks = entry.get("hooks") if isinstance(entry, dict) else None
    return isinstance(hooks, list) and any(
        isinstance(h, dict) and "hook claude-code" in str(h.get("command", "")) for h in hooks
    )


def setup(env: SetupEnv) -> list[str]:
    """Merge the hooks into ``~/.claude/settings.json`` and add the MCP server."""
    path = env.user_home / ".claude" / "settings.json"
    settings = env.read_json(path)
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise env.error(f"{path}: 'hooks' is not an object; fix it by hand first")
    for event, entries in hooks_config(env.hook_command("claude-code")).items():
        kept = [e for e in hooks.get(event) or [] if not _is_ours(e)]
        hooks[event] = [*kept, *entries]
    done = [env.write_json(path, settings, "hooks for " + ", ".join(EVENTS))]
    done.append(
        env.run_host_cli(
            "claude",
            [
                "mcp",
                "add",
                "--scope",
                "user",
                *env.env_args("-e"),
                MCP_NAME,
                "--",
                *env.mcp_command(),
            ],
            what="the MCP server",
            undo=["mcp", "remove", "--scope", "user", MCP_NAME],
        )
    )
    return done


def uninstall(env: SetupEnv) -> list[str]:
    """Remove exactly the hooks and the MCP server that setup added."""
    path = env.user_home / ".claude" / "settings.json"
    done: list[str] = []
    if path.exists():
        settings = env.read_json(path)
        hooks = settings.get("hooks")
        if isinstance(hooks, dict):
            for event in list(hooks):
                entries = hooks[event]
                if isinstance(entries, list):
                    kept = [e for e in entries if not _is_ours(e)]
                    if kept:
                        hooks[event] = kept
                    else:
                        del hooks[event]
            if not hooks:
                del settings["hooks"]
            done.append(env.write_json(path, settings, "Mimir's hooks removed"))
    done.append(
        env.run_host_cli(
            "claude",
            ["mcp", "remove", "--scope", "user", MCP_NAME],
            what="the MCP server",
            undo=None,
        )
    )
    return done
