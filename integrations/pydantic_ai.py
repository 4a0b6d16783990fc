"""Mimir for Pydantic AI: one capability, ``Agent(..., capabilities=[MimirCapability(mimir)])``.

Verified with pydantic-ai 2.68; the seams (``get_instructions``, ``wrap_tool_execute``,
``after_run``, ``get_toolset``) are in docs/pydantic-ai.md. The work is the core's
(:class:`~mimir_core.hosting.agent_run.RunMemory`); this module reads Pydantic AI's messages and
wires the seams. Everything fails open. Runnable example (``pip install
'mimir-lessons[pydantic-ai]'``)::

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
from functools import partial
from typing import Any

from mimir_core.extras import requires_extra
from mimir_core.hosting import agent_run as run
from mimir_core.observations.tool_call import with_note
from mimir_core.tools.specs import run_tool

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
            out.append(run.call_message(calls, text) if calls else plain)
        elif isinstance(msg, ModelRequest):
            for part in msg.parts:
                if isinstance(part, UserPromptPart):
                    content = part.content if isinstance(part.content, str) else str(part.content)
                    out.append({"role": "user", "content": content})
                elif isinstance(part, BaseToolReturnPart):
                    failed = part.outcome != "success"
                    out.append(run.tool_message(part.tool_call_id, part.content, failed=failed))
    return out


def mimir_toolset(mimir: Any = None, names: Sequence[str] | None = None) -> FunctionToolset[Any]:
    """Mimir's tools (all, or those ``names``) as a Pydantic AI toolset on one Mimir."""
    memory = run.RunMemory(mimir, source=SOURCE)
    tools = [
        Tool.from_schema(
            _tool_function(memory, s["name"]), s["name"], s["description"], s["parameters"]
        )
        for s in run.tool_schemas(names)
    ]
    return FunctionToolset(tools)


def _tool_function(memory: run.RunMemory, name: str) -> Any:
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
        self.memory = run.RunMemory(mimir, source=SOURCE, scope=scope, budget_chars=budget_chars)
        self._toolset = mimir_toolset(self.memory.mimir) if tools else None

    def get_instructions(self) -> Any:
        async def lessons(ctx: RunContext[Any]) -> str | None:
            query = run.last_user_text(openai_messages(ctx.messages))
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
        cid, name, raw = call.tool_call_id, call.tool_name, call.args_as_dict()
        settle = partial(self.memory.settle, cid, name, raw, history, run_id=ctx.run_id)
        await asyncio.to_thread(self.memory.guard, cid, name, raw, history)
        try:
            result = await handler(args)
        except (ToolFailedError, ToolRetryError) as exc:
            part = exc.tool_failed if isinstance(exc, ToolFailedError) else exc.tool_retry
            note = await asyncio.to_thread(settle, part.content)
            if isinstance(part.content, str):
                part.content = with_note(part.content, note)
            raise
        except Exception as exc:  # a crash ends the run: keep its failure first
            await asyncio.to_thread(settle, run.error_text(exc))
            raise
        note = await asyncio.to_thread(settle)
        return with_note(result, note) if isinstance(result, str) else result

    async def after_run(self, ctx: RunContext[Any], *, result: Any) -> Any:
        messages = openai_messages(result.all_messages())
        await asyncio.to_thread(self.memory.record_run, messages, run_id=ctx.run_id)
        return result


__all__ = ["MimirCapability", "mimir_toolset", "openai_messages"]
