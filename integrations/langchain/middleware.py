"""``MimirMiddleware`` for ``create_agent``: lessons before each model call, records after."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from mimir_core.extras import requires_extra
from mimir_core.hosting.agent_run import RunMemory, last_user_text
from mimir_core.hosting.graph_steps import mark_tool_errors
from mimir_core.observations.tool_call import with_note

from .tools import SOURCE, get_tools

with requires_extra("mimir_integrations.langchain", "langchain"):
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_core.messages import SystemMessage, ToolMessage, convert_to_openai_messages
    from langchain_core.tools import BaseTool


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
    * After the run, its attempts (``mimir_core.hosting.turns.turn_records`` of the last turn: each
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
        self.memory = RunMemory(
            mimir,
            source=SOURCE,
            scope=scope,
            budget_chars=budget_chars,
            cache_seconds=cache_seconds,
        )
        self.mimir = self.memory.mimir
        self.tools: list[BaseTool] = get_tools(self.mimir) if tools else []

    # -- lessons before the model call ---------------------------------------------------------

    def lessons_for(self, messages: Sequence[Any]) -> str:
        """The lessons for the latest user request ("" when none or on failure; cached and
        failing open in :meth:`RunMemory.context`)."""
        return self.memory.context(last_user_text(openai_messages(messages)))

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
        return self.memory.before_tool(call["name"], call.get("args"), task=self._task(request))

    def _after_tool(self, request: Any, result: Any, note: str) -> Any:
        """The result, with the guard's note (or, after a failure, what was tried before on
        this task) after it; a failure is recorded right away."""
        if not isinstance(result, ToolMessage):
            return result
        if result.status == "error":
            said = self._tool_failed(request, result)  # "before" means before this failure
            note = note or said
        return result.model_copy(update={"content": with_note(result.content, note)})

    def _task(self, request: Any) -> str:
        return last_user_text(openai_messages((request.state or {}).get("messages") or []))

    def _tool_failed(self, request: Any, message: ToolMessage) -> str:
        """Record the failed call now; what was tried before on this task."""
        call = request.tool_call
        history = [*((request.state or {}).get("messages") or []), message]
        return self.memory.tool_failed(
            openai_messages(history),
            call["name"],
            call.get("args") or {},
            run_id=_turn_id(history),
            thread=_thread_of(getattr(request, "runtime", None)),
        )

    # -- the run's attempts after it -----------------------------------------------------------

    def after_agent(self, state: Any, runtime: Any) -> None:
        self._record(state.get("messages") or [], runtime)
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> None:
        await asyncio.to_thread(self._record, state.get("messages") or [], runtime)
        return None

    def _record(self, messages: Sequence[Any], runtime: Any) -> None:
        self.memory.record_run(
            openai_messages(messages), run_id=_turn_id(messages), thread=_thread_of(runtime)
        )


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
