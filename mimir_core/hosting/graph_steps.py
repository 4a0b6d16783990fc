"""Steps of a checkpointed graph run (LangGraph's shape), for exactly-once records.

A graph runtime re-runs a node after an interrupt, a crash or a retry, and a time-travel fork
re-runs everything after a checkpoint under new task ids. :func:`step_ref` says which step a
record belongs to, from the node's run config (``thread_id``, ``checkpoint_ns``, the task id);
:class:`SaverLineage` says which branch it is on, from a checkpointer (anything with
``get_tuple(config)`` and ``list(config)``). :func:`state_records` and :func:`state_query` read
what a graph state says was tried. Plain mappings and duck typing only: no framework import.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import MimirError
from .episodes import Branch, CheckpointInfo, LineageResolver, StepRef
from .turns import split_turns, turn_records, without_notes

log = logging.getLogger("mimir.graph")

#: A state's messages as the OpenAI-format dicts Mimir reads (the adapter's converter).
ToOpenAI = Callable[[Sequence[Any]], list[dict[str, Any]]]


def mark_tool_errors(
    messages: Sequence[Any], converted: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``converted`` (the OpenAI form of ``messages``), where a failed tool result (a message
    with ``type == "tool"`` and ``status == "error"``) carries its text as an ``error``."""
    out: list[dict[str, Any]] = []
    for msg, as_dict in zip(messages, converted, strict=True):
        if getattr(msg, "type", None) == "tool" and getattr(msg, "status", None) == "error":
            error = without_notes(_plain(msg.content))
            as_dict = {**as_dict, "content": json.dumps({"error": error})}
        out.append(as_dict)
    return out


def _plain(content: Any) -> str:
    """A message content as the text it was before: a string, or its text parts joined (a note
    added as one more part comes off whole)."""
    if isinstance(content, list):
        parts = [
            p if isinstance(p, str) else str(p.get("text", ""))
            for p in content
            if isinstance(p, (str, dict))
        ]
        return "\n".join(parts)
    return str(content)


def step_ref(config: Mapping[str, Any]) -> StepRef:
    """The step a node's run ``config`` belongs to (:class:`MimirError` if it names no task)."""
    conf = config.get("configurable") or {}
    ns = str(conf.get("checkpoint_ns") or "")
    task_id = conf.get("__pregel_task_id") or ns.rsplit(":", 1)[-1]
    if not task_id:
        raise MimirError("record() found no task id in the config (call it in a node)")
    thread_id = conf.get("thread_id")
    root = (conf.get("checkpoint_map") or {}).get("") or conf.get("checkpoint_id")
    return StepRef(
        thread_id=None if thread_id is None else str(thread_id),
        checkpoint_ns=ns,
        task_id=str(task_id),
        checkpoint_id=None if not root else str(root),
        node=(config.get("metadata") or {}).get("langgraph_node"),
    )


def state_records(
    state: Mapping[str, Any], to_openai: ToOpenAI, source: str
) -> list[dict[str, Any]]:
    """What a state says was tried: its ``task``/``action``/``outcome`` keys (+ ``reason``,
    ``score``) as one record, or else the attempts of the last turn of its ``messages``
    (:func:`mimir_core.hosting.turns.turn_records`); empty when there is nothing to record."""
    if all(isinstance(state.get(k), str) and state.get(k) for k in ("task", "action", "outcome")):
        item = {k: state[k] for k in ("task", "action", "outcome")}
        item["reason"] = state.get("reason") or None
        item["score"] = state.get("score")
        return [item]
    messages = state.get("messages")
    if isinstance(messages, list) and messages:
        return turn_records(to_openai(messages), source=source, last_turn_only=True)
    return []


def state_after(state: Mapping[str, Any], writes: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """The state once a step's ``(key, value)`` writes are applied, for :func:`state_records`:
    ``messages`` are appended to (a list or one message), every other key is replaced."""
    after = dict(state)
    for key, value in writes:
        if key == "messages":
            new = value if isinstance(value, list) else [value]
            after["messages"] = [*(after.get("messages") or []), *new]
        else:
            after[key] = value
    return after


def state_query(state: Mapping[str, Any], to_openai: ToOpenAI) -> str:
    """What a state is about: its ``task``, else the last user message ("" when neither)."""
    task = state.get("task")
    if isinstance(task, str) and task.strip():
        return task
    messages = state.get("messages")
    if isinstance(messages, list) and messages:
        turns = split_turns(to_openai(messages))
        return turns[-1].user_text if turns else ""
    return ""


class SaverLineage:
    """The branch of a step, looked up in a checkpointer (resolvers of recent threads kept)."""

    def __init__(self, max_threads: int = 64) -> None:
        self._resolvers: OrderedDict[str, LineageResolver] = OrderedDict()
        self._max_threads = max_threads

    def branch(self, saver: Any, ref: StepRef) -> Branch | None:
        """The branch of ``ref``'s checkpoint; ``None`` without a saver or if the lookup failed
        (logged: lineage is best effort, a record without it still counts)."""
        thread_id, checkpoint = ref.thread_id, ref.checkpoint_id
        if saver is None or thread_id is None or not checkpoint:
            return None
        resolver = self._resolvers.get(thread_id)
        if resolver is None:
            resolver = LineageResolver(_lookup(saver, thread_id), _children(saver, thread_id))
            self._resolvers[thread_id] = resolver
            while len(self._resolvers) > self._max_threads:
                self._resolvers.popitem(last=False)
        try:
            return resolver.branch(checkpoint)
        except Exception as exc:
            log.warning("mimir: checkpoint lineage unavailable: %s", exc)
            return None


def _root(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    conf = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _parent(found: Any) -> Any:
    return (found.parent_config or {}).get("configurable", {}).get("checkpoint_id")


def _lookup(saver: Any, thread_id: str) -> Callable[[str], CheckpointInfo | None]:
    def lookup(checkpoint_id: str) -> CheckpointInfo | None:
        found = saver.get_tuple(_root(thread_id, checkpoint_id))
        if found is None:
            return None
        source = (found.metadata or {}).get("source")
        return CheckpointInfo(checkpoint_id, _parent(found), source)

    return lookup


def _children(saver: Any, thread_id: str) -> Callable[[str], int]:
    def children(checkpoint_id: str) -> int:
        return sum(_parent(found) == checkpoint_id for found in saver.list(_root(thread_id)))

    return children
