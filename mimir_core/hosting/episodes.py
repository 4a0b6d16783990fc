"""Exactly-once records for graph runtimes that re-execute steps, and the lineage of forks.

Graph runtimes with checkpoints re-run code: a step resumed after an interrupt runs again from
the top, a step that crashed is re-run, a retry policy re-runs a step within a run, and a
time-travel fork re-runs everything after the chosen checkpoint. This module makes recording
safe under all of them:

* **Keys.** A step's records are keyed on ``(thread_id, checkpoint_ns, task_id, label)``; a tool
  call's on ``(thread_id, tool_call_id)`` and, when known, the tool and its arguments.
  Re-executions of the same task reuse the ids, so each record is stored once (insert-if-absent
  by idempotency key, across processes).
* **Lineage.** A fork gets new task ids, so its records are new: they are a *branch*, and each
  carries the checkpoint the branch came from (:class:`LineageResolver`).

What a step tried is given as :meth:`Mimir.record` items; transcripts become items through
:func:`mimir_core.hosting.turns.turn_records`, the one reading of chat messages every host shares.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError, short
from ..store.core import EXPERIENCE_COLUMNS, EXPERIENCES, row_experience
from ..store.filters import Eq

if TYPE_CHECKING:
    from ..memory import Mimir
    from ..types import Experience


def _digest(parts: Sequence[object]) -> str:
    raw = json.dumps([str(p) if p is not None else None for p in parts], ensure_ascii=False)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:40]


def _require(name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInputError(name, f"must be a non-empty string; got {short(value)}", value)
    return value


def step_key(thread_id: str | None, checkpoint_ns: str, task_id: str, label: str = "step") -> str:
    """The idempotency key of a step's record: the same for every re-execution of the task."""
    _require("task_id", task_id)
    return "step:" + _digest([thread_id, checkpoint_ns, task_id, label])


def tool_key(
    thread_id: str | None,
    tool_call_id: str,
    tool: str | None = None,
    args: Mapping[str, Any] | None = None,
) -> str:
    """The idempotency key of a tool call's record.

    With the tool's name and arguments, a replay of the call (same id, same tool, same
    arguments, in any key order) has the same key, and another call that reuses the id does not:
    its record is never taken for the earlier one.
    """
    _require("tool_call_id", tool_call_id)
    if tool is None and args is None:
        return "tool:" + _digest([thread_id, tool_call_id])
    payload = json.dumps(
        dict(args or {}), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
    )
    return "tool:" + _digest([thread_id, tool_call_id, tool, payload])


# -- lineage ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointInfo:
    """What the lineage needs to know about one checkpoint."""

    checkpoint_id: str
    parent_id: str | None
    source: str | None = None
    """How it was made: ``input``, ``loop``, ``update`` (a state edit) or ``fork``."""


@dataclass(frozen=True)
class Branch:
    """The branch a checkpoint is on: the thread's main line (both ``None``) or a fork."""

    branch_id: str | None = None
    """The checkpoint that started the fork."""
    forked_from: str | None = None
    """The checkpoint the fork was taken from."""


class LineageResolver:
    """Which branch a checkpoint is on, from a lookup of checkpoints (cached).

    A checkpoint made by a fork (``source == "fork"``) starts a branch; so does a state edit
    (``update``) of a checkpoint that already had a continuation (``children(parent) > 1``).
    Every other checkpoint is on its parent's branch.
    """

    def __init__(
        self,
        lookup: Callable[[str], CheckpointInfo | None],
        children: Callable[[str], int] | None = None,
        cache_size: int = 4096,
    ) -> None:
        self._lookup = lookup
        self._children = children
        self._cache: OrderedDict[str, Branch] = OrderedDict()
        self._size = cache_size

    def branch(self, checkpoint_id: str | None) -> Branch:
        """The branch of ``checkpoint_id`` (the main line if it is unknown)."""
        chain: list[CheckpointInfo] = []
        cursor = checkpoint_id
        found = Branch()
        while cursor is not None:
            if cursor in self._cache:
                found = self._cache[cursor]
                break
            info = self._lookup(cursor)
            if info is None:
                break
            chain.append(info)
            if self._starts_branch(info):
                found = Branch(info.checkpoint_id, info.parent_id)
                break
            cursor = info.parent_id
        for info in chain:
            self._remember(info.checkpoint_id, found)
        return found

    def _starts_branch(self, info: CheckpointInfo) -> bool:
        if info.parent_id is None:
            return False
        if info.source == "fork":
            return True
        return (
            info.source == "update"
            and self._children is not None
            and (self._children(info.parent_id) > 1)
        )

    def _remember(self, key: str, branch: Branch) -> None:
        self._cache[key] = branch
        self._cache.move_to_end(key)
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)


