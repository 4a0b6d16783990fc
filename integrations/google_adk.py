"""Mimir for Google ADK: a plugin, a memory service and the tools (verified with google-adk 2.13).

``Runner(app=App(..., plugins=[MimirPlugin(mimir)]), memory_service=MimirMemoryService(mimir))``:

* :class:`MimirPlugin` (a ``BasePlugin``: it applies to every agent of the runner):
  ``before_model_callback`` appends the lessons and evidence for the user's request
  (:meth:`RunMemory.context`) to that request's system instruction; ``before_tool_callback`` asks
  the repeat guard; ``after_tool_callback`` records a failed result at once (ADK's convention
  ``{"status": "error", "error_message": ...}``, or an ``error`` field) and adds what was tried
  before to the result as ``mimir_memory``; ``on_tool_error_callback`` records a tool's exception
  (the run still ends as ADK decides); ``after_run_callback`` records the run's attempts.
* :class:`MimirMemoryService` (a ``BaseMemoryService``): ``add_session_to_memory`` records a
  session's attempts; ``search_memory`` answers with relevant lessons, then past attempts (what
  ADK's ``load_memory`` and ``preload_memory`` tools show the model).
* :func:`mimir_tools`: Mimir's tools as ADK ``BaseTool`` s answering ``{"result", "data"}`` or
  ``{"error"}``.

Records are keyed on the session, so the plugin and the memory service never store an attempt
twice. Everything fails open.

Runnable example (offline; ``pip install 'mimir-lessons[google-adk]'``)::

    import asyncio
    import tempfile

    from mimir_core import Mimir
    from mimir_integrations.google_adk import MimirMemoryService, MimirPlugin

    mimir = Mimir(tempfile.mkdtemp())
    mimir.record_failure("run the api tests", "pytest tests/api", "table 'orders' does not exist")

    plugin = MimirPlugin(mimir)          # App(name=..., root_agent=agent, plugins=[plugin])
    memory = MimirMemoryService(mimir)   # Runner(app=app, memory_service=memory, ...)
    found = asyncio.run(memory.search_memory(app_name="app", user_id="u1", query="api tests"))
    print(found.memories[0].content.parts[0].text.splitlines()[1])   # what ADK's load_memory shows
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from mimir_core.agent_run import RunMemory, call_message, last_user_text, tool_answer, tool_message
from mimir_core.conversation import function_schemas
from mimir_core.extras import requires_extra
from mimir_core.retrieval import retrieve

with requires_extra("mimir_integrations.google_adk", "google-adk"):
    from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
    from google.adk.memory.memory_entry import MemoryEntry
    from google.adk.plugins.base_plugin import BasePlugin
    from google.adk.tools.base_tool import BaseTool
    from google.genai import types

log = logging.getLogger("mimir.google_adk")

SOURCE = "google-adk"
NOTE_KEY = "mimir_memory"  # where a tool result carries Mimir's note
MAX_NOTES = 512


def openai_messages(contents: Sequence[Any]) -> list[dict[str, Any]]:
    """ADK/Gemini ``Content`` s (a request's contents, or a session's event contents) in the
    OpenAI chat format Mimir reads; a function response that reports an error is a failure."""
    out: list[dict[str, Any]] = []
    for content in contents:
        if content is None:
            continue
        texts, calls = [], []
        for part in content.parts or []:
            if part.function_call is not None:
                fc = part.function_call
                calls.append((fc.id or "", fc.name or "", dict(fc.args or {})))
            elif part.function_response is not None:
                fr = part.function_response
                response = {k: v for k, v in (fr.response or {}).items() if k != NOTE_KEY}
                failed, text = _outcome(response)
                out.append(tool_message(fr.id or "", text, failed=failed))
            elif part.text and not part.thought:
                texts.append(part.text)
        if calls:
            out.append(call_message(calls, "\n".join(texts)))
        elif texts:
            role = "user" if content.role == "user" else "assistant"
            out.append({"role": role, "content": "\n".join(texts)})
    return out


def _outcome(response: dict[str, Any]) -> tuple[bool, Any]:
    """(failed, what to record) of a function response."""
    status = str(response.get("status", "")).lower()
    error = response.get("error") or response.get("error_message")
    if status == "error" or error:
        return True, error or response
    return False, response.get("result", response) if len(response) == 1 else response


class MimirPlugin(BasePlugin):  # type: ignore[misc]
    """Experience memory for every agent of an ADK runner (see the module doc)."""

    def __init__(
        self,
        mimir: Any = None,
        *,
        scope: str | None = None,
        budget_chars: int = 2000,
        name: str = "mimir",
    ) -> None:
        super().__init__(name=name)
        self.memory = RunMemory(mimir, source=SOURCE, scope=scope, budget_chars=budget_chars)
        self._notes: dict[str, str] = {}  # function call id -> the repeat guard's note

    async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> None:
        query = last_user_text(openai_messages(llm_request.contents or []))
        block = await asyncio.to_thread(self.memory.context, query)
        if block:
            llm_request.append_instructions([block])

    async def before_tool_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any
    ) -> None:
        task = last_user_text(_history(tool_context))
        note = await asyncio.to_thread(self.memory.before_tool, tool.name, tool_args, task=task)
        if note and tool_context.function_call_id:
            self._notes[tool_context.function_call_id] = note
            while len(self._notes) > MAX_NOTES:
                self._notes.pop(next(iter(self._notes)))

    async def after_tool_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any, result: Any
    ) -> dict[str, Any] | None:
        note = self._notes.pop(tool_context.function_call_id or "", "")
        if isinstance(result, dict):
            failed, text = _outcome(result)
            if failed:
                said = await self._failed(tool, tool_args, tool_context, text)
                note = note or said
        if not note:
            return None
        base = result if isinstance(result, dict) else {"result": result}
        return {**base, NOTE_KEY: note}

    async def on_tool_error_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any, error: Exception
    ) -> None:
        if isinstance(error, Exception):  # not a cancellation
            text = f"{type(error).__name__}: {error}"
            await self._failed(tool, tool_args, tool_context, text)
        return None

    async def _failed(self, tool: Any, args: dict[str, Any], ctx: Any, text: Any) -> str:
        call_id = ctx.function_call_id or ""
        history = _history(ctx)
        if not any(call["id"] == call_id for m in history for call in m.get("tool_calls", [])):
            history.append(call_message([(call_id, tool.name, args)]))
        history.append(tool_message(call_id, text, failed=True))
        session = _session_id(ctx)
        return await asyncio.to_thread(
            self.memory.tool_failed, history, tool.name, args, run_id=session, session_id=session
        )

    async def after_run_callback(self, *, invocation_context: Any) -> None:
        session = invocation_context.session
        messages = openai_messages([e.content for e in session.events])
        await asyncio.to_thread(
            self.memory.record_run, messages, run_id=session.id, session_id=session.id
        )


class MimirMemoryService(BaseMemoryService):  # type: ignore[misc]
    """ADK's long-term memory on Mimir's store (see the module doc)."""

    def __init__(self, mimir: Any = None, *, scope: str | None = None, k: int = 5) -> None:
        self.memory = RunMemory(mimir, source=SOURCE, scope=scope)
        self.k = k

    async def add_session_to_memory(self, session: Any) -> None:
        messages = openai_messages([e.content for e in session.events])
        await asyncio.to_thread(
            self.memory.record_run,
            messages,
            run_id=session.id,
            session_id=session.id,
            last_turn_only=False,
        )

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> Any:
        try:
            docs = await asyncio.to_thread(
                retrieve, self.memory.mimir, query, self.k, scope=self.memory.scope
            )
        except Exception as exc:  # memory must never stop the agent
            log.warning("mimir: search failed: %s", exc)
            docs = []
        entries = [
            MemoryEntry(
                id=d.id,
                author="mimir",
                content=types.Content(role="user", parts=[types.Part(text=d.text)]),
                custom_metadata={**d.metadata, "score": d.score},
            )
            for d in docs
        ]
        return SearchMemoryResponse(memories=entries)


class MimirTool(BaseTool):  # type: ignore[misc]
    """One of Mimir's tools (:data:`mimir_core.tools.TOOLS`) as an ADK tool."""

    def __init__(self, schema: dict[str, Any], memory: RunMemory) -> None:
        super().__init__(name=schema["name"], description=schema["description"])
        self._schema = schema
        self._memory = memory

    def _get_declaration(self) -> Any:
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters_json_schema=self._schema["parameters"],
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: Any) -> Any:
        mimir = self._memory.mimir
        return await asyncio.to_thread(tool_answer, mimir, self.name, args, source=SOURCE)


def mimir_tools(mimir: Any = None, names: Sequence[str] | None = None) -> list[MimirTool]:
    """Mimir's tools (all, or those ``names``) as ADK tools on one Mimir."""
    memory = RunMemory(mimir, source=SOURCE)
    return [MimirTool(s, memory) for s in function_schemas() if names is None or s["name"] in names]


def _history(ctx: Any) -> list[dict[str, Any]]:
    try:
        return openai_messages([e.content for e in ctx.session.events])
    except Exception:  # no session to read: the record still names the call
        return []


def _session_id(ctx: Any) -> str | None:
    try:
        return str(ctx.session.id)
    except Exception:  # a context without a session: the record is keyed without one
        return None


__all__ = ["MimirMemoryService", "MimirPlugin", "MimirTool", "mimir_tools", "openai_messages"]
