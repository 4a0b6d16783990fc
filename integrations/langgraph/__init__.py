"""Mimir for LangGraph: a ``BaseStore`` on the shared Mimir store and a checkpoint-aware node.

Runnable example (offline; ``pip install 'mimir-lessons[langgraph]'``)::

    import tempfile
    from typing import TypedDict

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    from mimir_core import Mimir
    from mimir_integrations.langgraph import MimirMemoryNode, MimirStore

    mimir = Mimir(tempfile.mkdtemp())
    store = MimirStore(mimir)                      # long-term memory for any LangGraph tool or node
    store.put(("memories", "u1"), "theme", {"text": "prefers dark mode"})
    print(store.search(("memories", "u1"), query="which colour scheme?")[0].value)

    State = TypedDict(
        "State", {"task": str, "action": str, "outcome": str, "mimir_lessons": str}, total=False
    )

    def deploy(state: State) -> dict:  # your agent step; the node adds state["mimir_lessons"]
        return {"action": "alembic upgrade head && deploy", "outcome": "success"}

    memory = MimirMemoryNode(mimir)  # lessons before the step, one exactly-once record after
    graph = StateGraph(State).add_node("deploy", memory.wrap(deploy))
    graph.add_edge(START, "deploy").add_edge("deploy", END)
    app = graph.compile(checkpointer=InMemorySaver(), store=store)
    app.invoke({"task": "deploy the payments service"}, {"configurable": {"thread_id": "t1"}})
    print(mimir.recall("deploy payments")[0].experience.action)
"""

from __future__ import annotations

from .node import MimirMemoryNode, describe_state
from .store import MimirStore

__all__ = ["MimirMemoryNode", "MimirStore", "describe_state"]
