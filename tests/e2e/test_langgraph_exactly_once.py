"""The memory node records exactly once across LangGraph's re-execution, on real graphs.

Each case runs a real compiled graph with a real checkpointer (``InMemorySaver`` and the SQLite
saver of ``langgraph-checkpoint-sqlite``) against a real Mimir store, counts how often the node
body ran, and counts the records: interrupt()+resume and a crash re-run the node (same task id),
a retry policy re-runs it within the run, a time-travel fork re-runs it under a new task id and
is recorded as a branch with the checkpoint it came from. The crash case is also run as a real
process crash (``os._exit``) followed by a resume from another process.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, RetryPolicy, interrupt

from mimir_core import Mimir
from mimir_core.hosting.episodes import Episodes
from mimir_integrations.langgraph import MimirMemoryNode

ROOT = Path(__file__).resolve().parents[2]


class State(TypedDict, total=False):
    task: str
    action: str
    outcome: str
    reason: str
    mimir_lessons: str


@pytest.fixture(params=["memory", "sqlite"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemorySaver()
        return
    conn = sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False)
    yield SqliteSaver(conn)
    conn.close()


@pytest.fixture
def mimir(tmp_path: Path) -> Iterator[Mimir]:
    m = Mimir(tmp_path / "home", embedder="hash")
    yield m
    m.close()


def records(m: Mimir, thread: str) -> list[Any]:
    return Episodes(m).history(thread)


def one_node_graph(
    name: str, node: Callable[..., Any], saver: Any, retry: RetryPolicy | None = None
) -> Any:
    g = StateGraph(State)
    g.add_node(name, node, retry_policy=retry)
    g.add_edge(START, name)
    g.add_edge(name, END)
    return g.compile(checkpointer=saver)


def test_interrupt_and_resume_records_once(mimir: Mimir, saver: Any) -> None:
    memory = MimirMemoryNode(mimir)
    runs = {"body": 0}

    def deploy(state: State) -> dict[str, Any]:
        runs["body"] += 1
        # A record made before the interrupt: the resume re-runs this line.
        memory.record(state["task"], "asked the operator to approve", "partial", label="ask")
        answer = interrupt("approve the deploy?")
        return {"action": f"deploy after approval ({answer})", "outcome": "success"}

    app = one_node_graph("deploy", memory.wrap(deploy), saver)
    cfg = {"configurable": {"thread_id": "t-int"}}
    first = app.invoke({"task": "deploy the payments service"}, cfg)
    assert "__interrupt__" in first
    assert [r.action for r in records(mimir, "t-int")] == ["asked the operator to approve"]
    app.invoke(Command(resume="yes"), cfg)

    assert runs["body"] == 2  # LangGraph re-ran the node from the top
    got = records(mimir, "t-int")
    assert sorted(r.action for r in got) == [
        "asked the operator to approve",
        "deploy after approval (yes)",
    ]
    task_ids = {r.context["episode"]["task_id"] for r in got}
    assert len(task_ids) == 1  # both records belong to the one task
    assert all(r.source == "langgraph" and r.context["episode"]["node"] == "deploy" for r in got)


def test_a_crash_re_run_records_once(mimir: Mimir, saver: Any) -> None:
    memory = MimirMemoryNode(mimir)
    runs = {"body": 0}

    def migrate(state: State) -> dict[str, Any]:
        runs["body"] += 1
        memory.record(state["task"], "alembic upgrade head", "success")
        if runs["body"] == 1:
            raise RuntimeError("worker lost after the record was written")
        return {}

    app = one_node_graph("migrate", migrate, saver)
    cfg = {"configurable": {"thread_id": "t-crash"}}
    with pytest.raises(RuntimeError, match="worker lost"):
        app.invoke({"task": "migrate the orders database"}, cfg)
    assert len(records(mimir, "t-crash")) == 1
    app.invoke(None, cfg)  # resume the thread: the failed node runs again
    assert runs["body"] == 2
    assert [r.action for r in records(mimir, "t-crash")] == ["alembic upgrade head"]


def test_a_retry_policy_records_once(mimir: Mimir, saver: Any) -> None:
    memory = MimirMemoryNode(mimir)
    runs = {"body": 0, "step": 0}

    def flaky(state: State) -> dict[str, Any]:
        runs["body"] += 1
        memory.record(state["task"], "curl the health endpoint", "success", label="probe")
        if runs["body"] < 3:
            raise ValueError("transient")
        return {}

    def wrapped_step(state: State) -> dict[str, Any]:
        runs["step"] += 1
        if runs["step"] < 3:
            raise ValueError("transient")
        return {"action": "restart the pod", "outcome": "success"}

    retry = RetryPolicy(max_attempts=3, retry_on=ValueError, initial_interval=0.01, jitter=False)
    g = StateGraph(State)
    g.add_node("probe", flaky, retry_policy=retry)
    g.add_node("restart", memory.wrap(wrapped_step), retry_policy=retry)
    g.add_edge(START, "probe")
    g.add_edge("probe", "restart")
    g.add_edge("restart", END)
    app = g.compile(checkpointer=saver)
    app.invoke({"task": "bring the api back up"}, {"configurable": {"thread_id": "t-retry"}})
    assert runs == {"body": 3, "step": 3}
    got = records(mimir, "t-retry")
    assert sorted(r.action for r in got) == ["curl the health endpoint", "restart the pod"]


def _fork_graph(memory: MimirMemoryNode, saver: Any, runs: dict[str, int]) -> Any:
    def plan(state: State) -> dict[str, Any]:
        return {"action": "run the migration, then deploy"}

    def act(state: State) -> dict[str, Any]:
        runs["act"] += 1
        return {"outcome": "success" if runs["act"] > 1 else "failure", "reason": "first try"}

    g = StateGraph(State)
    g.add_node("plan", plan)
    g.add_node("act", memory.wrap(act))
    g.add_edge(START, "plan")
    g.add_edge("plan", "act")
    g.add_edge("act", END)
    return g.compile(checkpointer=saver)


def test_time_travel_fork_is_a_new_branch(mimir: Mimir, saver: Any) -> None:
    memory = MimirMemoryNode(mimir)
    runs = {"act": 0}
    app = _fork_graph(memory, saver, runs)
    cfg = {"configurable": {"thread_id": "t-fork"}}
    app.invoke({"task": "ship release 2.4"}, cfg)
    [main] = records(mimir, "t-fork")
    assert main.outcome == "failure" and "branch" not in main.context["episode"]

    before_act = next(s for s in app.get_state_history(cfg) if s.next == ("act",))
    past_id = before_act.config["configurable"]["checkpoint_id"]
    app.invoke(None, before_act.config)  # time travel: replay from the checkpoint before "act"
    assert runs["act"] == 2
    got = records(mimir, "t-fork")
    assert len(got) == 2
    fork = next(r for r in got if r.id != main.id)
    assert fork.outcome == "success"
    assert fork.context["episode"]["forked_from"] == past_id
    assert fork.context["episode"]["task_id"] != main.context["episode"]["task_id"]

    # Editing the past state and running on is another fork from the same checkpoint.
    edited = app.update_state(before_act.config, {"action": "deploy without migrating"})
    app.invoke(None, edited)
    got = records(mimir, "t-fork")
    assert len(got) == 3
    edit = next(r for r in got if r.id not in {main.id, fork.id})
    assert edit.action == "deploy without migrating"
    assert edit.context["episode"]["forked_from"] == past_id
    assert edit.context["episode"]["branch"] != fork.context["episode"]["branch"]


def test_lessons_go_into_the_state_and_separate_nodes_work(mimir: Mimir, saver: Any) -> None:
    memory = MimirMemoryNode(mimir)
    seen: dict[str, Any] = {}

    def agent(state: State) -> dict[str, Any]:
        seen["lessons"] = state.get("mimir_lessons")
        return {"action": "pytest -x", "outcome": "failure", "reason": "ImportError"}

    g = StateGraph(State)
    g.add_node("recall", memory.before)
    g.add_node("agent", agent)
    g.add_node("record", memory.after)
    g.add_edge(START, "recall")
    g.add_edge("recall", "agent")
    g.add_edge("agent", "record")
    g.add_edge("record", END)
    app = g.compile(checkpointer=saver)
    out = app.invoke({"task": "run the unit tests"}, {"configurable": {"thread_id": "t-nodes"}})
    assert "mimir_lessons" in out and seen["lessons"] == out["mimir_lessons"]
    [rec] = records(mimir, "t-nodes")
    assert (rec.action, rec.outcome, rec.reason) == ("pytest -x", "failure", "ImportError")
    assert rec.context["episode"]["node"] == "record"


@pytest.mark.asyncio
async def test_async_graph_with_the_async_sqlite_saver(mimir: Mimir, tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    memory = MimirMemoryNode(mimir)
    runs = {"body": 0}

    async def step(state: State) -> dict[str, Any]:
        runs["body"] += 1
        answer = interrupt("go?")
        return {"action": f"rollout ({answer})", "outcome": "success"}

    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.sqlite")) as saver:
        app = one_node_graph("rollout", memory.wrap(step), saver)
        cfg = {"configurable": {"thread_id": "t-async"}}
        await app.ainvoke({"task": "roll out the canary"}, cfg)
        await app.ainvoke(Command(resume="go"), cfg)
    assert runs["body"] == 2
    assert [r.action for r in records(mimir, "t-async")] == ["rollout (go)"]


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

_CRASH_SCRIPT = """
import os, sqlite3, sys
from typing import TypedDict
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from mimir_core import Mimir
from mimir_integrations.langgraph import MimirMemoryNode

