"""GitHub Copilot CLI hook payloads → :class:`Event`: the declarative mapping ``mapping.json``
is the whole adapter (stdlib only).

Copilot CLI 1.0.102 runs the hooks of its camelCase events (``sessionStart``,
``userPromptSubmitted``, ``preToolUse``, ``postToolUse``, ``postToolUseFailure``,
``agentStop``, ``sessionEnd``) with
payloads that do not name the event (recorded in ``tests/data/copilot-1.0.102-hooks.json``): the
mapping tells them apart by their fields (``toolResult``, ``toolName``, ``stopReason``...). A
shell command that exits non-zero is still ``resultType: "success"``; its exit code is only in
``textResultForLlm`` (``<shellId: 0 completed with exit code 2>``), which the mapping's ``regex``
field reads; a tool that failed (a missing file) fires ``postToolUseFailure`` with ``error``.
Each answerable event reads a top-level ``additionalContext``.
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


def from_copilot(payload: dict[str, Any]) -> Event:
    """The :class:`Event` of one Copilot CLI hook payload (``ignore`` for other events)."""
    return mapping().event(payload)
