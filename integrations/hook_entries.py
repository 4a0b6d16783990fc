"""Mimir's entries in a host's ``hooks`` object (event name → list of entries), merged and
removed without touching the user's own: shared by the hosts whose setup edits a JSON file
(Claude Code, Codex CLI, Gemini CLI, Copilot CLI)."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from .setup_cmd import SetupEnv


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


def owned_by(host: str) -> Callable[[Any], bool]:
    """Whether an entry is Mimir's for ``host``: one of its ``hooks`` runs ``mimir hook host``
    (the shape of Claude Code's, Codex's and Gemini CLI's entries)."""
    needle = f"hook {host}"

    def is_ours(entry: Any) -> bool:
        hooks = entry.get("hooks") if isinstance(entry, dict) else None
        return isinstance(hooks, list) and any(
            isinstance(h, dict) and needle in str(h.get("command", "")) for h in hooks
        )

    return is_ours


def command_entries(
    events: Iterable[str],
    command: str,
    *,
    timeout: int,
    matcher: str = "",
    matcher_events: Container[str] = (),
) -> dict[str, list[dict[str, Any]]]:
    """One entry per event running ``command``; those of ``matcher_events`` with ``matcher``
    first (no matcher: the host runs the hook for every tool)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        entry: dict[str, Any] = {
            "hooks": [{"type": "command", "command": command, "timeout": timeout}]
        }
        if matcher and event in matcher_events:
            entry = {"matcher": matcher, **entry}
        out[event] = [entry]
    return out


def install(
    env: SetupEnv, path: Path, ours: dict[str, list[Any]], is_ours: Callable[[Any], bool]
) -> str:
    """Merge ``ours`` into the ``hooks`` object of the JSON file ``path`` (a backup first, by
    ``env``); what was done, for setup to say."""
    data = env.read_json(path)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise env.error(f"{path}: 'hooks' is not an object; fix it by hand first")
    merge(hooks, ours, is_ours)
    return env.write_json(path, data, "hooks for " + ", ".join(ours))


def uninstall(env: SetupEnv, path: Path, is_ours: Callable[[Any], bool]) -> list[str]:
    """Remove Mimir's entries from the JSON file ``path`` (nothing when it does not exist)."""
    if not path.exists():
        return []
    data = env.read_json(path)
    remove(data, is_ours)
    return [env.write_json(path, data, "Mimir's hooks removed")]
