"""Hermes Agent memory provider: ``memory.provider: mimir`` (verified with hermes-agent 0.19).

A thin translation of Hermes' ``MemoryProvider`` calls into
:class:`mimir_core.hosting.conversation.ConversationMemory`: ``prefetch`` → the lessons for the turn
(within :data:`PREFETCH_TIMEOUT`; Hermes gives up after 8 s); ``sync_turn`` → the turn's attempts,
spooled at once; ``on_session_end``, ``on_pre_compress`` and ``shutdown`` capture the whole
history again (idempotent: in ``hermes -z`` ``on_session_end`` runs before the last
``sync_turn``), ``shutdown`` then consolidates when due; the tools are
:data:`mimir_core.tools.specs.TOOLS`. ``on_memory_write`` is left to the base class: a note the
agent saves is no attempt with an outcome. Every callback fails open. Storage: ``$MIMIR_HOME``, else
``mimir setup hermes --home``, else ``<hermes_home>/mimir``. Nothing here imports ``mcp``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

try:  # the base class exists only inside Hermes; elsewhere (tests, tools) a plain object
    from agent.memory_provider import MemoryProvider
except ImportError:  # pragma: no cover - depends on the environment
    MemoryProvider = object  # type: ignore[misc,assignment]

log = logging.getLogger("mimir.hermes")

SOURCE = "hermes"
PREFETCH_TIMEOUT = 6.5  # Hermes abandons a provider's prefetch after 8 s
TOOL_TIMEOUT = 60.0
FLUSH_TIMEOUT = 15.0
#: Said once per session, after the core's instructions (the same for every host).
HERMES_NOTE = (
    "In this agent, the lessons relevant to each user message are added to it automatically as "
    "recalled memory (<mimir-memory>), and every tool call is recorded with its outcome."
)


class MimirMemoryProvider(MemoryProvider):  # type: ignore[misc,valid-type]
    """Mimir as a Hermes Agent memory provider (see the module doc)."""

    def __init__(self, *, home: str | os.PathLike[str] | None = None, plugin_dir: Any = None):
        self._home = str(home) if home else _configured_home(plugin_dir)
        self._memory: Any = None  # ConversationMemory, once initialised

    @property
    def name(self) -> str:
        return "mimir"

    def is_available(self) -> bool:
        """True when Mimir's dependencies are installed (no network, no store opened)."""
        import importlib.util

        return all(importlib.util.find_spec(m) is not None for m in ("lancedb", "fastembed"))

    def initialize(self, session_id: str = "", **kwargs: Any) -> None:
        """Resolve the home and the project, and start opening the store in the background."""
        if self._memory is not None:
            return
        try:
            from mimir_core.hosting.conversation import ConversationMemory, log_to_file
            from mimir_core.scope import scope_for
            from mimir_core.settings import MimirSettings

            settings = MimirSettings()
            if not os.environ.get("MIMIR_HOME"):
                hermes = kwargs.get("hermes_home")
                if not isinstance(hermes, (str, os.PathLike)) or not str(hermes).strip():
                    hermes = os.environ.get("HERMES_HOME") or "~/.hermes"
                settings.home = Path(self._home or Path(hermes).expanduser() / "mimir")
            log_to_file(Path(settings.home) / "logs" / "hermes.log", SOURCE)
            warn = kwargs.get("warning_callback")
            self._memory = ConversationMemory(
                settings,
                source=SOURCE,
                scope=settings.scope or scope_for(os.getcwd()),
                # Subagents, cron and flush agents run in other contexts: they read, never record.
                writes=kwargs.get("agent_context") in (None, "primary"),
                on_error=warn if callable(warn) else None,
            )
            self._memory.session_id = str(session_id or "")
        except Exception:
            log.warning("mimir: initialize failed; memory is off", exc_info=True)

    def system_prompt_block(self) -> str:
        """What Mimir is and how to use its tools (the core's wording, plus how Hermes gets it)."""
        try:
            from mimir_core.hosting.conversation import system_note

            return system_note(HERMES_NOTE)
        except Exception:
            log.warning("mimir: no system prompt block", exc_info=True)
            return ""

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        """The lessons relevant to this turn ("" when none, or when it takes too long)."""
        return self._memory.prefetch(query, PREFETCH_TIMEOUT) if self._memory is not None else ""

    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        """Store the turn just captured and touch the lessons: the next prefetch is warm."""
        if self._memory is not None:
            self._memory.warm(query)

    def sync_turn(
        self,
        user_content: str,
        assistant_content: str,
        *,
        session_id: str = "",
        messages: list[dict[str, Any]] | None = None,
    ) -> None:
        """Capture the attempts of the turn that just ended."""
        self.on_session_switch(session_id)
        if self._memory is not None:
            self._memory.capture(messages, last_turn_only=True)

    def on_session_end(self, messages: list[dict[str, Any]]) -> None:
        """Capture the whole conversation and store it."""
        if self._memory is not None:
            self._memory.capture(messages)
            self._memory.flush(FLUSH_TIMEOUT)

    def on_pre_compress(self, messages: list[dict[str, Any]]) -> str:
        """Capture what is about to be summarised; the summary keeps what failed."""
        return self._memory.pre_compress(messages) if self._memory is not None else ""

    def on_session_switch(self, new_session_id: str, **kwargs: Any) -> None:
        """Records from now on carry the new session id."""
        if self._memory is not None and isinstance(new_session_id, str) and new_session_id:
            self._memory.session_id = new_session_id

    def shutdown(self) -> None:
        """Store what is pending; start a consolidation when due (``MIMIR_AUTO_CONSOLIDATE``)."""
        if self._memory is not None:
            self._memory.finish(FLUSH_TIMEOUT)

    def backup_paths(self) -> list[str]:
        """Mimir's home, for ``hermes backup``."""
        return [str(self._memory.home)] if self._memory is not None else []

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        """Mimir's tools in Hermes' format: bare ``{name, description, parameters}``."""
        try:
            from mimir_core.hosting.conversation import function_schemas

            return function_schemas()
        except Exception:
            log.warning("mimir: cannot list tools", exc_info=True)
            return []

    def handle_tool_call(self, tool_name: str, args: dict[str, Any], **kwargs: Any) -> str:
        """Run a Mimir tool. JSON ``{"result": text, "data": {...}}`` or ``{"error": ...}``
        (the message names the bad argument)."""
        if self._memory is None:
            return json.dumps({"error": "RuntimeError: Mimir was not initialised"})
        return str(self._memory.call_tool_json(tool_name, args, TOOL_TIMEOUT))


def _configured_home(plugin_dir: Any) -> str | None:
    """The home ``mimir setup hermes --home`` wrote next to the plugin (``mimir.json``)."""
    if plugin_dir is None:
        return None
    try:
        data = json.loads((Path(plugin_dir) / "mimir.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return None
    home = data.get("home") if isinstance(data, dict) else None
    return home if isinstance(home, str) and home else None


def register(ctx: Any) -> None:
    """Entry point (``hermes_agent.memory_providers``): hand Hermes a provider."""
    ctx.register_memory_provider(MimirMemoryProvider())
