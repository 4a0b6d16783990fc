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

from .. import hook_entries
from ..claude_hooks import answer
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
    are relevant, and the repeat guard before a tool runs (:func:`..claude_hooks.answer`)."""
    return answer(from_claude_code(payload), ctx)


# -- setup -------------------------------------------------------------------------------------


def hooks_config(command: str) -> dict[str, list[dict[str, Any]]]:
    """The ``hooks`` entries Mimir adds (the same shape for settings.json and the plugin)."""
    return hook_entries.command_entries(
        EVENTS, command, timeout=HOOK_TIMEOUT, matcher="*", matcher_events=TOOL_EVENTS
    )


_is_ours = hook_entries.owned_by("claude-code")


def setup(env: SetupEnv) -> list[str]:
    """Merge the hooks into ``~/.claude/settings.json`` and add the MCP server."""
    path = env.user_home / ".claude" / "settings.json"
    ours = hooks_config(env.hook_command("claude-code"))
    done = [hook_entries.install(env, path, ours, _is_ours)]
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
    done = hook_entries.uninstall(env, path, _is_ours)
    done.append(
        env.run_host_cli(
            "claude",
            ["mcp", "remove", "--scope", "user", MCP_NAME],
            what="the MCP server",
            undo=None,
        )
    )
    return done
