"""``MimirMemoryNode``: lessons into the state before a step, an exactly-once record after it."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mimir_core.errors import MimirError
from mimir_core.extras import requires_extra
from mimir_core.hosting.agent_run import lessons_for
from mimir_core.hosting.episodes import Episodes
from mimir_core.hosting.graph_steps import (
    SaverLineage,
    mark_tool_errors,
    state_after,
    state_query,
    state_records,
    step_ref,
)
from mimir_core.observations.tool_call import note_after_failure, note_before, with_note
from mimir_core.tools.specs import call_tool

from .store import open_mimir

with requires_extra("mimir_integrations.langgraph", "langgraph"):
    from langchain_core.messages import ToolMessage, convert_to_openai_messages
    from langchain_core.runnables import RunnableConfig
    from langgraph.config import get_config
    from langgraph.runtime import Runtime
    from langgraph.types import Command

log = logging.getLogger("mimir.langgraph")

Describe = Callable[[Mapping[str, Any]], list[dict[str, Any]]]


def openai_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """LangChain messages in the OpenAI format Mimir reads (failed tool results as errors)."""
    return mark_tool_errors(messages, convert_to_openai_messages(list(messages)))


def describe_state(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What a state says was tried: its ``task``/``action``/``outcome`` keys (+ ``reason``,
    ``score``) as one record, or else the attempts of the last turn of its ``messages``
    (:func:`mimir_core.hosting.graph_steps.state_records`); empty when there is nothing to record.
    """
    return state_records(state, openai_messages, "langgraph")


