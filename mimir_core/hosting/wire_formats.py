"""Two model APIs' histories in the OpenAI chat format :mod:`mimir_core.hosting.turns` reads.

The OpenAI Agents SDK keeps a conversation as Responses-API input items; Google ADK keeps it as
Gemini ``Content`` s. Both are wire formats of a model API, not of a framework, so their
translation lives here, once, and the adapters only say which of their results failed. Gemini
contents are read by attribute (``parts``, ``function_call`` …): nothing here imports a model
SDK.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..observations.tool_call import with_note
from .agent_run import call_message, tool_message


def as_dict(item: Any) -> dict[str, Any]:
    """A Responses item (a dict, or a pydantic model of one) as a plain dict ({} when neither)."""
    if isinstance(item, dict):
        return item
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        value = dump(exclude_unset=True)
        return value if isinstance(value, dict) else {}
    return {}


def output_text(output: Any) -> str:
    """A ``function_call_output``'s output as text (a string, or a list of content parts)."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    return "" if output is None else json.dumps(output, default=str)


def responses_messages(
    items: Sequence[Any], *, errors: Mapping[str, str] | None = None, failure_prefix: str = ""
) -> list[dict[str, Any]]:
    """Responses-API input items in the chat format. A call's output is a failure when its
    call id is in ``errors`` (then the error is what is recorded) or its text starts with
    ``failure_prefix`` (a framework's stand-in for a hidden exception)."""
    errors = errors or {}
    out: list[dict[str, Any]] = []
    for raw in items:
        item = as_dict(raw)
        kind, role = item.get("type"), item.get("role")
        if kind == "function_call":
            call = (item.get("call_id", ""), item.get("name", ""), item.get("arguments", "{}"))
            out.append(call_message([call]))
        elif kind == "function_call_output":
            cid = str(item.get("call_id", ""))
            text = output_text(item.get("output"))
            failed = cid in errors or (bool(failure_prefix) and text.startswith(failure_prefix))
            out.append(tool_message(cid, errors.get(cid, text), failed=failed))
        elif role in ("user", "assistant", "system", "developer"):
            out.append({"role": role, "content": item.get("content")})
    return out


def with_output_notes(items: Sequence[Any], notes: Mapping[str, str]) -> list[Any]:
    """``items`` with each noted call's text output followed by its note (for the model only:
    :func:`mimir_core.hosting.turns.without_notes` takes it off again when Mimir reads the
    output)."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            note = notes.get(str(item.get("call_id", "")))
            if note and isinstance(item.get("output"), str):
                item = {**item, "output": with_note(item["output"], note)}
        out.append(item)
    return out


def result_outcome(response: Mapping[str, Any]) -> tuple[bool, Any]:
    """(failed, what to record) of a function's dict result: Google's convention
    ``{"status": "error", "error_message": ...}``, or an ``error`` field, is a failure."""
    status = str(response.get("status", "")).lower()
    error = response.get("error") or response.get("error_message")
    if status == "error" or error:
        return True, error or dict(response)
    return False, response.get("result", response) if len(response) == 1 else dict(response)


def gemini_messages(contents: Sequence[Any], *, drop_key: str = "") -> list[dict[str, Any]]:
    """Gemini ``Content`` s in the chat format; a function response that reports an error
    (:func:`result_outcome`) is a failure, and its ``drop_key`` field (Mimir's own note) is no
    part of what the function said."""
    out: list[dict[str, Any]] = []
    for content in contents:
        if content is None:
            continue
        texts, calls = [], []
        for part in content.parts or []:
            if part.function_call is not None:
                fc = part.function_call
                calls.append((fc.id or "", fc.name or "", dict(fc.args or {})))
            elif part.function_response is not None:
                fr = part.function_response
                response = {k: v for k, v in (fr.response or {}).items() if k != drop_key}
                failed, text = result_outcome(response)
                out.append(tool_message(fr.id or "", text, failed=failed))
            elif part.text and not part.thought:
                texts.append(part.text)
        if calls:
            out.append(call_message(calls, "\n".join(texts)))
        elif texts:
            role = "user" if content.role == "user" else "assistant"
            out.append({"role": role, "content": "\n".join(texts)})
    return out
