"""The one list of hosts Mimir wires itself into from the command line.

Everything that names a host is derived from :data:`HOSTS`: the choices of ``mimir hook``,
``mimir setup`` and ``mimir uninstall``, the hook's usage text, the setup targets and the hook
dispatcher. Adding a host is one entry here, its own folder and its extra, nothing else (see
``docs/architecture.md``, "How to add a host").

This module is data only (modules are named by strings and imported lazily by whoever needs
them): ``mimir hook`` imports it on every tool call, so it must stay as light as a constant.
"""

from __future__ import annotations

from typing import NamedTuple


class Host(NamedTuple):
    """One host: how ``mimir hook``/``setup``/``uninstall`` reach it."""

    #: The name on the command line: ``mimir hook <name>``, ``mimir setup <name>``.
    name: str
    #: The module with ``handle(payload, ctx) -> dict | None`` when ``hook`` is true.
    module: str
    #: The module with ``setup(env) -> list[str]`` and ``uninstall(env) -> list[str]``.
    setup: str
    #: Whether the host runs ``mimir hook <name>`` (a process per event).
    hook: bool
    #: The host events the hooks are installed for (empty for a host without hooks).
    events: tuple[str, ...] = ()
    #: The ``pip install mimir-lessons[<extra>]`` the host needs beyond the core ("": none).
    extra: str = ""


HOSTS: tuple[Host, ...] = (
    Host(
        "claude-code",
        module="mimir_integrations.claude_code",
        setup="mimir_integrations.claude_code",
        hook=True,
        events=(
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUse",
            "PostToolUseFailure",
            "Stop",
            "SessionEnd",
            "PreCompact",
        ),
        extra="mcp",
    ),
    Host(
        "cline",
        module="mimir_integrations.cline",
        setup="mimir_integrations.cline",
        hook=True,
        # Hook file names Cline runs (both generations map these names to their events).
        events=(
            "TaskStart",
            "TaskResume",
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUse",
            "TaskComplete",
            "TaskCancel",
            "PreCompact",
        ),
        extra="mcp",
    ),
    Host(
        "codex",
        module="mimir_integrations.codex",
        setup="mimir_integrations.codex",
        hook=True,
        events=(
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUse",
            "Stop",
            "SessionEnd",
            "PreCompact",
        ),
        extra="mcp",
    ),
    Host(
        "gemini",
        module="mimir_integrations.gemini",
        setup="mimir_integrations.gemini",
        hook=True,
        events=(
            "SessionStart",
            "BeforeAgent",
            "BeforeTool",
            "AfterTool",
            "AfterAgent",
            "SessionEnd",
        ),
        extra="mcp",
    ),
    Host(
        "copilot",
        module="mimir_integrations.copilot",
        setup="mimir_integrations.copilot",
        hook=True,
        # Copilot CLI's camelCase events (their hooks read a top-level additionalContext).
        events=(
            "sessionStart",
            "userPromptSubmitted",
            "preToolUse",
            "postToolUse",
            "postToolUseFailure",
            "agentStop",
            "sessionEnd",
        ),
        extra="mcp",
    ),
    Host(
        "hermes",
        module="mimir_integrations.hermes",
        setup="mimir_integrations.hermes_setup",
        hook=False,
        extra="hermes",
    ),
)


def host(name: str) -> Host:
    """The host called ``name``; raises ``KeyError`` for any other name."""
    for h in HOSTS:
        if h.name == name:
            return h
    raise KeyError(name)


def hook_modules() -> dict[str, str]:
    """``mimir hook <name>`` → the module whose ``handle`` answers it."""
    return {h.name: h.module for h in HOSTS if h.hook}


def setup_targets() -> dict[str, str]:
    """``mimir setup <name>`` → the module with its ``setup`` and ``uninstall``."""
    return {h.name: h.setup for h in HOSTS}


def hook_usage() -> str:
    """The usage line of ``mimir hook``."""
    names = ",".join(hook_modules())
    return f"usage: mimir hook {{{names}}} [--home DIR] | mimir hook --config FILE [--home DIR]"
