"""The hook handler of the hosts whose hooks are Claude Code's in shape (Claude Code, Codex CLI).

Both take a hook's answer as ``hookSpecificOutput``: ``additionalContext`` reaches the model
(the task's lessons and past attempts, the repeat guard, what is known about a failure) and a
``PreToolUse`` may ask the user first (``permissionDecision: "ask"``, when
``MIMIR_GUARD_ASK_AFTER`` says so). ``PreCompact`` and ``SessionEnd`` start a background ingest.
Each host only decodes its payloads (its ``payload`` module). Stdlib only: the hook path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mimir_core.ingest.capture.events import Event

    from .hooks import HookContext


def answer(ev: Event, ctx: HookContext) -> dict[str, Any] | None:
    """Capture the decoded event ``ev``; the host's answer (``None``: nothing to say)."""
    if ev.kind == "ignore" or not ctx.claim(ev):
        return None
    ctx.capture.handle(ev)
    if ev.name in ("PreCompact", "SessionEnd"):
        ctx.background(ev.name)
    if ev.name == "SessionStart":
        ctx.capture.reset_context(ev.session_id)
    if not ev.inject or (ev.kind == "tool" and ev.ok):
        return None
    said = ctx.answer(ev)
    out: dict[str, Any] = {"hookEventName": ev.name}
    if said.text:
        out["additionalContext"] = said.text
    if said.ask and ev.kind == "pretool":  # the user confirms a command that never worked here
        out["permissionDecision"] = "ask"
        out["permissionDecisionReason"] = said.ask
    return {"hookSpecificOutput": out} if len(out) > 1 else None
