"""Gemini CLI hook payloads → :class:`Event`: the declarative mapping ``mapping.json`` is the
whole adapter (stdlib only).

Gemini CLI 0.61 sends ``session_id``, ``cwd``, ``hook_event_name`` and the event's fields
(recorded in ``tests/data/gemini-0.61.0-hooks.json``). ``AfterTool`` carries ``tool_response``
``{llmContent, returnDisplay, error?}``: a tool that failed has ``error``; a shell command that
exited non-zero has none, only ``Exit Code: N`` in ``llmContent``, which the mapping's ``regex``
field reads. ``BeforeTool`` is captured but not answered: Gemini CLI reads no context from it,
so the repeat guard speaks after the repeated command fails (``AfterTool``). ``PreCompress``
is not hooked: 0.61 fires it before every model call, compaction or not; ``SessionEnd`` starts
the background ingest instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mimir_core.ingest.capture import HookMapping
from mimir_core.ingest.capture.events import Event

MAPPING_FILE = Path(__file__).with_name("mapping.json")
_loaded: list[HookMapping] = []


def mapping() -> HookMapping:
    """The shipped mapping, read once per process."""
    if not _loaded:
        _loaded.append(HookMapping.load(MAPPING_FILE))
    return _loaded[0]


def from_gemini(payload: dict[str, Any]) -> Event:
    """The :class:`Event` of one Gemini CLI hook payload (``ignore`` for other events)."""
    return mapping().event(payload)
