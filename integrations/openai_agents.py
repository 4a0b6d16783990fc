"""Mimir for the OpenAI Agents SDK: a ``Session`` on the one store, and a ``RunConfig``.

Verified with openai-agents 0.24. ``memory = MimirAgentsMemory(mimir)``, then
``Runner.run(agent, text, session=memory.session("user-1"), run_config=memory.run_config())``:

* :meth:`MimirAgentsMemory.session`: the SDK's ``Session`` protocol, its items kept in Mimir's
  store (the ``kv`` table, one document per saved batch, never embedded); each save records the
  attempts of the last turn (:func:`mimir_core.turns.turn_records`), once per session;
* :meth:`MimirAgentsMemory.run_config`: ``call_model_input_filter`` adds the lessons and evidence
  for the user's request (:meth:`RunMemory.context`) to the instructions of each model call, and
  after a failed tool call, what was tried before to that call's output, for that call only;
  ``tool_error_formatter`` records a tool's exception at once (with its real message, while the
  model still gets the SDK's or the configured message);
* :func:`mimir_tools`: Mimir's tools as ``FunctionTool`` s answering JSON
  (``{"result", "data"}`` or ``{"error"}``, as Hermes gets them).

The SDK hides a tool's exception from the model behind "An error occurred while running the
tool"; such an output is a failure to Mimir too. A tool made with
``failure_error_function=None`` ends the run when it raises, before the SDK calls anything Mimir
could see: its failure is not recorded. Everything fails open.

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
import inspect
import json
import logging
from collections.abc import Sequence
from typing import Any

from mimir_core.agent_run import (
    RunMemory,
    call_message,
    last_user_text,
    tool_answer,
    tool_message,
)
from mimir_core.conversation import function_schemas
from mimir_core.extras import requires_extra
from mimir_core.observations.tool_call import with_note

with requires_extra("mimir_integrations.openai_agents", "openai-agents"):
    from agents import FunctionTool, RunConfig
    from agents.run_config import CallModelData, ModelInputData, ToolErrorFormatterArgs

log = logging.getLogger("mimir.openai_agents")

SOURCE = "openai-agents"
NAMESPACE = ("openai-agents", "sessions")
#: How the SDK's default failure function answers the model for a tool that raised.
SDK_FAILURE = "An error occurred while running the tool"
MAX_KEPT = 512  # failed calls remembered per memory (their real errors and notes)


class MimirAgentsMemory:
    """Mimir for ``Runner.run`` (see the module doc)."""

    def __init__(
        self, mimir: Any = None, *, scope: str | None = None, budget_chars: int = 2000
    ) -> None:
        self.memory = RunMemory(mimir, source=SOURCE, scope=scope, budget_chars=budget_chars)
        self._errors: dict[str, str] = {}  # call id -> the exception the tool raised
        self._notes: dict[str, str] = {}  # call id -> what was tried before, for the model

    # -- the history Mimir reads ---------------------------------------------------------------

    def openai_messages(self, items: Sequence[Any]) -> list[dict[str, Any]]:
        """Responses-API input items in the OpenAI chat format Mimir reads."""
        out: list[dict[str, Any]] = []
        for item in items:
            item = item if isinstance(item, dict) else _as_dict(item)
            kind, role = item.get("type"), item.get("role")
            if kind == "function_call":
                out.append(
                    call_message(
                        [
                            (
                                item.get("call_id", ""),
                                item.get("name", ""),
                                item.get("arguments", "{}"),
                            )
                        ]
                    )
                )
            elif kind == "function_call_output":
                cid = str(item.get("call_id", ""))
                text = _output_text(item.get("output"))
                failed = cid in self._errors or text.startswith(SDK_FAILURE)
                out.append(tool_message(cid, self._errors.get(cid, text), failed=failed))
            elif role in ("user", "assistant", "system", "developer"):
                out.append({"role": role, "content": item.get("content")})
        return out

    # -- the run configuration -----------------------------------------------------------------

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
            model_data = data.model_data
            if inner is not None:
                model_data = await _maybe(inner(data))
            query = last_user_text(self.openai_messages(model_data.input))
            block = await asyncio.to_thread(self.memory.context, query)
            items = [self._noted(i) for i in model_data.input]
            base = model_data.instructions or ""
            instructions = f"{base}\n\n{block}".strip() if block else model_data.instructions
            return ModelInputData(input=items, instructions=instructions)

        return mimir_input

    def _noted(self, item: Any) -> Any:
        if not isinstance(item, dict) or item.get("type") != "function_call_output":
            return item
        note = self._notes.get(str(item.get("call_id", "")), "")
        if not note or not isinstance(item.get("output"), str):
            return item
        return {**item, "output": with_note(item["output"], note)}

    def _error_formatter(self, inner: Any) -> Any:
        async def mimir_error(args: ToolErrorFormatterArgs[Any]) -> str | None:
            message = await _maybe(inner(args)) if inner is not None else None
            if args.kind == "tool_exception" and args.error is not None:
                await asyncio.to_thread(self._tool_failed, args)
            return message

        return mimir_error

    def _tool_failed(self, args: ToolErrorFormatterArgs[Any]) -> None:
        ctx = args.run_context
        raw = getattr(ctx, "tool_arguments", "") or "{}"
        try:
            call_args = json.loads(raw)
        except ValueError:
            call_args = {"input": raw}
        error = f"{type(args.error).__name__}: {args.error}"
        self._keep(self._errors, args.call_id, error)
        history = [
            *self.openai_messages(list(getattr(ctx, "turn_input", None) or [])),
            call_message([(args.call_id, args.tool_name, raw)]),
            tool_message(args.call_id, error, failed=True),
        ]
        note = self.memory.tool_failed(history, args.tool_name, call_args)
        if note:
            self._keep(self._notes, args.call_id, note)

    @staticmethod
    def _keep(table: dict[str, str], key: str, value: str) -> None:
        table[key] = value
        while len(table) > MAX_KEPT:
            table.pop(next(iter(table)))

    # -- sessions ------------------------------------------------------------------------------

    def session(self, session_id: str) -> MimirSession:
        """The conversation ``session_id``, kept in Mimir's store."""
        return MimirSession(session_id, self)