class MimirMemoryNode:
    """Checkpoint-aware Mimir memory for a LangGraph graph.

    * :meth:`wrap` turns a step into one node that first puts the relevant lessons
      (``Mimir.context``) into the state under ``lessons_key`` (and, with ``experiences=k``, the
      k most relevant past attempts under ``experiences_key``), runs the step, then records what
      was tried and how it ended (:func:`describe_state` of the state after the step).
    * :meth:`before` and :meth:`after` are the same two halves as separate nodes.
    * :meth:`record` records from inside any node.
    * :meth:`wrap_tool_call` (``ToolNode(tools, wrap_tool_call=memory.wrap_tool_call)``) is the
      repeat guard: a tool result says when that very call failed here before on this task,
      and what worked instead.

    Records are exactly-once across LangGraph's re-execution: each is keyed on
    ``(thread_id, checkpoint_ns, task_id, label)``, which an interrupt/resume, a crash re-run or
    a retry keep, so the record is stored once. A time-travel fork runs under new task ids: its
    records are new, and carry the branch and the checkpoint it was forked from (looked up in
    the graph's checkpointer). Memory failures are logged and never fail the graph.
    """

    def __init__(
        self,
        mimir: Any = None,
        *,
        describe: Describe = describe_state,
        lessons_key: str = "mimir_lessons",
        budget_chars: int = 2000,
        scope: str | None = None,
        checkpointer: Any = None,
        experiences: int = 0,
        experiences_key: str = "mimir_experiences",
    ) -> None:
        self.mimir = open_mimir(mimir)
        self.experiences = experiences
        self.experiences_key = experiences_key
        self.describe = describe
        self.lessons_key = lessons_key
        self.budget_chars = budget_chars
        self.scope = scope
        self.checkpointer = checkpointer
        self.episodes = Episodes(self.mimir, source="langgraph", scope=scope)
        self._lineage = SaverLineage()

    # -- the two halves ----------------------------------------------------------------------

    def lessons(self, state: Mapping[str, Any]) -> str:
        """The lessons for the state's task, fenced as data ("" when none or on failure)."""
        query = state_query(state, openai_messages)
        return lessons_for(self.mimir, query, budget_chars=self.budget_chars, scope=self.scope)

    def past_attempts(self, state: Mapping[str, Any]) -> str:
        """The ``experiences`` most relevant past attempts, as the recall tool renders them."""
        query = state_query(state, openai_messages)
        if not query or self.experiences <= 0:
            return ""
        try:
            args = {"query": query, "k": self.experiences}
            return call_tool(self.mimir, "recall_experiences", args, source="langgraph").text
        except Exception as exc:  # memory must never stop the agent
            log.warning("mimir: past attempts unavailable: %s", exc)
            return ""

    def before(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """Node: the relevant lessons (with ``experiences=k``, past attempts) into the state."""
        update = {self.lessons_key: self.lessons(state)}
        if self.experiences > 0:
            update[self.experiences_key] = self.past_attempts(state)
        return update

    def after(self, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Node: record the attempt the state describes (once per task)."""
        items = self.describe(state)
        if items:
            self._safe_record(items, config, "step")
        return {}

    def record(
        self,
        task: str,
        action: str,
        outcome: str,
        *,
        reason: str | None = None,
        score: float | None = None,
        context: Mapping[str, Any] | None = None,
        label: str = "step",
        config: RunnableConfig | None = None,
    ) -> Any:
        """Record from inside a node, once per (task, ``label``) however often the node re-runs.

        Raises :class:`~mimir_core.errors.MimirError` for bad input or outside a node.
        """
        item = {
            "task": task,
            "action": action,
            "outcome": outcome,
            "reason": reason,
            "score": score,
            "context": dict(context or {}),
        }
        return self._record([item], config, label)[0]

    # -- the repeat guard at the tool boundary --------------------------------------------------

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """For ``ToolNode(tools, wrap_tool_call=memory.wrap_tool_call)``: a tool call's result
        carries, after it, what Mimir knows of that very call here (it failed before on this
        task, what worked instead). The call always runs."""
        task, call = self._task_of(request), request.tool_call
        note = note_before(self.mimir, call["name"], call.get("args"), task=task, scope=self.scope)
        result = handler(request)
        return self._noted(request, result, note, task)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """:meth:`wrap_tool_call` for ``ToolNode(..., awrap_tool_call=...)``."""
        task, call = self._task_of(request), request.tool_call
        note = await asyncio.to_thread(
            note_before, self.mimir, call["name"], call.get("args"), task=task, scope=self.scope
        )
        result = await handler(request)
        return await asyncio.to_thread(self._noted, request, result, note, task)

    def _task_of(self, request: Any) -> str:
        try:
            return state_query(request.state or {}, openai_messages)
        except Exception as exc:  # memory must never stop the agent
            log.warning("mimir: no task for the tool call: %s", exc)
            return ""

    def _noted(self, request: Any, result: Any, note: str, task: str) -> Any:
        if not isinstance(result, ToolMessage):
            return result  # a Command: the tool's own state update, left alone
        if not note and result.status == "error":
            call = request.tool_call
            note = note_after_failure(
                self.mimir, call["name"], call.get("args"), task=task, scope=self.scope
            )
        return result.model_copy(update={"content": with_note(result.content, note)})

    # -- one node around a step --------------------------------------------------------------

    def wrap(self, step: Callable[..., Any]) -> Callable[..., Any]:
        """A node running ``step`` between the lessons (before) and the record (after)."""
        params = inspect.signature(step).parameters
        if inspect.iscoroutinefunction(step):

            async def anode(state: dict[str, Any], config: RunnableConfig, runtime: Runtime) -> Any:
                memory = await asyncio.to_thread(self.before, state)
                given = {**state, **memory}
                update = await step(given, **_extras(params, config, runtime))
                await asyncio.to_thread(self._after_step, given, update, config)
                return _merge(update, memory)

            anode.__name__ = getattr(step, "__name__", "mimir_step")
            return anode

        def node(state: dict[str, Any], config: RunnableConfig, runtime: Runtime) -> Any:
            memory = self.before(state)
            given = {**state, **memory}
            update = step(given, **_extras(params, config, runtime))
            self._after_step(given, update, config)
            return _merge(update, memory)

        node.__name__ = getattr(step, "__name__", "mimir_step")
        return node

    def _after_step(self, state: Mapping[str, Any], update: Any, config: RunnableConfig) -> None:
        try:
            items = self.describe(state_after(state, _update_pairs(update)))
        except Exception as exc:
            log.warning("mimir: could not describe the step: %s", exc)
            return
        if items:
            self._safe_record(items, config, "step")

    # -- recording ---------------------------------------------------------------------------

    def _safe_record(
        self, items: list[dict[str, Any]], config: RunnableConfig | None, label: str
    ) -> None:
        try:
            self._record(items, config, label)
        except Exception as exc:  # memory must never stop the agent
            log.warning("mimir: could not record the step: %s", exc)

    def _record(
        self, items: list[dict[str, Any]], config: RunnableConfig | None, label: str
    ) -> list[Any]:
        try:
            config = config or get_config()
        except RuntimeError as exc:
            raise MimirError(
                "record() needs a LangGraph node's config (call it in a node)"
            ) from exc
        ref = step_ref(config)
        saver = self.checkpointer or (config.get("configurable") or {}).get("__pregel_checkpointer")
        branch = self._lineage.branch(saver, ref)
        return self.episodes.record_step(ref, items, branch=branch, label=label)


#: What LangGraph injects into a node by parameter name, read from the wrapping node's runtime
#: (``langgraph._internal._runnable.KWARGS_CONFIG_KEYS``): a step declaring ``store`` or
#: ``writer`` gets it as it would unwrapped.
_INJECTED: dict[str, Callable[[Any, Any], Any]] = {
    "config": lambda config, runtime: config,
    "runtime": lambda config, runtime: runtime,
    "store": lambda config, runtime: getattr(runtime, "store", None),
    "writer": lambda config, runtime: getattr(runtime, "stream_writer", None),
    "previous": lambda config, runtime: getattr(runtime, "previous", None),
}
_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _extras(params: Mapping[str, inspect.Parameter], config: Any, runtime: Any) -> dict[str, Any]:
    extras: dict[str, Any] = {}
    for name, param in list(params.items())[1:]:  # the first one is the state
        get = _INJECTED.get(name)
        if get is None or param.kind not in _KINDS:
            continue
        value = get(config, runtime)
        if value is not None or param.default is inspect.Parameter.empty:
            extras[name] = value
    return extras


def _update_pairs(update: Any) -> list[tuple[str, Any]]:
    """The ``(key, value)`` writes of what a step returned, as LangGraph reads them: a dict, a
    ``Command``'s ``update`` (not one for the parent graph), or a list of those."""
    if update is None:
        return []
    if isinstance(update, Mapping):
        return list(update.items())
    if isinstance(update, Command):
        if update.graph == Command.PARENT:
            return []
        return [p for p in update._update_as_tuples() if p[0] != "__root__"]
    if isinstance(update, (list, tuple)):
        return [pair for part in update for pair in _update_pairs(part)]
    return []


def _merge(update: Any, memory: dict[str, Any]) -> Any:
    """What the node returns: the step's update plus the lessons it was given, in the form the
    step chose (a dict, a ``Command`` or a list of Commands)."""
    if update is None:
        return dict(memory)
    if isinstance(update, Mapping):
        return {**update, **memory}
    if isinstance(update, Command):
        if update.graph == Command.PARENT:  # its writes are the parent graph's: left alone
            return update
        inner = update.update
        if inner is None or isinstance(inner, Mapping):
            return dataclasses.replace(update, update={**(inner or {}), **memory})
        return dataclasses.replace(update, update=[*update._update_as_tuples(), *memory.items()])
    if isinstance(update, (list, tuple)):
        return [*update, Command(update=memory)]
    return update
