"""Mimir's entries in a host's ``hooks`` object (event name → list of entries), merged and
removed without touching the user's own: shared by the hosts whose setup edits a JSON file
(Codex CLI, Gemini CLI, Copilot CLI)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def merge(
    hooks: dict[str, Any], ours: dict[str, list[Any]], is_ours: Callable[[Any], bool]
) -> None:
    """Put ``ours`` after the user's entries of each event, replacing Mimir's earlier ones (so
    running setup again changes nothing)."""
    for event, entries in ours.items():
        kept = [e for e in hooks.get(event) or [] if not is_ours(e)]
        hooks[event] = [*kept, *entries]


def remove(data: dict[str, Any], is_ours: Callable[[Any], bool]) -> None:
    """Drop Mimir's entries from ``data["hooks"]``; an event left empty goes, and so does
    ``hooks`` itself when nothing of the user's is left in it."""
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return
    for event in list(hooks):
        entries = hooks[event]
        if isinstance(entries, list):
            kept = [e for e in entries if not is_ours(e)]
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if not hooks:
        del data["hooks"]