class MimirSession:
    """The Agents SDK ``Session`` protocol on Mimir's store (see the module doc)."""

    session_settings: Any = None

    def __init__(self, session_id: str, owner: MimirAgentsMemory) -> None:
        from mimir_core.kv import KVStore

        self.session_id = session_id
        self.owner = owner
        self.namespace = (*NAMESPACE, session_id)
        self._kv = KVStore(owner.memory.mimir)

    def _batches(self) -> list[tuple[str, list[Any]]]:
        found = self._kv.search(self.namespace, limit=1_000_000)
        return sorted((i.key, list(i.value.get("items") or [])) for i in found)

    def _get(self, limit: int | None) -> list[Any]:
        items = [item for _key, batch in self._batches() for item in batch]
        return items if limit is None else items[-limit:] if limit > 0 else []

    async def get_items(self, limit: int | None = None) -> list[Any]:
        return list(await _safely(self._get, limit, default=[]))

    def _add(self, items: list[Any]) -> None:
        batches = self._batches()
        nxt = int(batches[-1][0]) + 1 if batches else 0
        plain = [i if isinstance(i, dict) else _as_dict(i) for i in items]
        self._kv.put(self.namespace, f"{nxt:012d}", {"items": plain}, texts=[])
        history = [item for _key, batch in self._batches() for item in batch]
        messages = self.owner.openai_messages(history)
        # Keyed like the failures recorded as they happen (no run id: the tool error formatter
        # cannot know the session), so each attempt is one record.
        self.owner.memory.record_run(messages, session_id=self.session_id)

    async def add_items(self, items: list[Any]) -> None:
        if items:
            await _safely(self._add, items)

    def _pop(self) -> Any:
        batches = self._batches()
        while batches:
            key, batch = batches.pop()
            if batch:
                item = batch.pop()
                if batch:
                    self._kv.put(self.namespace, key, {"items": batch}, texts=[])
                else:
                    self._kv.delete(self.namespace, key)
                return item
            self._kv.delete(self.namespace, key)
        return None

    async def pop_item(self) -> Any:
        return await _safely(self._pop)

    def _clear(self) -> None:
        for key, _batch in self._batches():
            self._kv.delete(self.namespace, key)

    async def clear_session(self) -> None:
        await _safely(self._clear)


def mimir_tools(mimir: Any = None, names: Sequence[str] | None = None) -> list[FunctionTool]:
    """Mimir's tools (all, or those ``names``) as Agents SDK ``FunctionTool`` s on one Mimir."""
    memory = RunMemory(mimir, source=SOURCE)

    def invoker(name: str) -> Any:
        async def invoke(ctx: Any, raw: str) -> str:
            try:
                args = json.loads(raw or "{}")
            except ValueError as exc:
                return json.dumps({"error": f"arguments are not JSON: {exc}"})
            answer = await asyncio.to_thread(tool_answer, memory.mimir, name, args, source=SOURCE)
            return json.dumps(answer, ensure_ascii=False)

        return invoke

    return [
        FunctionTool(
            name=s["name"],
            description=s["description"],
            params_json_schema=s["parameters"],
            on_invoke_tool=invoker(s["name"]),
            strict_json_schema=False,
        )
        for s in function_schemas()
        if names is None or s["name"] in names
    ]


def _as_dict(item: Any) -> dict[str, Any]:
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        value = dump(exclude_unset=True)
        return value if isinstance(value, dict) else {}
    return dict(item) if isinstance(item, dict) else {}


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    return "" if output is None else json.dumps(output, default=str)


async def _safely(fn: Any, *args: Any, default: Any = None) -> Any:
    """``fn(*args)`` on a worker thread; a failure is logged and ``default`` answered (the
    conversation goes on without memory rather than stopping the agent)."""
    try:
        return await asyncio.to_thread(fn, *args)
    except Exception as exc:
        log.warning("mimir: session %s failed: %s", getattr(fn, "__name__", "call"), exc)
        return default


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


__all__ = ["MimirAgentsMemory", "MimirSession", "mimir_tools"]
