"""Experiences from a conversation's messages: what each tool call tried and how it turned out.

Agent hosts that speak the OpenAI chat format (Hermes Agent, and any framework that keeps an
OpenAI-style message list) hand their memory the messages of each turn::

    {"role": "user", "content": "run the payments tests"}
    {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function":
        {"name": "terminal", "arguments": '{"command": "pytest tests"}'}}]}
    {"role": "tool", "tool_call_id": "call_1",
        "content": '{"output": "E   UndefinedTable ...", "exit_code": 1, "error": null}'}

:func:`turn_records` turns them into :meth:`Mimir.record_many` items with the same episode
shape as hook capture (:mod:`mimir_core.ingest.capture`): the task is the user message of the turn;
every failed call is one failure; the calls that succeeded after the turn's last failure are
one success whose action is that sequence of steps; successful read-only calls are noise. The
outcome is read from the tool result, not from the tool's status: Hermes' ``terminal`` reports
a failed command as a normal result, so a non-zero ``exit_code`` is a failure (unless the host
explains the code as not an error, such as ``grep`` finding nothing).

Every record carries an idempotency key derived from the call id, the task, the action and the
result, so feeding the same messages twice (``sync_turn`` for a turn and later
``on_session_end`` with the whole history) stores each attempt once. Call ids are not unique
everywhere (a legacy chain numbers its steps, fake and some real models reuse ids): a host that
can tell its runs or sessions apart passes ``run_id``, which is part of every key, so the same
attempt in another run is another record.

Stdlib only, and never raises on malformed messages: whatever it cannot read is skipped.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..ingest.capture.events import (
    EDIT_TOOLS,
    MAX_ACTION,
    SHELL_TOOLS,
    after_steps,
    describe_action,
    is_mimir_tool,
    is_noise_call,
    success_summary,
)

__all__ = [
    "EDIT_TOOLS",
    "SHELL_TOOLS",
    "ToolAttempt",
    "Turn",
    "action_text",
    "classify_result",
    "failure_digest",
    "is_noise",
    "split_turns",
    "turn_records",
]

MAX_TASK = 1000
MAX_REASON = 1200
#: A user message like these (or a single word) continues the previous turn's task.
_FOLLOW_UP = re.compile(
    r"(y|yes|yeah|yep|ok|okay|sure|go|go on|go ahead|do it|do that|please|please do|continue|"
    r"retry|try again|again|proceed|next|sounds good|lgtm|fix it|and now|what now|now\??)"
    r"[\s.!?,]*",
    re.IGNORECASE,
)
_RESULT_HEAD = 2_000_000  # a larger tool result is read as cut JSON (see _json_object)
_KEPT_RESULT = 64_000  # what a ToolAttempt keeps of its result
_OUTPUT_START = re.compile(r'^\{\s*"output"\s*:\s*"')
_CUT_FIELD = re.compile(r'"(exit_code|returncode)"\s*:\s*(-?\d+)|"error"\s*:\s*"((?:[^"\\]|\\.)*)"')

_FAILED_STATUS = frozenset({"error", "failed", "failure", "timeout", "timed_out", "cancelled"})
_NOT_AN_ERROR = re.compile(r"not an error|\bexpected\b", re.IGNORECASE)
_ERROR_TEXT = re.compile(
    r"^\s*(error\b|error executing tool|traceback \(most recent call last\)|exception\b|"
    r"fatal\b|failed\b|command not found)",
    re.IGNORECASE,
)
_FENCED = re.compile(r"<\s*memory-context\s*>[\s\S]*?</\s*memory-context\s*>", re.IGNORECASE)
#: Mimir's own block, as a host adapter appends it to a tool result (after a blank line, or as
#: one more content part): what Mimir said is never evidence of what the tool did.
_NOTED = re.compile(r"(?:\n\n|\n)?<mimir-memory>[\s\S]*?</mimir-memory>")


@dataclass(frozen=True)
class ToolAttempt:
    """One tool call and how its result reads."""

    tool: str
    args: dict[str, Any]
    call_id: str
    outcome: str
    reason: str
    result: str
    exit_code: int | None = None


@dataclass(frozen=True)
class Turn:
    """A user message and the tool calls made before the next one."""

    task: str
    user_text: str
    attempts: list[ToolAttempt] = field(default_factory=list)


# -- reading messages --------------------------------------------------------------------------


def _text(content: Any) -> str:
    """Plain text of a message content (a string or a list of typed parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return ""


def _squash(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def without_notes(text: str) -> str:
    """``text`` without the block Mimir appended to it (a tool result an adapter noted)."""
    return _NOTED.sub("", text)


def _clean_user(text: str) -> str:
    """The user's words without recalled-memory blocks a host may have added."""
    return _NOTED.sub(" ", _FENCED.sub(" ", text)).strip()


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str) and raw.strip():
        try:
            value = json.loads(raw)
        except ValueError:
            return {"arguments": raw}
        return dict(value) if isinstance(value, Mapping) else {"arguments": value}
    return {}


def _calls(message: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(call id, tool name, arguments) of an assistant message's tool calls."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return out
    for call in calls:
        if not isinstance(call, Mapping):
            continue
        fn = call.get("function")
        fn = fn if isinstance(fn, Mapping) else call
        name = fn.get("name")
        if not isinstance(name, str) or not name.strip():
            continue
        call_id = call.get("id")
        out.append(
            (
                call_id if isinstance(call_id, str) else "",
                name.strip(),
                _arguments(fn.get("arguments")),
            )
        )
    return out


def split_turns(messages: object) -> list[Turn]:
    """The turns of an OpenAI-style message list, each with its tool attempts, oldest first.

    Tool calls before the first user message belong to no task and are skipped, as are calls
    that never got a result (an interrupted turn) and anything malformed.
    """
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        return []
    turns: list[Turn] = []
    pending: dict[str, tuple[str, dict[str, Any]]] = {}
    unnamed: list[tuple[str, str, dict[str, Any]]] = []
    current: Turn | None = None
    for msg in messages:
        if not isinstance(msg, Mapping):
            continue
        role = msg.get("role")
        if role == "user":
            text = _clean_user(_text(msg.get("content")))
            if not text:
                continue
            task = _squash(text, MAX_TASK)
            if current is not None and (len(text.split()) == 1 or _FOLLOW_UP.fullmatch(text)):
                task = _squash(f"{current.task} ({text})", MAX_TASK)
            current = Turn(task=task, user_text=text)
            turns.append(current)
            pending.clear()
            unnamed.clear()
        elif role == "assistant" and current is not None:
            for call_id, name, args in _calls(msg):
                if call_id:
                    pending[call_id] = (name, args)
                else:
                    unnamed.append((call_id, name, args))
        elif role == "tool" and current is not None:
            attempt = _attempt(msg, pending, unnamed)
            if attempt is not None:
                current.attempts.append(attempt)
    return turns


def _attempt(
    msg: Mapping[str, Any],
    pending: dict[str, tuple[str, dict[str, Any]]],
    unnamed: list[tuple[str, str, dict[str, Any]]],
) -> ToolAttempt | None:
    call_id = msg.get("tool_call_id")
    call_id = call_id if isinstance(call_id, str) else ""
    if call_id and call_id in pending:
        name, args = pending.pop(call_id)
    elif unnamed:
        _cid, name, args = unnamed.pop(0)
    elif isinstance(msg.get("name"), str) and msg["name"].strip():
        name, args = msg["name"].strip(), {}
    else:
        return None
    result = without_notes(_text(msg.get("content")))
    outcome, reason, exit_code = classify_result(result)
    return ToolAttempt(name, args, call_id, outcome, reason, result[:_KEPT_RESULT], exit_code)


# -- outcomes ----------------------------------------------------------------------------------


def _json_object(text: str) -> dict[str, Any] | None:
    """The JSON object a result holds; for one cut short (too large, or truncated by the
    host), its ``exit_code`` and ``error`` fields if they can be found."""
    head = text[:_RESULT_HEAD].lstrip()
    if not head.startswith("{"):
        return None
    try:
        value, _end = json.JSONDecoder().raw_decode(head)
    except ValueError:
        found: dict[str, Any] = {}
        for m in _CUT_FIELD.finditer(head):
            if m.group(1) and m.group(1) not in found:
                found[m.group(1)] = int(m.group(2))
            elif m.group(3) is not None and "error" not in found:
                try:
                    found["error"] = json.loads(f'"{m.group(3)}"')
                except ValueError:
                    found["error"] = m.group(3)
        if found:
            found.setdefault("output", _OUTPUT_START.sub("", head, count=1))
        return found or None
    return value if isinstance(value, dict) else None


def _tail(text: str, limit: int = MAX_REASON) -> str:
    """The end of a tool's output, where errors usually are."""
    text = text.strip()
    if len(text) <= limit:
        return text
    return "…" + text[-(limit - 1) :]


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def classify_result(result: str) -> tuple[str, str, int | None]:
    """(outcome, reason, exit code) of a tool result's text.

    A JSON object with a non-zero ``exit_code`` is a failure unless its ``exit_code_meaning``
    says the code is not an error; an ``error`` value, ``success: false`` or a failed
    ``status`` is a failure; plain text that starts like an error message is a failure.
    Everything else succeeded. The reason of a failure is the error, or the end of the output.
    """
    obj = _json_object(result)
    if obj is None:
        if _ERROR_TEXT.match(result):
            return "failure", _tail(result), None
        return "success", "", None
    output = _as_text(obj.get("output") or obj.get("stdout") or obj.get("stderr") or "")
    error = obj.get("error")
    raw_code = obj.get("exit_code", obj.get("returncode"))
    code = raw_code if isinstance(raw_code, int) and not isinstance(raw_code, bool) else None
    if code is not None and code != 0:
        meaning = _as_text(obj.get("exit_code_meaning") or "")
        if meaning and _NOT_AN_ERROR.search(meaning) and not error:
            return "success", _squash(meaning, MAX_REASON), code
        detail = _as_text(error) if error else output
        label = f"exit code {code}" + (f" ({meaning})" if meaning else "")
        return "failure", _tail(f"{label}: {detail}" if detail.strip() else label), code
    if error:
        return "failure", _tail(_as_text(error)), code
    status = obj.get("status")
    if obj.get("success") is False or (
        isinstance(status, str) and status.lower() in _FAILED_STATUS
    ):
        detail = _as_text(obj.get("message") or obj.get("reason") or output or status or "")
        return "failure", _tail(detail or "the tool reported failure"), code
    return "success", "", code


# -- actions and noise -------------------------------------------------------------------------


def action_text(tool: str, args: Mapping[str, Any]) -> str:
    """What a call tried, in the words every Mimir adapter uses (:func:`describe_action`: a shell
    tool's command as typed, ``edit <path>`` for a file edit, otherwise the tool and its
    arguments), on one line."""
    return _squash(describe_action(tool, dict(args), limit=4 * MAX_ACTION), MAX_ACTION)


def is_noise(attempt: ToolAttempt) -> bool:
    """A successful call that only read or looked something up: too little to keep."""
    return attempt.outcome == "success" and is_noise_call(attempt.tool, dict(attempt.args))


def _ignored(tool: str, ignore: Collection[str]) -> bool:
    # Mimir's own tools, also behind an MCP client's prefix ("mcp__mimir__recall_lessons").
    return tool in ignore or re.split(r"__|\.", tool)[-1] in ignore or is_mimir_tool(tool)


# -- records -----------------------------------------------------------------------------------


def _key(source: str, kind: str, *parts: str) -> str:
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8", "replace")).hexdigest()
    return f"{source}:{kind}:{digest[:40]}"


def _fingerprint(attempt: ToolAttempt, n: int) -> str:
    result = hashlib.sha256(attempt.result.encode("utf-8", "replace")).hexdigest()[:16]
    return f"{attempt.call_id or '#' + str(n)}|{attempt.tool}|{result}"


def turn_records(
    messages: object,
    *,
    source: str,
    session_id: str | None = None,
    scope: str | None = None,
    ignore_tools: Collection[str] = (),
    last_turn_only: bool = False,
    lessons_for: Callable[[str], Sequence[str]] | None = None,
    context: Mapping[str, Any] | None = None,
    run_id: str | None = None,
) -> list[dict[str, Any]]:
    """:meth:`Mimir.record_many` items for the attempts in ``messages`` (see the module doc).

    Per turn: every failed call is one failure (with the steps that led to it); the calls that
    succeeded after the turn's last failure are one success whose action is that sequence of
    steps. Successful read-only calls and Mimir's own tools (and ``ignore_tools``) are left
    out. ``last_turn_only`` keeps the turn of the last user message; ``lessons_for(user text)``
    gives the ids of the lessons shown for a turn; ``context`` is merged into every record's.
    ``run_id`` (a session, a run, a user message id) is part of every idempotency key: the same
    messages under the same ``run_id`` are the same records, under another they are new ones.
    """
    run = () if run_id is None else (f"run={run_id}",)
    turns = split_turns(messages)
    if last_turn_only:
        turns = turns[-1:]
    items: list[dict[str, Any]] = []
    for turn in turns:
        steps = [(n, a) for n, a in enumerate(turn.attempts) if not _ignored(a.tool, ignore_tools)]
        if not steps:
            continue
        base: dict[str, Any] = {"source": source, "session_id": session_id or None}
        if scope:
            base["scope"] = scope
        if lessons_for is not None:
            try:
                lesson_ids = [i for i in lessons_for(turn.user_text) if isinstance(i, str)]
            except Exception:  # evidence is optional: never lose the record over it
                lesson_ids = []
            if lesson_ids:
                base["recalled_lesson_ids"] = lesson_ids
        done: list[tuple[int, ToolAttempt]] = []
        failures: list[ToolAttempt] = []
        for n, attempt in steps:
            if attempt.outcome == "success":
                if not is_noise(attempt):
                    done.append((n, attempt))
                continue
            action = action_text(attempt.tool, attempt.args)
            ctx: dict[str, Any] = {**(context or {}), "tool": attempt.tool}
            if attempt.exit_code is not None:
                ctx["exit_code"] = attempt.exit_code
            if done:
                ctx["after_steps"] = after_steps([action_text(a.tool, a.args) for _n, a in done])
            items.append(
                {
                    **base,
                    "task": turn.task,
                    "action": action,
                    "outcome": attempt.outcome,
                    "reason": attempt.reason or "failed",
                    "context": ctx,
                    "idempotency_key": _key(
                        source, "fail", turn.task, action, _fingerprint(attempt, n), *run
                    ),
                }
            )
            failures.append(attempt)
            done = []
        if done:
            action, reason, summary = success_summary(
                [action_text(a.tool, a.args) for _n, a in done],
                [a.tool for _n, a in done],
                len(failures),
                failures[-1].reason if failures else "",
            )
            ctx = {**(context or {}), **summary}
            first_n, first = done[0]
            items.append(
                {
                    **base,
                    "task": turn.task,
                    "action": action,
                    "outcome": "success",
                    "reason": reason or None,
                    "context": ctx,
                    "idempotency_key": _key(
                        source,
                        "ok",
                        turn.task,
                        action,  # another sequence of steps is another success
                        _fingerprint(first, first_n),
                        str(len(done)),
                        *run,
                    ),
                }
            )
    return items


def failure_digest(records: Sequence[Mapping[str, Any]], *, limit_chars: int = 1200) -> str:
    """A short list of the failed attempts among ``records``, for a conversation summary.

    Empty when nothing failed. A host that compresses its context can keep this in the summary,
    so that the agent does not try again what already failed. The records may be raw (not yet
    through the write chokepoint), and the list goes into a prompt: secrets are redacted, and it
    is fenced as data with its text made inert, like every block Mimir injects.
    """
    from ..redact.core import sanitize
    from ..tools.digest import FENCE_CLOSE, FENCE_OPEN, neutralise

    lines: list[str] = []
    seen: set[tuple[str, str]] = set()
    for rec in records:
        if rec.get("outcome") != "failure":
            continue
        action = _squash(neutralise(sanitize(str(rec.get("action") or ""))), 200)
        reason = _squash(neutralise(sanitize(str(rec.get("reason") or ""))), 200)
        if (action, reason) in seen:
            continue
        seen.add((action, reason))
        lines.append(f"- `{action}` failed: {reason}" if reason else f"- `{action}` failed")
    if not lines:
        return ""
    head = "Attempts that already failed in this conversation (recorded by Mimir, as data):"
    out = [FENCE_OPEN, head]
    size = len(FENCE_OPEN) + len(head) + len(FENCE_CLOSE) + 2
    for i, line in enumerate(lines):
        if size + len(line) + 1 > limit_chars:
            out.append(f"- … and {len(lines) - i} more")
            break
        out.append(line)
        size += len(line) + 1
    return "\n".join([*out, FENCE_CLOSE])
