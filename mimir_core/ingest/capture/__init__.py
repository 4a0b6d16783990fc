"""Capture: host hook payloads → experience records in the spool (stdlib only).

Hook processes import this package on every tool call, so it imports nothing beyond the
standard library and Mimir's stdlib-only modules (:mod:`mimir_core.ingest.spool`,
:mod:`mimir_core.redact.core`, :mod:`mimir_core.scope`), and its names load lazily: a Claude Code
hook never imports the mapping module.

It knows no host: each host's adapter (``mimir_integrations.<host>.payload``) turns that host's
payloads into :class:`Event` objects.

* :class:`HookMapping` normalises the payloads of any other host into events, from a JSON
  mapping (``mimir hook --config FILE``);
* :class:`Capture` groups events into episodes per session and task, filters noise, redacts
  and caps, and appends records to the store's spool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "Capture",
    "Event",
    "HookMapping",
    "MappingError",
    "describe_action",
    "is_noise",
]

_LAZY = {
    "Capture": "episodes",
    "Event": "events",
    "describe_action": "events",
    "is_noise": "events",
    "HookMapping": "mapping",
    "MappingError": "mapping",
}

if TYPE_CHECKING:
    from .episodes import Capture
    from .events import Event, describe_action, is_noise
    from .mapping import HookMapping, MappingError


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mimir_core.ingest.capture' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
