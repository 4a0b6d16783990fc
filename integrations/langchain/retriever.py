"""``MimirRetriever``: a LangChain retriever over Mimir's lessons and experiences."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from mimir_core.extras import requires_extra
from mimir_core.hosting.retrieval import KINDS, RetrievedDoc, retrieve

from .tools import open_mimir

with requires_extra("mimir_integrations.langchain", "langchain"):
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever


class MimirRetriever(BaseRetriever):
    """Relevant lessons first, then relevant past attempts, as ``Document`` s.

    ``k`` documents at most (``invoke(query, k=2)`` overrides it); ``include`` picks
    ``"lessons"`` and/or ``"experiences"``; metadata holds ``kind``, ``id`` and the outcome
    (experiences) or confidence (lessons).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    mimir: Any = None
    k: int = 4
    include: tuple[str, ...] = KINDS
    scope: str | None = None
    outcome: str | None = None

    def model_post_init(self, context: Any, /) -> None:
        self.mimir = open_mimir(self.mimir)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        docs = retrieve(
            self.mimir,
            query,
            self.k if k is None else k,
            include=self.include,
            scope=self.scope,
            outcome=self.outcome,
        )
        return [_document(d) for d in docs]

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
    ) -> list[Document]:
        import asyncio

        sync_manager = run_manager.get_sync()
        return await asyncio.to_thread(
            self._get_relevant_documents, query, run_manager=sync_manager, k=k
        )


def _document(doc: RetrievedDoc) -> Document:
    return Document(page_content=doc.text, id=doc.id, metadata={**doc.metadata, "score": doc.score})
