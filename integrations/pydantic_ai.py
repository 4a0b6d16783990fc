"""Mimir for Pydantic AI: one capability, ``Agent(..., capabilities=[MimirCapability(mimir)])``.

A capability is Pydantic AI's seam for cross-cutting behaviour (verified with pydantic-ai 2.68):

* ``get_instructions``: a callable read before every model request, so the lessons and evidence
  for the user's request (:meth:`RunMemory.context`) are part of that request's instructions,
  never of the stored history;
* ``wrap_tool_execute``: the repeat guard before the call; a failure (``ToolFailed``,
  ``ModelRetry`` or a crash) is recorded at once and its result says what was tried before;
* ``after_run``: the run's attempts are recorded (:func:`mimir_core.turns.turn_records`);
* ``get_toolset``: with ``tools=True``, Mimir's tools (:data:`mimir_core.tools.TOOLS`) as a
  ``FunctionToolset``. A tool answers its text, with the structured data as the part's
  ``metadata``; a bad call is a ``ToolFailed`` whose message names the argument.

Everything fails open. Runnable example (offline; ``pip install 'mimir-lessons[pydantic-ai]'``)::

    import tempfile

    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from mimir_core import Mimir
    from mimir_integrations.pydantic_ai import MimirCapability

    mimir = Mimir(tempfile.mkdtemp())
    mimir.record_failure("run the api tests", "pytest tests/api", "table 'orders' does not exist")
    mimir.record("run the api tests", "alembic upgrade head && pytest tests/api", "success")

    agent = Agent(TestModel(call_tools=[]), capabilities=[MimirCapability(mimir, tools=True)])
    result = agent.run_sync("run the api tests")
    print(result.all_messages()[0].instructions)   # what the model was given about this task
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from mimir_core.agent_run import RunMemory, call_message, last_user_text, tool_message
from mimir_core.conversation import function_schemas
from mimir_core.extras import requires_extra
from mimir_core.observations.tool_call import with_note
from mimir_core.tools import run_tool

with requires_extra("mimir_integrations.pydantic_ai", "pydantic-ai"):
    from pydantic_ai import FunctionToolset, RunContext, Tool, ToolFailed
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import ToolFailedError, ToolRetryError
    from pydantic_ai.messages import (
        BaseToolReturnPart,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturn,
        UserPromptPart,
    )

SOURCE = "pydantic-ai"


def openai_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Pydantic AI's history in the OpenAI chat format Mimir reads (a tool return whose outcome
    is not ``success`` is a failed result)."""
    out: list[dict[str, Any]] = []
    for msg in messages:
        if isinstance(msg, ModelResponse):
            calls = [
                (p.tool_call_id, p.tool_name, p.args_as_dict())
                for p in msg.parts
                if isinstance(p, ToolCallPart)
            ]
            text = "".join(p.content for p in msg.parts if isinstance(p, TextPart))
            plain = {"role": "assistant", "content": text}
            out.append(call_message(calls, text) if calls else plain)
        elif isinstance(msg, ModelRequest):
            for part in msg.parts:
                if isinstance(part, UserPromptPart):
                    content = part.content if isinstance(part.content, str) else str(part.content)
                    out.append({"role": "user", "content": content})
                elif isinstance(part, BaseToolReturnPart):
                    failed = part.outcome != "success"
                    out.append(tool_message(part.tool_call_id, part.content, failed=failed))
    return out


def mimir_toolset(mimir: Any = None, names: Sequence[str] | None = None) -> FunctionToolset[Any]:
    """Mimir's tools (all, or those ``names``) as a Pydantic AI toolset on one Mimir."""
    memory = RunMemory(mimir, source=SOURCE)
    tools = [
        Tool.from_schema(
            _tool_function(memory, s["name"]), s["name"], s["description"], s["parameters"]
        )
        for s in function_schemas()
        if names is None or s["name"] in names
    ]
    return FunctionToolset(tools)


def _tool_function(memory: RunMemory, name: str) -> Any:
    async def call(**kwargs: Any) -> ToolReturn[Any]:
        out = await asyncio.to_thread(run_tool, memory.mimir, name, kwargs, source=SOURCE)
        if out.is_error:
            raise ToolFailed(out.text)
        return ToolReturn(return_value=out.text, metadata=out.data)

    call.__name__ = name
    return call


class MimirCapability(AbstractCapability[Any]):
    """Experience memory for a Pydantic AI agent (see the module doc)."""

    def __init__(
        self,
        mimir: Any = None,
        *,
        budget_chars: int = 2000,
        scope: str | None = None,
        tools: bool = False,
    ) -> None:
        self.memory = RunMemory(mimir, source=SOURCE, scope=scope, budget_chars=budget_chars)
        self._toolset = mimir_toolset(self.memory.mimir) if tools else None

    def get_instructions(self) -> Any:
        async def lessons(ctx: RunContext[Any]) -> str | None:
            query = last_user_text(openai_messages(ctx.messages))
            if not query and isinstance(ctx.prompt, str):
                query = ctx.prompt
            return await asyncio.to_thread(self.memory.context, query) or None

        return lessons

    def get_toolset(self) -> Any:
        return self._toolset

    async def wrap_tool_execute(
        self, ctx: RunContext[Any], *, call: Any, tool_def: Any, args: Any, handler: Any
    ) -> Any:
        history = openai_messages(ctx.messages)
        task = last_user_text(history)
        name, raw = call.tool_name, call.args_as_dict()
        note = await asyncio.to_thread(self.memory.before_tool, name, raw, task=task)
        try:
            result = await handler(args)
        except (ToolFailedError, ToolRetryError) as exc:
            part = exc.tool_failed if isinstance(exc, ToolFailedError) else exc.tool_retry
            failed = [*history, tool_message(call.tool_call_id, part.content, failed=True)]
            said = await self._failed(ctx, failed, name, raw)
            note = note or said
            if isinstance(part.content, str):
                part.content = with_note(part.content, note)
            raise
        except Exception as exc:  # a crash ends the run: keep its failure first
            text = f"{type(exc).__name__}: {exc}"
            failed = [*history, tool_message(call.tool_call_id, text, failed=True)]
            await self._failed(ctx, failed, name, raw)
            raise
        return with_note(result, note) if isinstance(result, str) else result

    async def _failed(
        self, ctx: RunContext[Any], messages: list[dict[str, Any]], name: str, args: Any
    ) -> str:
        return await asyncio.to_thread(
            self.memory.tool_failed, messages, name, args, run_id=ctx.run_id
        )

    async def after_run(self, ctx: RunContext[Any], *, result: Any) -> Any:
        messages = openai_messages(result.all_messages())
        await asyncio.to_thread(self.memory.record_run, messages, run_id=ctx.run_id)
        return result


__all__ = ["MimirCapability", "mimir_toolset", "openai_messages"]
