"""Memory for an agent host that keeps an OpenAI-style conversation: :class:`ConversationMemory`.

A host such as Hermes Agent hands its memory the user's message before each turn, the turn's
messages after it, and the whole history at the end; it offers the memory's tools to its model
and calls them by name. :class:`ConversationMemory` is everything such a host needs, so that its
adapter only translates calls:

* :meth:`~ConversationMemory.prefetch`: the lessons block for a turn (:meth:`Mimir.context`),
  within a time bound, remembering which lessons were shown (the turn's records carry them as
  ``recalled_lesson_ids``, the evidence the lesson gate reads);
* :meth:`~ConversationMemory.capture`: the attempts of a turn or a history
  (:func:`mimir_core.hosting.turns.turn_records`), spooled at once and stored on the worker thread;
  records already spooled by this memory are not spooled again;
* :meth:`~ConversationMemory.pre_compress`: the failed attempts of what is about to be
  summarised, as a short text the summary can keep;
* :meth:`~ConversationMemory.finish`: store what is pending, start a consolidation when due;
* :func:`function_schemas` and :meth:`~ConversationMemory.call_tool_json`: :data:`TOOLS` as
  OpenAI-style function schemas, and a call of one by name answered as JSON.

Threads, time bounds and durability are :class:`mimir_core.hosting.background.LiveMemory`'s. No
method raises: a failure is logged and the answer is empty, as a host callback must be. Nothing here
imports ``mcp``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from ..settings import MimirSettings
    from .background import LiveMemory

log = logging.getLogger("mimir.conversation")

#: How many user messages' shown lessons, and how many spooled keys, are remembered.
MAX_SHOWN = 64
MAX_CAPTURED = 50_000


class ConversationMemory:
    """Mimir for a conversational agent host (see the module doc).

    ``source`` names the host in every record; ``writes=False`` makes a memory that reads and
    never records (a host's subagents, cron jobs). ``on_error`` is called once with a message
    when the store cannot be opened.
    """

    def __init__(
        self,
        settings: MimirSettings,
        *,
        source: str,
        scope: str | None = None,
        writes: bool = True,
        on_error: Callable[[str], object] | None = None,
    ) -> None:
        from .background import LiveMemory

        self.source = source
        self.writes = writes
        self.session_id = ""
        self.live: LiveMemory = LiveMemory(
            settings, scope=scope, name=f"mimir-{source}", on_error=on_error
        )
        self._shown: dict[str, list[str]] = {}  # user message -> ids of the lessons shown
        self._captured: dict[str, None] = {}  # keys spooled by this memory (an ordered set)
        self._lock = threading.Lock()

    @property
    def home(self) -> Path:
        """Mimir's home directory."""
        return Path(self.live.settings.home)

    def prefetch(self, query: object, timeout: float) -> str:
        """The lessons block for ``query`` ("" when none is relevant, or after ``timeout``
        seconds)."""
        if not isinstance(query, str) or not query.strip():
            return ""
        try:
            text, ids = self.live.context(query, timeout)
        except Exception as exc:
            log.info("mimir: prefetch skipped: %s", exc)
            return ""
        with self._lock:
            self._shown[query.strip()] = ids
            while len(self._shown) > MAX_SHOWN:
                self._shown.pop(next(iter(self._shown)))
        return text

    def warm(self, query: object = None) -> None:
        """Store what was captured and run ``query`` once in the background: the next
        :meth:`prefetch` is warm."""
        try:
            self.live.warm(query if isinstance(query, str) else None)
        except Exception:
            log.info("mimir: warm-up not started", exc_info=True)

    def capture(self, messages: object, *, last_turn_only: bool = False) -> list[dict[str, Any]]:
        """Spool the records of ``messages`` (only those of the last turn with
        ``last_turn_only``) and return them all; ``[]`` for a read-only memory."""
        if not self.writes or not messages:
            return []
        try:
            from ..tools.specs import TOOLS
            from .turns import turn_records

            records = turn_records(
                messages,
                source=self.source,
                session_id=self.session_id or None,
                scope=self.live.scope,
                ignore_tools={t.name for t in TOOLS},
                last_turn_only=last_turn_only,
                lessons_for=self._lessons_shown,
                context={"host": self.source},
            )
            with self._lock:  # the store dedups too; this spares re-embedding a whole history
                fresh = [r for r in records if r["idempotency_key"] not in self._captured]
            spooled = self.live.capture(fresh)  # only these count: a later capture retries the rest
            with self._lock:
                self._captured.update((key, None) for key in spooled)
                while len(self._captured) > MAX_CAPTURED:
                    self._captured.pop(next(iter(self._captured)))
            return records
        except Exception:
            log.warning("mimir: could not capture the turn", exc_info=True)
            return []

    def _lessons_shown(self, user_text: str) -> list[str]:
        with self._lock:
            return list(self._shown.get(user_text.strip(), []))

    def pre_compress(self, messages: object) -> str:
        """Capture ``messages``; the failed attempts among them, for the summary to keep."""
        try:
            from .turns import failure_digest

            return failure_digest(self.capture(messages))
        except Exception:
            log.warning("mimir: no failure digest", exc_info=True)
            return ""

    def flush(self, timeout: float) -> bool:
        """Store everything captured so far (False when it took longer than ``timeout``)."""
        try:
            return self.live.flush(timeout)
        except Exception:
            log.warning("mimir: flush failed", exc_info=True)
            return False

    def finish(self, timeout: float) -> None:
        """Store what is pending, start a consolidation when due, let the worker end."""
        try:
            self.live.finish(timeout=timeout)
            self.live.close()
        except Exception:
            log.warning("mimir: could not finish", exc_info=True)

    def call_tool_json(self, name: object, arguments: object, timeout: float) -> str:
        """Run tool ``name``: ``{"result": text, "data": {...}}`` or ``{"error": message}`` (the
        message names the bad argument), as JSON."""
        try:
            from ..tools.specs import call_tool

            # Both are checked by the core: a bad name or argument raises a MimirError naming it.
            out = self.live.call(
                lambda m: call_tool(m, cast(Any, name), cast(Any, arguments), source=self.source),
                timeout,
            )
            return json.dumps({"result": out.text, "data": out.data}, ensure_ascii=False)
        except Exception as exc:
            log.info("mimir: tool %r failed: %s", name, exc)
            return json.dumps({"error": f"{type(exc).__name__}: {exc}"}, ensure_ascii=False)


def function_schemas() -> list[dict[str, Any]]:
    """Mimir's tools (:data:`mimir_core.tools.specs.TOOLS`) as bare OpenAI-style function schemas:
    ``{name, description, parameters}``."""
    from ..tools.specs import TOOLS

    out = []
    for tool in TOOLS:
        schema: dict[str, Any] = tool.args.model_json_schema()
        schema.pop("title", None)
        schema.setdefault("properties", {})
        out.append({"name": tool.name, "description": tool.description, "parameters": schema})
    return out


def system_note(host_note: str = "") -> str:
    """What Mimir is and how to use its tools (the same for every host), and ``host_note``."""
    from ..tools.specs import AGENT_INSTRUCTIONS

    return f"{AGENT_INSTRUCTIONS}\n{host_note}".strip()


def log_to_file(path: str | os.PathLike[str], marker: str) -> None:
    """Also write the ``mimir`` loggers' records (INFO and up) to ``path`` (0600). One such file
    per ``marker`` and process: a second call with another path replaces the first. Never
    raises."""
    path = Path(path)
    root = logging.getLogger("mimir")
    for old in [h for h in root.handlers if getattr(h, "_mimir_file", None)]:
        if old._mimir_file == (marker, str(path)):  # type: ignore[attr-defined]
            return
        if old._mimir_file[0] == marker:  # type: ignore[attr-defined]
            root.removeHandler(old)
            old.close()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handler = logging.FileHandler(path, encoding="utf-8")
        os.chmod(path, 0o600)
    except OSError:
        return
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    handler.setLevel(logging.INFO)
    handler._mimir_file = (marker, str(path))  # type: ignore[attr-defined]
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
