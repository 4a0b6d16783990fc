"""Mimir for LangChain: tools, an agent middleware, a retriever (and a legacy ``BaseMemory``).

The recommended path for ``create_agent``: ``MimirStore`` (``mimir_integrations.langgraph``) as
the long-term store, ``MimirMiddleware`` for lessons and automatic records, and the tools.
Runnable example (offline; ``pip install 'mimir-lessons[langchain]'``)::

    import tempfile

    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage

    from mimir_core import Mimir
    from mimir_integrations.langchain import MimirMiddleware, MimirRetriever, get_tools

    mimir = Mimir(tempfile.mkdtemp())
    mimir.record_failure("run the api tests", "pytest tests/api", "table 'orders' does not exist")

    class Model(FakeMessagesListChatModel):   # stands in for any chat model with tool calling
        def bind_tools(self, tools, **kwargs):
            return self

    call = {"name": "recall_experiences", "args": {"query": "api tests fail"}, "id": "c1"}
    model = Model(responses=[AIMessage("", tool_calls=[call]), AIMessage("Migrate first.")])
    agent = create_agent(model, tools=get_tools(mimir), middleware=[MimirMiddleware(mimir)])
    out = agent.invoke({"messages": [{"role": "user", "content": "the api tests fail, why?"}]})
    print(out["messages"][2].artifact["hits"][0]["action"])     # pytest tests/api

    print(MimirRetriever(mimir=mimir, k=2).invoke("run the api tests")[0].metadata["outcome"])
"""

from __future__ import annotations

from typing import Any

from .middleware import MimirMiddleware
from .retriever import MimirRetriever
from .tools import MimirTool, MimirToolkit, get_tools

__all__ = [
    "MimirMemory",
    "MimirMiddleware",
    "MimirRetriever",
    "MimirTool",
    "MimirToolkit",
    "get_tools",
]


def __getattr__(name: str) -> Any:
    if name == "MimirMemory":  # legacy chains only: needs the separate langchain-classic package
        from .classic import MimirMemory  # OptionalDependencyError without the extra

        return MimirMemory
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
