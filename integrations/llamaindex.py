"""Mimir for LlamaIndex: a retriever over lessons and experiences, and a memory block.

Runnable example (offline; ``pip install 'mimir-lessons[llamaindex]'``)::

    import asyncio, tempfile

    from llama_index.core.llms import ChatMessage
    from llama_index.core.memory import Memory

    from mimir_core import Mimir
    from mimir_integrations.llamaindex import MimirMemoryBlock, MimirRetriever

    mimir = Mimir(tempfile.mkdtemp())
    mimir.record_failure("deploy the app", "kubectl apply -f app.yaml", "ImagePullBackOff")
    for node in MimirRetriever(mimir, top_k=3).retrieve("deploy the app"):
        print(node.score, node.node.metadata["outcome"], node.node.get_content())

    # Lessons (once consolidated) go into the system message; turns flushed out of short-term
    # memory are recorded as experiences.
    memory = Memory.from_defaults(session_id="s1", memory_blocks=[MimirMemoryBlock(mimir=mimir)])
    memory.put(ChatMessage(role="user", content="deploy the app"))
    print(asyncio.run(memory.aget())[0].content)
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from pydantic import ConfigDict, Field, PrivateAttr

from mimir_core.extras import requires_extra
from mimir_core.hosting.agent_run import lessons_for
from mimir_core.hosting.retrieval import KINDS, retrieve
from mimir_core.hosting.turns import turn_records

with requires_extra("mimir_integrations.llamaindex", "llamaindex"):
    from llama_index.core.llms import ChatMessage
    from llama_index.core.memory import BaseMemoryBlock
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

SOURCE = "llamaindex"
log = logging.getLogger("mimir.llamaindex")


def _open(mimir: Any) -> Any:
    if mimir is not None:
        return mimir
    from mimir_core.memory import Mimir
    from mimir_core.settings import MimirSettings

    return Mimir.from_settings(MimirSettings())


class MimirRetriever(BaseRetriever):
    """Relevant lessons first, then relevant past attempts, as ``NodeWithScore`` s.

    Node metadata: ``kind`` (``lesson``/``experience``), ``id``, and ``outcome`` (experiences) or
    ``confidence`` (lessons); the score is recall relevance (experiences) or confidence (lessons).
    """

    def __init__(
        self,
        mimir: Any = None,
        *,
        top_k: int = 4,
        include: tuple[str, ...] = KINDS,
        scope: str | None = None,
        outcome: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.mimir = _open(mimir)
        self.top_k = top_k
        self.include = include
        self.scope = scope
        self.outcome = outcome
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        docs = retrieve(
            self.mimir,
            query_bundle.query_str,
            self.top_k,
            include=self.include,
            scope=self.scope,
            outcome=self.outcome,
        )
        return [
            NodeWithScore(node=TextNode(id_=d.id, text=d.text, metadata=d.metadata), score=d.score)
            for d in docs
        ]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)


def _as_openai(message: ChatMessage) -> dict[str, Any]:
    extra = message.additional_kwargs or {}
    out: dict[str, Any] = {"role": str(getattr(message.role, "value", message.role))}
    out["content"] = message.content or ""
    calls = extra.get("tool_calls")
    if calls:
        out["tool_calls"] = [c.model_dump() if hasattr(c, "model_dump") else c for c in calls]
    for key in ("tool_call_id", "name"):
        if extra.get(key):
            out[key] = extra[key]
    if out["role"] == "tool" and extra.get("is_error"):
        out["content"] = json.dumps({"error": out["content"]})
    return out


class MimirMemoryBlock(BaseMemoryBlock[str]):
    """A ``Memory`` block: its content is the lessons for the latest user message (fenced as
    data, from ``Mimir.context``); turns flushed out of short-term memory are recorded as
    experiences (``mimir_core.hosting.turns.turn_records``: failed tool calls and what worked after;
    a plain question and answer is not an attempt). Priority 0: never truncated.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = "mimir_lessons"
    description: str | None = "Lessons learned from earlier attempts at similar tasks."
    priority: int = 0
    mimir: Any = Field(default=None, exclude=True)
    budget_chars: int = 2000
    scope: str | None = None
    _open_turn: dict[str, list[dict[str, Any]]] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any, /) -> None:
        self.mimir = _open(self.mimir)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        try:
            users = [m for m in messages or [] if str(getattr(m.role, "value", m.role)) == "user"]
            query = str(users[-1].content or "") if users else ""
        except Exception as exc:  # memory must never stop the agent
            log.warning("mimir: lessons unavailable: %s", exc)
            return ""
        return await asyncio.to_thread(
            lessons_for, self.mimir, query, budget_chars=self.budget_chars, scope=self.scope
        )

    async def _aput(self, messages: list[ChatMessage]) -> None:
        try:
            await self._record_flushed(messages)
        except Exception as exc:  # memory must never stop the agent
            log.warning("mimir: could not record the flushed turns: %s", exc)

    async def _record_flushed(self, messages: list[ChatMessage]) -> None:
        if not messages:
            return
        session = str((messages[0].additional_kwargs or {}).get("session_id") or "") or None
        # A flush can cut a turn in two: the open turn of the last flush is read again with this
        # one (its records have the same keys, so nothing is stored twice).
        chunk = [*self._open_turn.get(session or "", []), *map(_as_openai, messages)]
        # The session is part of the keys: the same attempt in another session is another record.
        items = turn_records(
            chunk, source=SOURCE, session_id=session, scope=self.scope, run_id=session
        )
        starts = [i for i, m in enumerate(chunk) if m["role"] == "user"]
        self._open_turn[session or ""] = chunk[starts[-1] :] if starts else []
        if items:
            await asyncio.to_thread(self.mimir.record_many, items)
