"""Mimir for the OpenAI Agents SDK: a ``Session`` on the one store, and a ``RunConfig``.

Verified with openai-agents 0.24; the seams are in docs/openai-agents.md. The work is the
core's (:mod:`mimir_core.hosting`: ``agent_run.RunMemory``, ``item_log.ItemLog``,
``responses_run.ResponsesRun``); this module wires it to the SDK's types. An output
the SDK hides an exception behind (:data:`SDK_FAILURE`) is a failure. All fails open.

Runnable example (offline; ``pip install 'mimir-lessons[openai-agents]'``)::

    import asyncio
    import tempfile

    from agents import Agent, Runner, set_tracing_disabled
    from agents.testing import ScriptedModel, assistant_message

    from mimir_core import Mimir
    from mimir_integrations.openai_agents import MimirAgentsMemory

    set_tracing_disabled(True)
    mimir = Mimir(tempfile.mkdtemp())
    mimir.record_failure("run the api tests", "pytest tests/api", "table 'orders' does not exist")
    mimir.record("run the api tests", "alembic upgrade head && pytest tests/api", "success")

    model = ScriptedModel([[assistant_message("Migrate first.")], [assistant_message("Done.")]])
    memory = MimirAgentsMemory(mimir)
    agent = Agent(name="dev", instructions="You run tests.", model=model)
    Runner.run_sync(agent, "run the api tests",
                    session=memory.session("user-1"), run_config=memory.run_config())
    print(model.calls[0].system_instructions)     # what the model was given about this task
    Runner.run_sync(agent, "now run them", session=memory.session("user-1"))
    history = asyncio.run(MimirAgentsMemory(mimir).session("user-1").get_items())   # in the store
    print([item["role"] for item in history])
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

from mimir_core.extras import requires_extra
from mimir_core.hosting import agent_run as run
from mimir_core.hosting.item_log import ItemLog
from mimir_core.hosting.responses_run import ResponsesRun
from mimir_core.hosting.wire_formats import as_dict

with requires_extra("mimir_integrations.openai_agents", "openai-agents"):
    from agents import FunctionTool, RunConfig
    from agents.run_config import CallModelData, ModelInputData, ToolErrorFormatterArgs

SOURCE = "openai-agents"
NAMESPACE = ("openai-agents", "sessions")
#: How the SDK's default failure function answers the model for a tool that raised.
SDK_FAILURE = "An error occurred while running the tool"


class MimirAgentsMemory:
    """Mimir for ``Runner.run`` (see the module doc)."""

    def __init__(
        self, mimir: Any = None, *, scope: str | None = None, budget_chars: int = 2000
    ) -> None:
        self.memory = run.RunMemory(mimir, source=SOURCE, scope=scope, budget_chars=budget_chars)
        self.run = ResponsesRun(self.memory, failure_prefix=SDK_FAILURE)

    def run_config(self, base: RunConfig | None = None) -> RunConfig:
        """``base`` (or a default ``RunConfig``) with Mimir's model input filter and tool error
        formatter; the ones ``base`` had still run (theirs first)."""
        base = base or RunConfig()
        return dataclasses.replace(
            base,
            call_model_input_filter=self._input_filter(base.call_model_input_filter),
            tool_error_formatter=self._error_formatter(base.tool_error_formatter),
        )

    def _input_filter(self, inner: Any) -> Any:
        async def mimir_input(data: CallModelData[Any]) -> ModelInputData:
            given = await run.maybe_await(inner(data)) if inner is not None else data.model_data
            items, instructions = await asyncio.to_thread(
                self.run.model_input, given.input, given.instructions
            )
            return ModelInputData(input=items, instructions=instructions)

        return mimir_input

    def _error_formatter(self, inner: Any) -> Any:
        async def mimir_error(args: ToolErrorFormatterArgs[Any]) -> str | None:
            message = await run.maybe_await(inner(args)) if inner is not None else None
            if args.kind == "tool_exception" and args.error is not None:
                ctx = args.run_context
                turn = list(getattr(ctx, "turn_input", None) or [])
                raw = getattr(ctx, "tool_arguments", "") or "{}"
                await run.off_thread(
                    self.run.tool_raised, turn, args.call_id, args.tool_name, raw, args.error
                )
            return message

        return mimir_error

    def session(self, session_id: str) -> MimirSession:
        """The conversation ``session_id``, kept in Mimir's store."""
        return MimirSession(session_id, self)


class MimirSession:
    """The Agents SDK ``Session`` protocol on Mimir's store (an :class:`ItemLog`); each save
    records the attempts of the last turn."""

    session_settings: Any = None

    def __init__(self, session_id: str, owner: MimirAgentsMemory) -> None:
        self.session_id = session_id
        self.owner = owner
        self.log = ItemLog(owner.memory.mimir, (*NAMESPACE, session_id))

    async def get_items(self, limit: int | None = None) -> list[Any]:
        return list(await run.off_thread(self.log.items, limit, default=[]))

    def _add(self, items: list[Any]) -> None:
        history = self.log.append([as_dict(i) for i in items])
        self.owner.run.record(history, session_id=self.session_id)

    async def add_items(self, items: list[Any]) -> None:
        if items:
            await run.off_thread(self._add, items)

    async def pop_item(self) -> Any:
        return await run.off_thread(self.log.pop)

    async def clear_session(self) -> None:
        await run.off_thread(self.log.clear)


def mimir_tools(mimir: Any = None, names: Sequence[str] | None = None) -> list[FunctionTool]:
    """Mimir's tools (all, or those ``names``) as Agents SDK ``FunctionTool`` s on one Mimir."""
    memory = run.RunMemory(mimir, source=SOURCE)

    def invoker(name: str) -> Any:
        async def invoke(ctx: Any, raw: str) -> str:
            mimir = memory.mimir
            return await asyncio.to_thread(run.tool_answer_json, mimir, name, raw, source=SOURCE)

        return invoke

    return [
        FunctionTool(
            name=s["name"],
            description=s["description"],
            params_json_schema=s["parameters"],
            on_invoke_tool=invoker(s["name"]),
            strict_json_schema=False,
        )
        for s in run.tool_schemas(names)
    ]


__all__ = ["MimirAgentsMemory", "MimirSession", "mimir_tools"]
