"""An agent run whose history is OpenAI Responses-API items, framework-free.

The OpenAI Agents SDK hands an adapter Responses items at each model call and reports a tool's
exception apart from them. What Mimir does with that is the same for any framework built on the
Responses API, so it lives here: :class:`ResponsesRun` remembers each raised call's real error
(the model may be shown another text) and the note on what was tried before, puts the lessons
into a model call's instructions and the notes after the calls' outputs, and records a saved
history's attempts. It never imports a framework, and fails open (:class:`RunMemory`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .agent_run import Notes, RunMemory, error_text, last_user_text
from .wire_formats import responses_messages, with_output_notes


class ResponsesRun:
    """Mimir at the seams of a Responses-API run (see the module doc). An output starting with
    ``failure_prefix`` (a framework's stand-in for a hidden exception) is a failure."""

    def __init__(self, memory: RunMemory, *, failure_prefix: str = "", keep: int = 512) -> None:
        self.memory = memory
        self.failure_prefix = failure_prefix
        self.errors = Notes(keep)  # call id -> the exception the tool raised
        self.notes = Notes(keep)  # call id -> what was tried before, for the model

    def messages(self, items: Sequence[Any]) -> list[dict[str, Any]]:
        """``items`` in the chat format Mimir reads, a raised call's output as its real error."""
        return responses_messages(items, errors=self.errors, failure_prefix=self.failure_prefix)

    def model_input(
        self, items: Sequence[Any], instructions: str | None
    ) -> tuple[list[Any], str | None]:
        """A model call's input items and instructions, with Mimir's: the lessons and evidence
        for the user's request after the instructions, each noted call's note after its
        output."""
        block = self.memory.context(last_user_text(self.messages(items)))
        base = instructions or ""
        joined = f"{base}\n\n{block}".strip() if block else instructions
        return with_output_notes(items, self.notes), joined

    def tool_raised(
        self, turn_input: Sequence[Any], call_id: str, tool: str, raw_args: str, exc: BaseException
    ) -> None:
        """The call ``call_id`` (its arguments as JSON text) raised ``exc``: record it at once,
        and keep its error and the note for the next model call."""
        error = error_text(exc)
        self.errors.keep(call_id, error)
        history = self.messages(turn_input)
        self.notes.keep(call_id, self.memory.call_failed(history, call_id, tool, raw_args, error))

    def record(self, history: Sequence[Any], *, session_id: str | None = None) -> int:
        """Record the last turn of a saved history (keyed like the failures recorded as they
        happen, with no run id, so each attempt is one record)."""
        return self.memory.record_run(self.messages(history), session_id=session_id)
