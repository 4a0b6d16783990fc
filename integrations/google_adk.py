"""Mimir for Google ADK: a plugin, a memory service and the tools (verified with google-adk 2.13).

``App(..., plugins=[MimirPlugin()])``, ``Runner(..., memory_service=MimirMemoryService())``
(docs/google-adk.md); the work is the core's (:class:`RunMemory`, ``gemini_messages``). Records
are keyed on the session, so plugin and memory service never store one twice. All fails open.

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
from collections.abc import Sequence
from functools import partial
from typing import Any

from mimir_core.extras import requires_extra
from mimir_core.hosting.agent_run import RunMemory, error_text, last_user_text, tool_schemas
from mimir_core.hosting.wire_formats import gemini_messages, result_outcome

with requires_extra("mimir_integrations.google_adk", "google-adk"):
    from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
    from google.adk.memory.memory_entry import MemoryEntry
    from google.adk.plugins.base_plugin import BasePlugin
    from google.adk.tools.base_tool import BaseTool
    from google.genai import types

SOURCE = "google-adk"
NOTE_KEY = "mimir_memory"  # where a tool result carries Mimir's note

#: ADK/Gemini ``Content`` s in the OpenAI chat format Mimir reads (Mimir's note dropped).
openai_messages = partial(gemini_messages, drop_key=NOTE_KEY)


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

    async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> None:
        query = last_user_text(openai_messages(llm_request.contents or []))
        if block := await asyncio.to_thread(self.memory.context, query):
            llm_request.append_instructions([block])

    async def before_tool_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any
    ) -> None:
        call_id, (history, _id) = tool_context.function_call_id or "", _session(tool_context)
        await asyncio.to_thread(self.memory.guard, call_id, tool.name, tool_args, history)

    async def after_tool_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any, result: Any
    ) -> dict[str, Any] | None:
        failed, text = result_outcome(result) if isinstance(result, dict) else (False, "")
        note = await self._settle(tool, tool_args, tool_context, text if failed else None)
        base = result if isinstance(result, dict) else {"result": result}
        return {**base, NOTE_KEY: note} if note else None

    async def on_tool_error_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any, error: Exception
    ) -> None:
        if isinstance(error, Exception):  # not a cancellation
            await self._settle(tool, tool_args, tool_context, error_text(error))

    async def _settle(self, tool: Any, args: dict[str, Any], ctx: Any, error: Any) -> str:
        call_id, (history, session) = ctx.function_call_id or "", _session(ctx)
        settle = partial(self.memory.settle, run_id=session, session_id=session)
        return await asyncio.to_thread(settle, call_id, tool.name, args, history, error)

    async def after_run_callback(self, *, invocation_context: Any) -> None:
        await _record(self.memory, invocation_context.session, last_turn_only=True)


class MimirMemoryService(BaseMemoryService):  # type: ignore[misc]
    """ADK's long-term memory on Mimir's store (see the module doc)."""

    def __init__(self, mimir: Any = None, *, scope: str | None = None, k: int = 5) -> None:
        self.memory = RunMemory(mimir, source=SOURCE, scope=scope)
        self.k = k

    async def add_session_to_memory(self, session: Any) -> None:
        await _record(self.memory, session, last_turn_only=False)

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> Any:
        docs = await asyncio.to_thread(self.memory.search, query, self.k)
        return SearchMemoryResponse(memories=[_entry(d) for d in docs])


def _entry(doc: Any) -> Any:
    """A found lesson or attempt as what ADK's ``load_memory`` shows the model."""
    content = types.Content(role="user", parts=[types.Part(text=doc.text)])
    meta = {**doc.metadata, "score": doc.score}
    return MemoryEntry(id=doc.id, author="mimir", content=content, custom_metadata=meta)


class MimirTool(BaseTool):  # type: ignore[misc]
    """One of Mimir's tools (:data:`mimir_core.tools.specs.TOOLS`) as an ADK tool."""

    def __init__(self, schema: dict[str, Any], memory: RunMemory) -> None:
        super().__init__(name=schema["name"], description=schema["description"])
        self._schema, self._memory = schema, memory

    def _get_declaration(self) -> Any:
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters_json_schema=self._schema["parameters"],
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: Any) -> Any:
        return await asyncio.to_thread(self._memory.answer, self.name, args)


def mimir_tools(mimir: Any = None, names: Sequence[str] | None = None) -> list[MimirTool]:
    """Mimir's tools (all, or those ``names``) as ADK tools on one Mimir."""
    memory = RunMemory(mimir, source=SOURCE)
    return [MimirTool(s, memory) for s in tool_schemas(names)]


async def _record(memory: RunMemory, session: Any, *, last_turn_only: bool) -> None:
    """Record a session's attempts, keyed on the session (so never twice)."""
    messages = openai_messages([e.content for e in session.events])
    keys = {"run_id": session.id, "session_id": session.id, "last_turn_only": last_turn_only}
    await asyncio.to_thread(partial(memory.record_run, **keys), messages)


def _session(ctx: Any) -> tuple[list[dict[str, Any]], str | None]:
    """The history and the id of a tool context's session."""
    try:
        session = ctx.session
        return openai_messages([e.content for e in session.events]), str(session.id)
    except Exception:  # a context without a session: the record names the call, keyed without one
        return [], None


__all__ = ["MimirMemoryService", "MimirPlugin", "MimirTool", "mimir_tools", "openai_messages"]