home, db, crash = sys.argv[1], sys.argv[2], sys.argv[3] == "crash"

class State(TypedDict, total=False):
    task: str

memory = MimirMemoryNode(Mimir(home, embedder="hash"))

def plan(state):
    return {}

def migrate(state):
    memory.record(state["task"], "alembic upgrade head", "success")
    if crash:
        os._exit(17)  # the process dies after the record, before LangGraph saves the step
    return {}

g = StateGraph(State)
g.add_node("plan", plan)
g.add_node("migrate", migrate)
g.add_edge(START, "plan")
g.add_edge("plan", "migrate")
g.add_edge("migrate", END)
conn = sqlite3.connect(db, check_same_thread=False)
app = g.compile(checkpointer=SqliteSaver(conn))
cfg = {"configurable": {"thread_id": "t-proc"}}
app.invoke({"task": "migrate the orders db"} if crash else None, cfg, durability="sync")
print("next:", app.get_state(cfg).next)
"""


def test_a_process_crash_then_resume_from_another_process(tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text(textwrap.dedent(_CRASH_SCRIPT))
    home, db = tmp_path / "home", tmp_path / "cp.sqlite"

    def run(mode: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(script), str(home), str(db), mode],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
        )

    crashed = run("crash")
    assert crashed.returncode == 17, crashed.stderr
    resumed = run("resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "next: ()" in resumed.stdout
    m = Mimir(home, embedder="hash")
    assert [r.action for r in records(m, "t-proc")] == ["alembic upgrade head"]
