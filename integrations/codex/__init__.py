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
from ..claude_hooks import answer
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
    """Capture one Codex event; answer with lessons, past attempts or the repeat guard
    (:func:`..claude_hooks.answer`)."""
    return answer(from_codex(payload), ctx)


# -- setup -------------------------------------------------------------------------------------


def codex_home(env: SetupEnv) -> Path:
    """``$CODEX_HOME``, else ``~/.codex``: where Codex reads ``hooks.json``."""
    found = os.environ.get("CODEX_HOME")
    return Path(found).expanduser() if found else env.user_home / ".codex"


def hooks_config(command: str) -> dict[str, list[dict[str, Any]]]:
    """The ``hooks`` entries Mimir adds to ``hooks.json``; no ``matcher``: Codex then runs the
    hook for every tool (its matcher is a regex)."""
    return hook_entries.command_entries(EVENTS, command, timeout=HOOK_TIMEOUT)


_is_ours = hook_entries.owned_by("codex")


def setup(env: SetupEnv) -> list[str]:
    """Merge the hooks into ``hooks.json`` and add the MCP server."""
    path = codex_home(env) / "hooks.json"
    done = [hook_entries.install(env, path, hooks_config(env.hook_command("codex")), _is_ours)]
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
    done = hook_entries.uninstall(env, codex_home(env) / "hooks.json", _is_ours)
    done.append(
        env.run_host_cli("codex", ["mcp", "remove", MCP_NAME], what="the MCP server", undo=None)
    )
    return done
