"""Argument checking and output capping for Mimir's tools (see :mod:`mimir_core.tools.specs`).

Tool arguments come from language models, so a bad one must come back as one line that names the
argument, says what it should be and shows what was sent ("k: must be an integer from 1 to 100;
got 0"). Tool output goes back into a context window, so it is capped: long strings are clipped
and trailing list items dropped (``truncated`` is then set), keeping the data valid against the
tool's output model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import InvalidInputError, short

#: Most characters of readable text one tool call returns.
MAX_TEXT_CHARS = 8000
#: Most characters of structured data (as compact JSON) one tool call returns.
MAX_DATA_CHARS = 20000
#: Strings in structured data are clipped to this many characters when the data is too large.
CLIPPED_STRING_CHARS = 400

_MARKER = "…"


@cache
def _properties(model: type[BaseModel]) -> dict[str, dict[str, Any]]:
    schema = model.model_json_schema()
    props: dict[str, dict[str, Any]] = schema.get("properties", {})
    return props


def expectation(schema: Mapping[str, Any]) -> str:
    """What a JSON-schema property accepts, in words ("an integer from 1 to 100")."""
    options = schema.get("anyOf")
    if options:
        words = [expectation(o) for o in options if o.get("type") != "null"]
        nullable = any(o.get("type") == "null" for o in options)
        return " or ".join(words) + (" (or null)" if nullable else "")
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        return "one of " + ", ".join(json.dumps(v) for v in values)
    kind = schema.get("type")
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if kind in ("integer", "number"):
        noun = "an integer" if kind == "integer" else "a number"
        if lo is not None and hi is not None:
            return f"{noun} from {lo:g} to {hi:g}"
        if lo is not None:
            return f"{noun} of at least {lo:g}"
        return f"{noun} of at most {hi:g}" if hi is not None else noun
    if kind == "string":
        limit = schema.get("maxLength")
        base = "a non-empty string" if schema.get("minLength", 0) >= 1 else "a string"
        return f"{base} of at most {limit} characters" if limit else base
    if kind == "boolean":
        return "true or false"
    if kind == "object":
        return "a JSON object"
    if kind == "array":
        return "a list"
    return "a valid value"


def validate_arguments(tool: str, model: type[BaseModel], arguments: object) -> BaseModel:
    """``arguments`` checked against ``model``; :class:`InvalidInputError` names what is wrong.

    Every problem gets one line; the error's ``field`` is the first bad argument.
    """
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise InvalidInputError(
            "arguments", f"must be a JSON object of named arguments; got {short(arguments)}"
        )
    try:
        return model.model_validate(dict(arguments))
    except ValidationError as exc:
        props = _properties(model)
        lines: list[tuple[str, str]] = []
        seen: set[str] = set()
        for err in exc.errors():
            name = ".".join(str(p) for p in err["loc"]) or "arguments"
            top = str(err["loc"][0]) if err["loc"] else name
            if top in seen:
                continue
            seen.add(top)
            lines.append((top, _problem(tool, top, err, props)))
        field, first = lines[0]
        rest = "".join(f"\n{f}: {p}" for f, p in lines[1:])
        raise InvalidInputError(field, first + rest) from None


def _problem(tool: str, name: str, err: Any, props: dict[str, dict[str, Any]]) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        takes = ", ".join(props) or "no arguments"
        return f"is not an argument of {tool} (it takes: {takes})"
    schema = props.get(name, {})
    if kind == "missing":
        return f"is required: {expectation(schema)}"
    return f"must be {expectation(schema)}; got {short(err.get('input'))}"


# -- output capping ------------------------------------------------------------------------------


def cap_text(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``text`` cut at a line end to at most ``limit`` characters, saying that it was cut."""
    if len(text) <= limit:
        return text
    note = f"\n… (output cut at {limit} characters; ask for fewer results)"
    head = text[: max(0, limit - len(note))]
    cut = head.rfind("\n")
    return (head[:cut] if cut > limit // 2 else head) + note


def _size(data: Any) -> int:
    return len(json.dumps(data, ensure_ascii=False, default=str, separators=(",", ":")))


def _clip_strings(data: Any, limit: int) -> Any:
    if isinstance(data, str):
        return data if len(data) <= limit else data[: limit - 1] + _MARKER
    if isinstance(data, list):
        return [_clip_strings(d, limit) for d in data]
    if isinstance(data, dict):
        return {k: _clip_strings(v, limit) for k, v in data.items()}
    return data


def _longest_list(data: Any) -> list[Any] | None:
    best: list[Any] | None = None
    best_size = -1
    stack = [data]
    while stack:
        node = stack.pop()
        items = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        if isinstance(node, list) and node:
            size = _size(node)
            if size > best_size:
                best, best_size = node, size
        stack.extend(i for i in items if isinstance(i, (dict, list)))
    return best


def cap_data(data: dict[str, Any], limit: int = MAX_DATA_CHARS) -> dict[str, Any]:
    """``data`` shrunk to at most ``limit`` characters of JSON; sets ``truncated`` if it had to.

    Strings are clipped first, then items are dropped from the end of the largest list, so the
    result keeps the shape (and the output model) of the original.
    """
    if _size(data) <= limit:
        return data
    out: dict[str, Any] = _clip_strings(data, CLIPPED_STRING_CHARS)
    out["truncated"] = True
    while _size(out) > limit:
        victim = _longest_list(out)
        if victim is None:
            break
        victim.pop()
    return out
