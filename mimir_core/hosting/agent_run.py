"""What an in-process agent framework's adapter asks of Mimir, once for every framework.

The OpenAI Agents SDK, Google ADK and Pydantic AI each hand an adapter the same four moments,
each in its own types: a model call is about to be made (inject the lessons and evidence for the
user's request), a tool is about to run (the repeat guard), a tool call failed (say whether it
failed here before, and record the failure at once, so that a run that crashes keeps it), and a
run ended (record its attempts). The adapter translates its framework's history into the OpenAI
chat format :mod:`mimir_core.hosting.turns` reads (a failed tool result as ``{"error": ...}``, see
:func:`tool_message`) and calls :class:`RunMemory`; ranking, wording and keys live here and
below. Every method fails open: memory never stops an agent, a failure is logged and the answer
is empty.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from hashlib import sha256
from typing import TYPE_CHECKING, Any

from ..observations.tool_call import note_after_failure, note_before
from ..tools.specs import run_tool
from .turns import action_text, split_turns, turn_records, without_notes

if TYPE_CHECKING:
    from ..memory import Mimir

log = logging.getLogger("mimir.agent_run")

#: How many user requests' lessons are cached (a run asks once per model call).
MAX_CACHED = 256


def open_mimir(mimir: Any = None) -> Any:
    """The given Mimir, or one configured from the ``MIMIR_*`` environment."""
    if mimir is not None:
        return mimir
    from ..memory import Mimir as _Mimir
    from ..settings import MimirSettings

    return _Mimir.from_settings(MimirSettings())


def tool_message(call_id: str, content: Any, *, failed: bool) -> dict[str, Any]:
    """A tool result in the OpenAI chat format; a failed one carries its text as ``error`` (so
    :func:`mimir_core.hosting.turns.classify_result` reads it as a failure whatever the text says).
    Mimir's own note on a result is no part of what the tool said: it comes off first."""
    text = without_notes(content if isinstance(content, str) else _json(content))
    if failed:
        text = json.dumps({"error": text})
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def call_message(calls: Sequence[tuple[str, str, Any]], text: str = "") -> dict[str, Any]:
    """An assistant message with tool calls ``(call_id, name, args)`` in the OpenAI format."""
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": _args(args)}}
            for cid, name, args in calls
        ],
    }


def _args(args: Any) -> str:
    return args if isinstance(args, str) else _json(args)


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def error_text(exc: BaseException) -> str:
    """How a tool's exception is recorded: its type and message."""
    return f"{type(exc).__name__}: {exc}"


