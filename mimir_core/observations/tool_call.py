"""The repeat guard at an in-process host's tool boundary (LangChain middleware, LangGraph's
``ToolNode``): the note a tool call's result carries.

A hook host (Claude Code) tells its agent "this command failed here before" as the tool is
about to run; an in-process framework gives an adapter the tool call to wrap instead. Both
adapters then do the same thing, which lives here: before the call, look the action up
(:meth:`Mimir.before_tool`); after it, if it failed and nothing was said yet, say whether it had
failed here before and what worked instead (:meth:`Mimir.after_failure`); and hand the note back
to be shown with the result. The action is named as the records name it
(:func:`mimir_core.hosting.turns.action_text`). Memory never breaks a tool call: every error is
logged and the note is empty.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..ingest.capture.events import READ_ONLY_TOOLS, is_mimir_tool

if TYPE_CHECKING:
    from ..memory import Mimir

log = logging.getLogger("mimir.observations")


def _action(tool: str, args: object) -> str:
    from ..hosting.turns import action_text

    return action_text(tool, args if isinstance(args, Mapping) else {"input": args})


def _skipped(tool: str) -> bool:
    low = tool.lower()
    return low in READ_ONLY_TOOLS or is_mimir_tool(low)


def note_before(m: Mimir, tool: str, args: object, *, task: str, scope: str | None) -> str:
    """The repeat guard for a call of ``tool`` with ``args`` on ``task`` ("" when none)."""
    if _skipped(tool):
        return ""
    try:
        return m.before_tool(_action(tool, args), task=task or None, scope=scope)
    except Exception as exc:  # memory must never stop the agent
        log.warning("mimir: repeat guard unavailable: %s", exc)
        return ""


def note_after_failure(m: Mimir, tool: str, args: object, *, task: str, scope: str | None) -> str:
    """Right after that call failed (before its failure is recorded): whether it had failed
    here before on tasks like ``task``, and what worked instead ("" when nothing to say)."""
    if _skipped(tool):
        return ""
    try:
        return m.after_failure(_action(tool, args), task=task or None, scope=scope)
    except Exception as exc:  # memory must never stop the agent
        log.warning("mimir: past attempts unavailable: %s", exc)
        return ""


def with_note(content: Any, note: str) -> Any:
    """A tool result's content with ``note`` after it: a string gets it after a blank line, a
    list of content blocks one more text block; anything else is left as it is."""
    if not note:
        return content
    if isinstance(content, str):
        return f"{content}\n\n{note}" if content else note
    if isinstance(content, list):
        return [*content, {"type": "text", "text": note}]
    return content


__all__ = ["note_after_failure", "note_before", "with_note"]