# -- recording -------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepRef:
    """Where a record comes from in a checkpointed run (all ids from the runtime)."""

    thread_id: str | None
    checkpoint_ns: str
    task_id: str
    checkpoint_id: str | None = None
    node: str | None = None


class Episodes:
    """Exactly-once recording of steps and tool calls on a :class:`~mimir_core.Mimir`."""

    def __init__(self, mimir: Mimir, *, source: str = "api", scope: str | None = None) -> None:
        self.mimir = mimir
        self.source = source
        self.scope = scope

    def record_step(
        self,
        ref: StepRef,
        items: Sequence[Mapping[str, Any]],
        *,
        branch: Branch | None = None,
        label: str = "step",
    ) -> list[Experience]:
        """Record a step's items once for this task, however often the step is re-executed.

        Items are :meth:`Mimir.record` arguments; the n-th is keyed on the task and
        ``label`` (and on its own idempotency key, if it has one, else on n).
        """
        branch = branch or Branch()
        episode = {
            "thread_id": ref.thread_id,
            "checkpoint_ns": ref.checkpoint_ns,
            "task_id": ref.task_id,
            "checkpoint_id": ref.checkpoint_id,
            "node": ref.node,
            "label": label,
            "branch": branch.branch_id,
            "forked_from": branch.forked_from,
        }
        episode = {k: v for k, v in episode.items() if v is not None}
        keyed = []
        for n, item in enumerate(items):
            own = item.get("idempotency_key")
            part = label if len(items) == 1 and not own else f"{label}:{own or n}"
            key = step_key(ref.thread_id, ref.checkpoint_ns, ref.task_id, part)
            keyed.append(self._item(item, key, episode, thread_id=ref.thread_id))
        return self.mimir.record_many(keyed)

    def record_tool_call(
        self, thread_id: str | None, tool_call_id: str, item: Mapping[str, Any]
    ) -> Experience:
        """Record a tool call's item once per ``tool_call_id`` (within the thread)."""
        episode = {"tool_call_id": tool_call_id}
        if thread_id is not None:
            episode["thread_id"] = thread_id
        key = tool_key(thread_id, tool_call_id)
        return self.mimir.record_many([self._item(item, key, episode, thread_id=thread_id)])[0]

    def _item(
        self,
        item: Mapping[str, Any],
        key: str,
        episode: Mapping[str, Any],
        *,
        thread_id: str | None,
    ) -> dict[str, Any]:
        out = dict(item)
        context = dict(out.get("context") or {})
        context["episode"] = dict(episode)
        out["context"] = context
        out["idempotency_key"] = key
        out.setdefault("source", self.source)
        if self.scope is not None:
            out.setdefault("scope", self.scope)
        if thread_id is not None:
            out["thread_id"] = thread_id
        return out

    def history(self, thread_id: str) -> list[Experience]:
        """Every record of a thread, oldest first (each with its ``episode`` lineage)."""
        _require("thread_id", thread_id)
        rows = self.mimir.store.select(EXPERIENCES, Eq("thread_id", thread_id), EXPERIENCE_COLUMNS)
        exps = [row_experience(r) for r in rows]
        exps.sort(key=lambda e: (e.created_at, e.id))
        return exps
