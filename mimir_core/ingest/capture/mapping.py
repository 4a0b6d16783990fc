"""A declarative mapping from any host's hook payload to an :class:`Event` (stdlib only).

``mimir hook --config FILE`` reads a JSON file such as::

    {
      "host": "my-agent",
      "session": "session.id",
      "cwd": "workspace",
      "events": [
        {"when": {"type": "prompt"}, "kind": "task", "text": "message", "inject": true},
        {"when": {"type": "tool_end"}, "kind": "tool",
         "tool": "tool.name", "input": "tool.args", "id": "tool.call_id",
         "ok": {"path": "tool.exit_code", "equals": 0}, "error": "tool.stderr"},
        {"when": {"type": ["done", "exit"]}, "kind": "stop"}
      ],
      "reply": {"field": "additionalContext", "wrap": ["hookSpecificOutput"]}
    }

A *path* is a dotted path into the payload (``tool.args.0``). A field is a path, a
``{"value": literal}``, or ``{"path": p, "equals"|"not_equals"|"in"|"not_in": v}`` (a boolean
test). ``{"path": p, "regex": r}`` takes the first group (else the whole match) of ``r`` in the
text at ``p`` (``null`` without a match), and the tests then apply to it: a host that reports an
exit code only inside its output, such as ``{"path": "result", "regex": "Exit Code: (\\d+)",
"in": [null, "0"]}``. ``{"all": [field, ...]}`` is true when every field is, and
``{"first": [field, ...]}`` is the first field that is not empty.

``when`` maps paths to an expected value, a list of accepted values, or ``{"exists": bool}``
(for a host whose payloads do not name their event, such as Copilot CLI's); the first event
whose ``when`` matches wins. ``reply`` says where injected lessons go in the answer: the answer is
``{field: text}``, nested under the keys of ``wrap``. Without ``reply`` nothing is printed.
A host shipped this way is a mapping file in its adapter's folder (Gemini CLI's:
``integrations/gemini/mapping.json``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from .events import KINDS, Event


class MappingError(ConfigError, ValueError):
    """The mapping file is not valid; the message names the bad key."""


_MISSING = object()


def lookup(payload: Any, path: str) -> Any:
    """The value at a dotted ``path`` (``a.b.0``), or ``None``."""
    value = payload
    for part in path.split(".") if path else []:
        if isinstance(value, dict):
            value = value.get(part, _MISSING)
        elif isinstance(value, list) and part.lstrip("-").isdigit():
            idx = int(part)
            value = value[idx] if -len(value) <= idx < len(value) else _MISSING
        else:
            value = _MISSING
        if value is _MISSING:
            return None
    return value


def _search(value: Any, pattern: str) -> str | None:
    """The first group (else the whole match) of ``pattern`` in a text value; ``None`` when
    there is no text or no match (``re`` is loaded already: ``json`` imports it)."""
    if not isinstance(value, str):
        return None
    found = re.search(pattern, value)
    if found is None:
        return None
    return found.group(1) if found.re.groups else found.group(0)


def _check_regexes(spec: Any, where: str) -> None:
    """Raise :class:`MappingError` naming ``where`` for a ``regex`` that does not compile."""
    if isinstance(spec, list):
        for i, part in enumerate(spec):
            _check_regexes(part, f"{where}[{i}]")
    elif isinstance(spec, dict):
        if "regex" in spec:
            try:
                re.compile(str(spec["regex"]))
            except re.error as exc:
                raise MappingError(f"{where}.regex: {spec['regex']!r}: {exc}") from exc
        for key, part in spec.items():
            if key != "when" and isinstance(part, (dict, list)):
                _check_regexes(part, f"{where}.{key}")


def _field(payload: Any, spec: Any) -> Any:
    if spec is None:
        return None
    if isinstance(spec, str):
        return lookup(payload, spec)
    if isinstance(spec, dict):
        if "value" in spec:
            return spec["value"]
        if "all" in spec:
            return all(_field(payload, part) for part in _parts(spec, "all"))
        if "first" in spec:
            for part in _parts(spec, "first"):
                value = _field(payload, part)
                if value not in (None, "", [], {}):
                    return value
            return None
        value = lookup(payload, str(spec.get("path", "")))
        if "regex" in spec:
            value = _search(value, str(spec["regex"]))
        if "equals" in spec:
            return value == spec["equals"]
        if "not_equals" in spec:
            return value != spec["not_equals"]
        if "in" in spec:
            return value in spec["in"]
        if "not_in" in spec:
            return value not in spec["not_in"]
        return value
    raise MappingError(f"a field must be a path or an object; got {spec!r}")


def _parts(spec: dict[str, Any], key: str) -> list[Any]:
    parts = spec[key]
    if not isinstance(parts, list):
        raise MappingError(f"{key}: must be a list of fields; got {parts!r}")
    return parts


def _matches(payload: Any, when: dict[str, Any]) -> bool:
    for path, expected in when.items():
        value = lookup(payload, path)
        if isinstance(expected, dict) and "exists" in expected:
            if (value is not None) != bool(expected["exists"]):
                return False
        elif isinstance(expected, list):
            if value not in expected:
                return False
        elif value != expected:
            return False
    return True


def _str(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


class HookMapping:
    """A parsed mapping file (see the module doc)."""

    def __init__(
        self,
        host: str,
        events: list[dict[str, Any]],
        session: Any = None,
        cwd: Any = None,
        reply: dict[str, Any] | None = None,
    ) -> None:
        self.host = host
        self.events = events
        self.session = session
        self.cwd = cwd
        self.reply: dict[str, Any] = reply or {}

    @classmethod
    def load(cls, path: str | Path) -> HookMapping:
        """Read and check a mapping file. Raises :class:`MappingError` naming the bad key."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise MappingError(f"cannot read mapping {path}: {exc}") from exc
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> HookMapping:
        """A mapping from its JSON object. Raises :class:`MappingError` naming the bad key."""
        if not isinstance(data, dict):
            raise MappingError("the mapping must be a JSON object")
        host = data.get("host")
        if not isinstance(host, str) or not host.strip():
            raise MappingError("host: must be a non-empty string naming the host")
        events = data.get("events")
        if not isinstance(events, list) or not events:
            raise MappingError("events: must be a non-empty list")
        for i, spec in enumerate(events):
            if not isinstance(spec, dict):
                raise MappingError(f"events[{i}]: must be an object")
            if spec.get("kind") not in KINDS:
                raise MappingError(f"events[{i}].kind: must be one of {', '.join(KINDS)}")
            if not isinstance(spec.get("when", {}), dict):
                raise MappingError(f"events[{i}].when: must be an object of path: value")
            _check_regexes(spec, f"events[{i}]")
        reply = data.get("reply") or {}
        if not isinstance(reply, dict) or (reply and not isinstance(reply.get("field"), str)):
            raise MappingError("reply: must be an object with a 'field' string")
        return cls(host.strip(), events, data.get("session"), data.get("cwd"), reply)

    def event(self, payload: Any) -> Event:
        """The :class:`Event` for a payload (``ignore`` when no rule matches)."""
        session = _str(_field(payload, self.session)) or "unknown"
        ev = Event(host=self.host, kind="ignore", session_id=session)
        ev.cwd = _str(_field(payload, self.cwd))
        for spec in self.events:
            if not _matches(payload, spec.get("when", {})):
                continue
            ev.kind = spec["kind"]
            ev.name = _str(spec.get("name")) or ev.kind
            ev.text = _str(_field(payload, spec.get("text")))
            ev.inject = bool(spec.get("inject")) and bool(self.reply)
            if ev.kind in ("tool", "pretool"):
                ev.tool = _str(_field(payload, spec.get("tool"))) or "tool"
                ev.tool_input = _field(payload, spec.get("input"))
                ev.event_id = _str(_field(payload, spec.get("id")))
            if ev.kind == "tool":
                ok = _field(payload, spec.get("ok")) if "ok" in spec else True
                ev.error = _str(_field(payload, spec.get("error")))
                ev.ok = bool(ok) if ok is not None else not ev.error
            break
        return ev

    def answer(self, context: str) -> dict[str, Any] | None:
        """The hook's answer carrying ``context``, or ``None`` when the host takes none."""
        if not self.reply or not context:
            return None
        out: dict[str, Any] = {self.reply["field"]: context}
        for key in reversed(self.reply.get("wrap") or []):
            out = {str(key): out}
        return out
