"""``MimirMemory``: the legacy ``BaseMemory`` of ``langchain-classic`` chains (deprecated path).

Prefer the modern path: ``MimirStore`` (LangGraph store) + ``MimirMiddleware`` + the tools.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from pydantic import ConfigDict

from mimir_core.extras import requires_extra
from mimir_core.hosting.turns import turn_records

from .tools import SOURCE, open_mimir

with requires_extra("mimir_integrations.langchain", "langchain-classic"):
    from langchain_classic.base_memory import BaseMemory


class MimirMemory(BaseMemory):
    """Mimir for legacy chains: ``load_memory_variables`` gives the lessons for the input under
    ``memory_key``; ``save_context`` records the attempts of an agent's ``intermediate_steps``
    (``return_intermediate_steps=True``); a plain question and answer is not an attempt and is
    not recorded. ``clear()`` forgets nothing: Mimir is long-term memory (use ``forget``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    mimir: Any = None
    memory_key: str = "mimir_lessons"
    input_key: str | None = None
    budget_chars: int = 2000
    scope: str | None = None

    def model_post_init(self, context: Any, /) -> None:
        self.mimir = open_mimir(self.mimir)

    @property
    def memory_variables(self) -> list[str]:
        return [self.memory_key]

    def _input(self, inputs: dict[str, Any]) -> str:
        if self.input_key is not None:
            return str(inputs.get(self.input_key) or "")
        texts = [v for k, v in inputs.items() if isinstance(v, str) and k != self.memory_key]
        return texts[0] if texts else ""

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        query = self._input(inputs)
        text = ""
        if query.strip():
            text = self.mimir.context(query, budget_chars=self.budget_chars, scope=self.scope)
        return {self.memory_key: text}

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        task = self._input(inputs)
        steps = outputs.get("intermediate_steps") or []
        if not task.strip() or not steps:
            return
        messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
        for n, (step, observation) in enumerate(steps):
            call_id = f"step-{n}"
            args = (
                step.tool_input if isinstance(step.tool_input, dict) else {"input": step.tool_input}
            )
            messages.append(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "function": {"name": step.tool, "arguments": json.dumps(args)},
                        }
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": call_id, "content": str(observation)})
        # The step ids are made up here ("step-0", ...) and repeat in every run: each
        # save_context is one run of the chain, so its records are keyed on a run id of their own.
        run_id = uuid.uuid4().hex
        self.mimir.record_many(
            turn_records(messages, source=SOURCE, scope=self.scope, run_id=run_id)
        )

    def clear(self) -> None:
        """Nothing to clear: the memory is Mimir's long-term store."""
