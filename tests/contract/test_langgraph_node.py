"""``MimirMemoryNode.wrap`` around steps that use LangGraph's other return and injection forms."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, StreamWriter

from mimir_core import Mimir
from mimir_integrations.langgraph import MimirMemoryNode

CFG = {"configurable": {"thread_id": "t1"}}


class State(TypedDict, total=False):
    task: str
    action: str
    outcome: str
    reason: str
    mimir_lessons: str


def graph(step: Any, m: Mimir, **compile_kwargs: Any) -> Any:
    g = StateGraph(State)
    g.add_node("act", MimirMemoryNode(m).wrap(step))
    g.add_edge(START, "act")
    g.add_edge("act", END)
    return g.compile(checkpointer=InMemorySaver(), **compile_kwargs)


def test_a_step_returning_a_command_is_recorded(hash_mimir: Mimir) -> None:
    def act(state: State) -> Command[Any]:
        update = {"action": "make deploy", "outcome": "failure", "reason": "denied"}
        return Command(update=update, goto=END)

    def act_pairs(state: State) -> list[Command[Any]]:  # a list of Commands, writes as pairs
        return [Command(update=[("action", "make lint"), ("outcome", "success")])]

    graph(act, hash_mimir).invoke({"task": "deploy"}, CFG)
    graph(act_pairs, hash_mimir).invoke({"task": "lint"}, {"configurable": {"thread_id": "t2"}})
    got = sorted((e.task, e.action, e.outcome) for e in hash_mimir.recent(5))
    assert got == [("deploy", "make deploy", "failure"), ("lint", "make lint", "success")]


def test_a_step_gets_the_store_and_writer_langgraph_injects(hash_mimir: Mimir) -> None:
    seen: dict[str, Any] = {}

    def act(state: State, *, store: BaseStore, writer: StreamWriter) -> dict[str, Any]:
        seen["store"] = store
        writer({"note": "acting"})
        return {"action": "make deploy", "outcome": "success"}

    async def aact(state: State, store: BaseStore, writer: StreamWriter) -> dict[str, Any]:
        seen["astore"] = store
        return {"action": "make deploy", "outcome": "success"}

    store = InMemoryStore()
    chunks = list(
        graph(act, hash_mimir, store=store).stream({"task": "deploy"}, CFG, stream_mode="custom")
    )
    assert chunks == [{"note": "acting"}] and seen["store"] is store
    asyncio.run(graph(aact, hash_mimir, store=store).ainvoke({"task": "deploy"}, CFG))
    assert seen["astore"] is store
    assert [e.action for e in hash_mimir.recent(5)] == ["make deploy"] * 2


def test_a_step_returning_a_command_writes_the_lessons_it_was_given(hash_mimir: Mimir) -> None:
    seen: list[Any] = []

    def act(state: State) -> Command[Any]:
        seen.append(state.get("mimir_lessons"))
        return Command(update={"action": "make release", "outcome": "success"}, goto=END)

    def act_pairs(state: State) -> list[Command[Any]]:
        seen.append(state.get("mimir_lessons"))
        return [Command(update=[("action", "make release"), ("outcome", "success")])]

    for i, step in enumerate((act, act_pairs)):
        cfg = {"configurable": {"thread_id": f"c{i}"}}
        out = graph(step, hash_mimir).invoke({"task": "deploy"}, cfg)
        assert "mimir_lessons" in out and out["mimir_lessons"] == seen[-1], (step.__name__, out)
        assert (out["action"], out["outcome"]) == ("make release", "success")


def test_tool_node_guard_notes_what_failed_here_before(hash_mimir: Mimir) -> None:
    """``ToolNode(tools, wrap_tool_call=memory.wrap_tool_call)``: a call of a command that
    failed here on this task comes back with that fact and what worked instead; after a
    failure with no earlier one, what worked on the task; a call with no history, untouched."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import ToolException, tool
    from langgraph.graph import MessagesState
    from langgraph.prebuilt import ToolNode

    from mimir_integrations.langgraph import MimirMemoryNode

    task = "deploy the billing service to staging"
    hash_mimir.record_failure(task, "make deploy-staging", "No rule to make target", session_id="a")
    hash_mimir.record(task, "./scripts/deploy.sh staging", "success", session_id="a")

    @tool
    def shell(command: str) -> str:
        """Run a shell command."""
        if command.startswith("make"):
            raise ToolException("make: *** No rule to make target")
        return "deployed"

    shell.handle_tool_error = True

    memory = MimirMemoryNode(hash_mimir)
    calls = iter(["make deploy-staging", "./scripts/deploy.sh staging", "kubectl apply -f x"])

    def agent(state: MessagesState) -> dict[str, Any]:
        command = next(calls)
        tool_call = {"name": "shell", "args": {"command": command}, "id": command[:6]}
        return {"messages": [AIMessage("", tool_calls=[tool_call])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([shell], wrap_tool_call=memory.wrap_tool_call))
    graph.add_edge(START, "agent").add_edge("agent", "tools").add_edge("tools", END)
    app = graph.compile()
    results = []
    for _ in range(3):
        out = app.invoke({"messages": [HumanMessage(task)]})
        results.append(str(out["messages"][-1].content))
    failed, worked, unknown = results
    assert "No rule to make target" in failed
    assert "failed here before on this task: `make deploy-staging` — 1 of 1 try" in failed
    assert "worked instead on this task: `./scripts/deploy.sh staging`" in failed
    assert worked == "deployed" and unknown == "deployed"
