"""``MimirMiddleware`` for ``create_agent``: lessons before each model call, records after."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from hashlib import sha256
from typing import Any

from mimir_core.extras import requires_extra
from mimir_core.graph_steps import mark_tool_errors
from mimir_core.observations.tool_call import note_after_failure, note_before, with_note
from mimir_core.turns import action_text, split_turns, turn_records

from .tools import SOURCE, get_tools, open_mimir

with requires_extra("mimir_integrations.langchain", "langchain"):
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_core.messages import SystemMessage, ToolMessage, convert_to_openai_messages
    from langchain_core.tools import BaseTool

log = logging.getLogger("mimir.langchain")


def openai_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """LangChain messages in the OpenAI format Mimir reads (failed tool results as errors)."""
    return mark_tool_errors(messages, convert_to_openai_messages(list(messages)))


class MimirMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """Experience memory for a LangChain agent.

    * Before each model call, the lessons relevant to the user's request (``Mimir.context``) are
      added to the system message of that call only: they are never stored in the state.
    * A tool call that fails is recorded as a failure right away (once per tool call id).
    * The repeat guard: a tool result says when that very call failed here before on this
      task, and what worked instead.
    * After the run, its attempts (``mimir_core.turns.turn_records`` of the last turn: each
      failed call, and the calls that worked after the last failure) are recorded once.
    * ``tools=True`` also gives the agent Mimir's tools.

    Memory failures are logged and never fail the agent.
    """

    def __init__(
        self,
        mimir: Any = None,
        *,
        budget_chars: int = 2000,
        scope: str | None = None,
        tools: bool = False,
        cache_seconds: float = 60.0,
    ) -> None:
        super().__init__()
        self.mimir = open_mimir(mimir)
        self.budget_chars = budget_chars
        self.scope = scope
        self.cache_seconds = cache_seconds
        self.tools: list[BaseTool] = get_tools(self.mimir) if tools else []
        self._cache: dict[str, tuple[float, str]] = {}

    # -- lessons before the model call ---------------------------------------------------------

    def lessons_for(self, messages: Sequence[Any]) -> str:
        """The lessons for the latest user request ("" when none or on failure)."""
        turns = split_turns(openai_messages(messages))
        query = turns[-1].user_text if turns else ""
        if not query:
            return ""
        hit = self._cache.get(query)
        if hit is not None and time.monotonic() - hit[0] < self.cache_seconds:
            return hit[1]
        try:
            text = str(self.mimir.context(query, budget_chars=self.budget_chars, scope=self.scope))
        except Exception as exc:  # memory must never stop the agent
            log.warning("mimir: lessons unavailable: %s", exc)
            return ""
        self._cache[query] = (time.monotonic(), text)
        if len(self._cache) > 256:
            self._cache.pop(next(iter(self._cache)))
        return text

    def _with_lessons(self, request: ModelRequest, lessons: str) -> ModelRequest:
        if not lessons:
            return request
        system = request.system_message
        if system is not None and isinstance(system.content, list):
            # Content blocks (say, with a cache_control) stay as they are; the lessons are one
            # more text block after them.
            blocks = [*system.content, {"type": "text", "text": lessons}]
            return request.override(system_message=system.model_copy(update={"content": blocks}))
        base = system.text if system is not None else ""
        merged = f"{base}\n\n{lessons}" if base else lessons
        return request.override(system_message=SystemMessage(content=merged))

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> Any:
        return handler(self._with_lessons(request, self.lessons_for(request.messages)))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Any:
        lessons = await asyncio.to_thread(self.lessons_for, request.messages)
        return await handler(self._with_lessons(request, lessons))

    # -- tool failures -------------------------------------------------------------------------

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        note = self._note_before(request)
        try:
            result = handler(request)
        except Exception as exc:
            self._tool_failed(request, _failed_message(request, exc))
            raise
        return self._after_tool(request, result, note)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        note = await asyncio.to_thread(self._note_before, request)
        try:
            result = await handler(request)
        except Exception as exc:
            await asyncio.to_thread(self._tool_failed, request, _failed_message(request, exc))
            raise
        return await asyncio.to_thread(self._after_tool, request, result, note)

    def _note_before(self, request: Any) -> str:
        """The repeat guard: this very call failed here before on this task ("" when not)."""
        call = request.tool_call
        task = self._task(request)
        return note_before(self.mimir, call["name"], call.get("args"), task=task, scope=self.scope)

    def _after_tool(self, request: Any, result: Any, note: str) -> Any:
        """The result, with the guard's note (or, after a failure, what was tried before on
        this task) after it; a failure is recorded right away."""
        if not isinstance(result, ToolMessage):
            return result
        if result.status == "error":
            if not note:  # asked before the failure is recorded: "before" means before this
                call = request.tool_call
                task = self._task(request)
                note = note_after_failure(
                    self.mimir, call["name"], call.get("args"), task=task, scope=self.scope
                )
            self._tool_failed(request, result)
        return result.model_copy(update={"content": with_note(result.content, note)})

    def _task(self, request: Any) -> str:
        turns = split_turns(openai_messages((request.state or {}).get("messages") or []))
        return turns[-1].user_text if turns else ""

    def _tool_failed(self, request: Any, message: ToolMessage) -> None:
        call = request.tool_call
        messages = [*((request.state or {}).get("messages") or []), message]
        action = action_text(call["name"], call.get("args") or {})
        thread = _thread_of(getattr(request, "runtime", None))
        items = [
            i
            for i in self._items(messages, thread)
            if i["outcome"] != "success" and i["action"] == action
        ]
        self._record(items)

    # -- the run's attempts after it -----------------------------------------------------------

    def after_agent(self, state: Any, runtime: Any) -> None:
        self._record(self._items(state.get("messages") or [], _thread_of(runtime)))
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> None:
        items = self._items(state.get("messages") or [], _thread_of(runtime))
        await asyncio.to_thread(self._record, items)
        return None

    def _items(self, messages: Sequence[Any], thread: str | None) -> list[dict[str, Any]]:
        try:
            items = turn_records(
                openai_messages(messages),
                source=SOURCE,
                scope=self.scope,
                last_turn_only=True,
                run_id=_turn_id(messages),
            )
        except Exception as exc:
            log.warning("mimir: could not read the run: %s", exc)
            return []
        for item in items:  # the same attempt in another thread is another record
            item["thread_id"] = thread
            if thread is not None:
                item["idempotency_key"] += ":" + sha256(thread.encode()).hexdigest()[:16]
        return items

    def _record(self, items: list[dict[str, Any]]) -> None:
        if not items:
            return
        try:
            self.mimir.record_many(items)
        except Exception as exc:  # memory must never stop the agent
            log.warning("mimir: could not record the run: %s", exc)


def _failed_message(request: Any, exc: BaseException) -> ToolMessage:
    call = request.tool_call
    return ToolMessage(
        content=f"{type(exc).__name__}: {exc}",
        tool_call_id=call.get("id") or "",
        name=call.get("name"),
        status="error",
    )


def _turn_id(messages: Sequence[Any]) -> str | None:
    """The id of the last user message: the agent's state gives every message one, which is the
    same on each re-run of that turn and new in every other run (tool call ids can repeat)."""
    for msg in reversed(messages):
        if getattr(msg, "type", None) == "human":
            ident = getattr(msg, "id", None)
            return None if ident is None else str(ident)
    return None


def _thread_of(runtime: Any) -> str | None:
    info = getattr(runtime, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    return None if thread is None else str(thread)