def tool_schemas(names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Mimir's tools (all, or those ``names``) as JSON schemas, for a framework's tool type."""
    from .conversation import function_schemas

    return [s for s in function_schemas() if names is None or s["name"] in names]


class Notes(dict[str, str]):
    """Call id -> text, bounded (the oldest goes first): what an adapter remembers between a
    framework's callbacks about a call (its real error, the note for the model)."""

    def __init__(self, limit: int = 512) -> None:
        super().__init__()
        self.limit = limit

    def keep(self, key: str, value: str) -> None:
        if not key or not value:
            return
        self[key] = value
        while len(self) > self.limit:
            self.pop(next(iter(self)))


async def off_thread(fn: Callable[..., Any], *args: Any, default: Any = None) -> Any:
    """``fn(*args)`` on a worker thread (the store blocks); a failure is logged and ``default``
    answered: the conversation goes on without memory rather than stopping the agent."""
    try:
        return await asyncio.to_thread(fn, *args)
    except Exception as exc:
        log.warning("mimir: %s failed: %s", getattr(fn, "__name__", "call"), exc)
        return default


async def maybe_await(value: Any) -> Any:
    """``value``, awaited when a framework's callback answered an awaitable."""
    return await value if inspect.isawaitable(value) else value


def last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The latest user request of an OpenAI-format history ("" when none)."""
    turns = split_turns(list(messages))
    return turns[-1].user_text if turns else ""


def _context(mimir: Any, query: str, budget_chars: int, scope: str | None) -> str | None:
    """:meth:`Mimir.context` for ``query``, or ``None`` when memory cannot answer (logged)."""
    try:
        return str(mimir.context(query, budget_chars=budget_chars, scope=scope))
    except Exception as exc:  # memory must never stop the agent
        log.warning("mimir: lessons unavailable: %s", exc)
        return None


def lessons_for(mimir: Any, query: str, *, budget_chars: int, scope: str | None) -> str:
    """The fenced lessons and evidence for ``query``, failing open: "" when the query is blank
    or memory cannot answer. The one such call for every in-process host (:class:`RunMemory`
    adds a per-request cache on top)."""
    if not query.strip():
        return ""
    return _context(mimir, query, budget_chars, scope) or ""


class RunMemory:
    """Mimir at an in-process framework's seams (see the module doc).

    ``source`` names the framework in every record; ``scope`` limits reads and tags writes;
    ``budget_chars`` bounds the injected block; lessons are cached ``cache_seconds`` per request.
    """

    def __init__(
        self,
        mimir: Mimir | None = None,
        *,
        source: str,
        scope: str | None = None,
        budget_chars: int = 2000,
        cache_seconds: float = 60.0,
    ) -> None:
        self.mimir = open_mimir(mimir)
        self.source = source
        self.scope = scope
        self.budget_chars = budget_chars
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, str]] = {}
        self.notes = Notes()  # call id -> the repeat guard's note, from guard() to settle()

    def context(self, query: str) -> str:
        """The fenced lessons and evidence for ``query`` ("" when none or on failure)."""
        if not query.strip():
            return ""
        hit = self._cache.get(query)
        if hit is not None and time.monotonic() - hit[0] < self.cache_seconds:
            return hit[1]
        text = _context(self.mimir, query, self.budget_chars, self.scope)
        if text is None:  # not cached: the next request tries again
            return ""
        self._cache[query] = (time.monotonic(), text)
        if len(self._cache) > MAX_CACHED:
            self._cache.pop(next(iter(self._cache)))
        return text

    def forget_cached(self) -> None:
        """Drop cached blocks (after a record, the next request should see it)."""
        self._cache.clear()

    def before_tool(self, tool: str, args: object, *, task: str) -> str:
        """The repeat guard's note for this call ("" when it has no history here)."""
        return note_before(self.mimir, tool, args, task=task, scope=self.scope)

    def guard(
        self, call_id: str, tool: str, args: object, history: Sequence[Mapping[str, Any]]
    ) -> str:
        """:meth:`before_tool` on the task of ``history``; the note is also kept under
        ``call_id`` for :meth:`settle` (for a framework whose callbacks split the call)."""
        note = self.before_tool(tool, args, task=last_user_text(history))
        self.notes.keep(call_id, note)
        return note

    def settle(
        self,
        call_id: str,
        tool: str,
        args: Any,
        history: Sequence[Mapping[str, Any]],
        error: Any = None,
        *,
        run_id: str | None = None,
        session_id: str | None = None,
    ) -> str:
        """After the call ``call_id``: the note :meth:`guard` kept. When it failed (``error``
        is what it said) the failure is recorded now (:meth:`call_failed`), and unless the
        guard spoke, the note is what was tried before on this task."""
        note = self.notes.pop(call_id, "")
        if error is None:
            return note
        keys = {"run_id": run_id, "session_id": session_id}
        said = self.call_failed(history, call_id, tool, args, error, **keys)
        return note or said

    def tool_failed(
        self,
        messages: Sequence[Mapping[str, Any]],
        tool: str,
        args: object,
        *,
        run_id: str | None = None,
        session_id: str | None = None,
        thread: str | None = None,
    ) -> str:
        """``messages`` end with the failed call's result: record that failure now (the same
        record :meth:`record_run` makes later) and return what was tried before on this task."""
        task = last_user_text(messages)
        note = note_after_failure(self.mimir, tool, args, task=task, scope=self.scope)
        wanted = action_text(tool, args if isinstance(args, Mapping) else {"input": args})
        items = [
            i
            for i in self._items(messages, run_id, session_id, thread=thread)
            if i["outcome"] != "success" and i["action"] == wanted
        ]
        self._record(items)
        return note

    def call_failed(
        self,
        history: Sequence[Mapping[str, Any]],
        call_id: str,
        tool: str,
        args: Any,
        error: Any,
        *,
        run_id: str | None = None,
        session_id: str | None = None,
    ) -> str:
        """:meth:`tool_failed` for a framework that reports a failed call apart from its
        history: the call (unless ``history`` has it) and its ``error`` are added first.
        ``args`` may be the call's JSON text."""
        args = parse_args(args)
        messages = list(history)
        if not any(c.get("id") == call_id for m in messages for c in m.get("tool_calls") or []):
            messages.append(call_message([(call_id, tool, args)]))
        messages.append(tool_message(call_id, error, failed=True))
        return self.tool_failed(messages, tool, args, run_id=run_id, session_id=session_id)

    def search(self, query: str, k: int = 5) -> list[Any]:
        """The ``k`` lessons and past attempts most relevant to ``query``
        (:func:`mimir_core.hosting.retrieval.retrieve`; [] on failure)."""
        from .retrieval import retrieve

        try:
            return list(retrieve(self.mimir, query, k, scope=self.scope))
        except Exception as exc:  # memory must never stop the agent
            log.warning("mimir: search failed: %s", exc)
            return []

    def answer(self, tool: str, arguments: Any) -> dict[str, Any]:
        """A call of Mimir's tool ``tool`` as a JSON-ready answer (:func:`tool_answer`)."""
        return tool_answer(self.mimir, tool, arguments, source=self.source)

    def record_run(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        run_id: str | None = None,
        session_id: str | None = None,
        last_turn_only: bool = True,
        thread: str | None = None,
    ) -> int:
        """Record the attempts of the run's last turn (or of every turn); how many items.
        ``thread`` (a framework's conversation thread) makes the same attempt in another
        thread another record."""
        items = self._items(
            messages, run_id, session_id, last_turn_only=last_turn_only, thread=thread
        )
        self._record(items)
        return len(items)

    def _items(
        self,
        messages: Sequence[Mapping[str, Any]],
        run_id: str | None,
        session_id: str | None,
        *,
        last_turn_only: bool = True,
        thread: str | None = None,
    ) -> list[dict[str, Any]]:
        try:
            items = turn_records(
                list(messages),
                source=self.source,
                session_id=session_id,
                scope=self.scope,
                last_turn_only=last_turn_only,
                run_id=run_id,
            )
        except Exception as exc:  # memory must never stop the agent
            log.warning("mimir: could not read the run: %s", exc)
            return []
        if thread is not None:
            for item in items:
                item["thread_id"] = thread
                item["idempotency_key"] += ":" + sha256(thread.encode()).hexdigest()[:16]
        return items

    def _record(self, items: list[dict[str, Any]]) -> None:
        if not items:
            return
        try:
            self.mimir.record_many(items)
        except Exception as exc:  # memory must never stop the agent
            log.warning("mimir: could not record the run: %s", exc)
            return
        self.forget_cached()


def parse_args(raw: Any) -> Any:
    """A tool call's arguments: JSON text parsed (``{"input": text}`` when it is not JSON, ``{}``
    when empty); anything else as it is."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw or "{}")
    except ValueError:
        return {"input": raw}


def tool_answer_json(mimir: Any, name: str, raw: str, *, source: str) -> str:
    """:func:`tool_answer` for a framework that hands a tool its arguments as JSON text and
    takes its answer as text; arguments that are not JSON are an ``error`` answer."""
    try:
        args = json.loads(raw or "{}")
    except ValueError as exc:
        return json.dumps({"error": f"arguments are not JSON: {exc}"})
    return json.dumps(tool_answer(mimir, name, args, source=source), ensure_ascii=False)


def tool_answer(mimir: Any, name: str, arguments: Any, *, source: str) -> dict[str, Any]:
    """A call of Mimir's tool ``name`` as a JSON-ready answer, for a framework whose tools return
    one value: ``{"result": text, "data": {...}}``, or ``{"error": message}`` naming the bad
    argument (the shape Hermes gets too; :func:`mimir_core.hosting.turns.classify_result` reads an
    ``error`` as a failure). Never raises."""
    args = arguments if isinstance(arguments, Mapping) else {"input": arguments}
    out = run_tool(mimir, name, args, source=source)
    if out.is_error:
        return {"error": out.text}
    return {"result": out.text, "data": out.data}
