"""What any server of Mimir's tools does, whatever its protocol: run a call against a memory
opened on first use (writes one at a time), and read the resources and prompt text it offers.

The MCP adapter (:mod:`mimir_integrations.mcp_server`) only turns these into protocol objects
and protocol errors; a server for another protocol would reuse them as they are.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InvalidInputError, MimirError, NotFoundError
from .fence import json_text
from .io import MAX_DATA_CHARS, cap_data
from .specs import TOOLS, ToolOutput, lesson_data, run_tool

if TYPE_CHECKING:
    from ..memory import Mimir

#: The context prompt when nothing is known about the task.
NOTHING_KNOWN = "Mimir has no lessons or past attempts relevant to this task yet."
#: Tools that only read: they run concurrently, every other one holds the write lock.
READ_ONLY = frozenset(spec.name for spec in TOOLS if spec.read_only)
#: How a resource read failed: the caller's unknown id, the caller's bad argument, an unusable
#: setting or home (named), or a bug (named, logged with its trace by the caller).
Failure = Literal["not_found", "invalid", "unavailable", "internal"]


class ToolServer:
    """Runs tool calls for one server on the memory ``open_mimir`` returns (called per call: a
    factory that opens once and caches, such as :class:`~mimir_core.hosting.background.Maintainer`).

    Writes run one at a time: concurrent clients writing at once only made the store retry its
    commits ("commit conflict"), each retry holding its request's memory. A memory that cannot
    be opened (a bad setting) makes every call an error saying why, not a dead server.
    """

    def __init__(self, open_mimir: Callable[[], Mimir], *, source: str) -> None:
        self.open_mimir = open_mimir
        self.source = source
        self._write_lock = threading.Lock()

    def call(self, name: str, arguments: Mapping[str, Any] | None, session: str) -> ToolOutput:
        """Run tool ``name``; never raises (a failure is an ``is_error`` output naming it)."""
        try:
            mimir = self.open_mimir()
        except Exception as exc:  # bad configuration: every call says why
            return ToolOutput(text=f"cannot open Mimir: {type(exc).__name__}: {exc}", is_error=True)
        if name in READ_ONLY:
            return run_tool(mimir, name, arguments, source=self.source, session=session)
        with self._write_lock:
            return run_tool(mimir, name, arguments, source=self.source, session=session)


def active_lessons(m: Mimir) -> dict[str, Any]:
    """The active lessons (rules served to agents), newest first, as JSON data."""
    found = m.list_lessons(status="active", limit=100)
    return {"lessons": [lesson_data(le).model_dump(mode="json") for le in found]}


def lesson_detail(m: Mimir, lesson_id: str) -> dict[str, Any]:
    """One lesson with its supporting and contradicting experiences and its audit trail."""
    return m.lesson_detail(lesson_id).model_dump(mode="json")


def store_stats(m: Mimir) -> dict[str, Any]:
    """Counts by outcome, source and project, lessons by status, and store facts."""
    return m.stats().model_dump(mode="json")


def resource_text(data: dict[str, Any]) -> str:
    """A resource's text. A resource may be attached to a prompt whole: capped like a tool
    result (x2), and written so that its text spells no tag and hides nothing (escapes: the
    data stays exact)."""
    return json_text(cap_data(data, 2 * MAX_DATA_CHARS), indent=1)


def failure(exc: Exception) -> Failure:
    """Which kind of failure ``exc`` is for a resource read or a prompt."""
    if isinstance(exc, NotFoundError):
        return "not_found"
    if isinstance(exc, InvalidInputError):
        return "invalid"
    if isinstance(exc, (MimirError, OSError)):
        return "unavailable"
    return "internal"


def context_prompt(m: Mimir, task: str) -> str:
    """The context prompt for ``task``: its lessons and what was observed on tasks like it,
    fenced as data (:data:`NOTHING_KNOWN` when there is nothing)."""
    return m.context(task) or NOTHING_KNOWN
