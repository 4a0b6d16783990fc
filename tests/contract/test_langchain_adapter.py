"""The LangChain adapter's behaviour with a real ``create_agent`` graph and a real store.

The chat model is scripted (a ``FakeMessagesListChatModel`` that can bind tools and keeps the
messages it was sent); everything else is the real agent loop, tool node and middleware.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver

from mimir_core import Mimir
from mimir_core.errors import InvalidInputError, OptionalDependencyError
from mimir_core.testing import assert_tool_contract, seed_lesson
from mimir_core.tools.specs import TOOLS, call_tool
from mimir_integrations.langchain import (
    MimirMiddleware,
    MimirRetriever,
    MimirToolkit,
    get_tools,
)

ROOT = Path(__file__).resolve().parents[2]


SEEN: list[list[Any]] = []


class ScriptedModel(FakeMessagesListChatModel):
    """Answers from a script; remembers every prompt it was sent (in ``SEEN``)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        SEEN.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def call(name: str, args: dict[str, Any], ident: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": ident}])


@pytest.fixture
def m(hash_mimir: Mimir) -> Mimir:
    return hash_mimir


def test_tools_render_the_core_vocabulary(m: Mimir) -> None:
    tools = MimirToolkit(mimir=m).get_tools()
    assert [t.name for t in tools] == [s.name for s in TOOLS]
    for t, spec in zip(tools, TOOLS, strict=True):
        assert t.description == spec.description
        assert t.args_schema is spec.args
        assert t.response_format == "content_and_artifact"
    m.record("run the api tests", "pytest tests/api", "failure", reason="UndefinedTable")
    [recall] = get_tools(m, ["recall_experiences"])
    msg = recall.invoke(
        {"type": "tool_call", "id": "c1", "name": "recall_experiences", "args": {"query": "api"}}
    )
    expected = call_tool(m, "recall_experiences", {"query": "api"})
    assert msg.content == expected.text and msg.artifact == expected.data
    bad = {"type": "tool_call", "id": "c2", "name": "recall_experiences", "args": {"k": 0}}
    msg = recall.invoke(bad)  # the model is told what was wrong, the agent goes on
    assert msg.status == "error" and msg.artifact is None
    assert (
        msg.content
        == "query: is required: a non-empty string\nk: must be an integer from 1 to 100; got 0"
    )
    recall.handle_tool_error = False
    with pytest.raises(InvalidInputError, match="k"):
        recall.invoke({"query": "api", "k": 0})


def test_tools_pass_the_adapter_contract(m: Mimir) -> None:
    tools = {t.name: t for t in get_tools(m)}

    def invoke(name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any] | None, bool]:
        if name not in tools:  # what ToolNode answers for a tool the agent does not have
            return f"no tool named {name!r}", None, True
        call = {"type": "tool_call", "id": uuid.uuid4().hex, "name": name, "args": args}
        msg = tools[name].invoke(call, {"configurable": {"thread_id": "contract"}})
        return str(msg.content), msg.artifact, msg.status == "error"

    listed = {name: t.tool_call_schema.model_json_schema() for name, t in tools.items()}
    assert_tool_contract(invoke, m, listed=listed)


def test_a_recording_tool_call_is_stored_once_per_call_id(m: Mimir) -> None:
    [record] = get_tools(m, ["record_experience"])
    args = {"task": "deploy", "action": "make deploy", "outcome": "success"}
    cfg = {"configurable": {"thread_id": "t1"}}
    for _ in range(3):  # a re-executed tool node replays the same call
        record.invoke({"type": "tool_call", "id": "call-9", "name": record.name, "args": args}, cfg)
    record.invoke({"type": "tool_call", "id": "call-10", "name": record.name, "args": args}, cfg)
    record.invoke(args)  # no call id: a plain call records each time
    got = m.recent(10)
    assert len(got) == 3
    assert {e.source for e in got} == {"langchain"}
    assert sum(e.thread_id == "t1" for e in got) == 2


def test_a_reused_call_id_with_another_payload_is_another_record(m: Mimir) -> None:
    tools = {t.name: t for t in get_tools(m)}
    ok = {"task": "deploy", "action": "make deploy", "outcome": "success"}
    bad = {"task": "lint", "action": "ruff check .", "reason": "E501"}
    first = tools["record_experience"].invoke(
        {"type": "tool_call", "id": "call_0", "name": "record_experience", "args": ok}
    )
    second = tools["record_failure"].invoke(
        {"type": "tool_call", "id": "call_0", "name": "record_failure", "args": bad}
    )
    assert first.artifact["experience"]["id"] != second.artifact["experience"]["id"]
    again = tools["record_failure"].invoke(  # a true redelivery, arguments in another order
        {
            "type": "tool_call",
            "id": "call_0",
            "name": "record_failure",
            "args": dict(reversed(bad.items())),
        }
    )
    assert again.artifact["experience"]["id"] == second.artifact["experience"]["id"]
    got = sorted((e.outcome, e.task, e.action) for e in m.recent(10))
    assert got == [("failure", "lint", "ruff check ."), ("success", "deploy", "make deploy")]


def test_a_string_input_is_the_one_required_argument_or_a_tool_error(m: Mimir) -> None:
    m.record_failure("deploy the app", "kubectl apply -f app.yaml", "ImagePullBackOff")
    tools = {t.name: t for t in get_tools(m)}
    recall = tools["recall_experiences"]
    assert recall.invoke("deploy") == recall.invoke({"query": "deploy"})
    assert recall.run("deploy") == recall.invoke({"query": "deploy"})
    assert "kubectl apply" in recall.invoke("deploy")
    assert tools["record_failure"].invoke("deploy") == (
        "input: record_failure takes task, action, reason by name, not one string"
    )
    assert tools["memory_stats"].invoke("x") == "input: memory_stats takes no arguments"
    assert m.stats().experiences == 1
    recall.handle_tool_error = False
    with pytest.raises(InvalidInputError, match="query"):
        recall.invoke("")


def test_middleware_injects_lessons_without_storing_them(m: Mimir) -> None:
    lesson = seed_lesson(
        m,
        rule="Run alembic upgrade head before the payments integration tests.",
        trigger="run the payments integration tests",
    )
    SEEN.clear()
    model = ScriptedModel(responses=[AIMessage("Migrations first, then pytest.")])
    agent = create_agent(model, system_prompt="You are careful.", middleware=[MimirMiddleware(m)])
    out = agent.invoke(
        {"messages": [{"role": "user", "content": "run the payments integration tests"}]}
    )
    system = SEEN[0][0]
    assert system.type == "system"
    assert system.content.startswith("You are careful.")
    assert lesson.id in system.content and "alembic upgrade head" in system.content
    assert all(lesson.id not in str(msg.content) for msg in out["messages"])  # not in the state


def test_middleware_keeps_the_content_blocks_of_a_system_message(m: Mimir) -> None:
    lesson = seed_lesson(m, rule="Pin the node version.", trigger="build the frontend")
    cached = {"type": "text", "text": "You are careful.", "cache_control": {"type": "ephemeral"}}
    SEEN.clear()
    model = ScriptedModel(responses=[AIMessage("Pinned.")])
    agent = create_agent(
        model, system_prompt=SystemMessage(content=[cached]), middleware=[MimirMiddleware(m)]
    )
    agent.invoke({"messages": [{"role": "user", "content": "build the frontend"}]})
    system = SEEN[0][0]
    assert system.type == "system" and isinstance(system.content, list)
    assert system.content[0] == cached  # cache_control kept
    assert system.content[1]["type"] == "text" and lesson.id in system.content[1]["text"]


def test_middleware_records_tool_failures_and_the_run_once(m: Mimir) -> None:
    @tool
    def shell(command: str) -> str:
        """Run a shell command."""
        if command == "pytest tests/api":
            raise ToolException("UndefinedTable: relation orders does not exist")
        return "ok: 12 passed"

    shell.handle_tool_error = True  # the tool answers the model with an error result

    model = ScriptedModel(
        responses=[
            call("shell", {"command": "pytest tests/api"}, "c1"),
            call("shell", {"command": "alembic upgrade head && pytest tests/api"}, "c2"),
            AIMessage("The api tests pass after migrating."),
        ]
    )
    agent = create_agent(
        model, tools=[shell], middleware=[MimirMiddleware(m)], checkpointer=InMemorySaver()
    )
    cfg = {"configurable": {"thread_id": "lc-1"}}
    agent.invoke({"messages": [{"role": "user", "content": "run the api tests"}]}, cfg)
    got = sorted(m.recent(10), key=lambda e: e.outcome)
    assert [(e.outcome, e.action) for e in got] == [
        ("failure", "pytest tests/api"),
        ("success", "alembic upgrade head && pytest tests/api"),
    ]
    assert "UndefinedTable" in got[0].reason
    assert {e.thread_id for e in got} == {"lc-1"} and {e.source for e in got} == {"langchain"}
    # The failure was recorded when the tool failed and again after the run: stored once.
    assert m.stats().experiences == 2


def test_middleware_lessons_come_from_run_memory_and_refresh_after_a_record(m: Mimir) -> None:
    from langchain_core.messages import HumanMessage, ToolMessage

    from mimir_core.hosting.agent_run import RunMemory

    mw = MimirMiddleware(m, cache_seconds=3600)
    assert isinstance(mw.memory, RunMemory) and mw.memory.cache_seconds == 3600
    ask = [HumanMessage("deploy the billing service", id="h1")]
    action = 'deploy {"target": "prod"}'
    m.record_failure("deploy the billing service", action, "timeout")
    assert mw.lessons_for(ask) == ""  # one failure: nothing to say yet
    m.record_failure("deploy the billing service", action, "timeout", session_id="b")
    assert mw.lessons_for(ask) == ""  # cached
    failed = ToolMessage("ImagePullBackOff", tool_call_id="c1", status="error")
    mw.after_agent({"messages": [*ask, call("deploy", {"target": "prod"}, "c1"), failed]}, None)
    assert "<mimir-memory>" in mw.lessons_for(ask)  # the run's record dropped the cache


def test_a_tool_that_crashes_the_run_is_still_recorded(m: Mimir) -> None:
    @tool
    def deploy(target: str) -> str:
        """Deploy a service."""
        raise RuntimeError("ImagePullBackOff")

    model = ScriptedModel(responses=[call("deploy", {"target": "payments"}, "c7")])
    agent = create_agent(model, tools=[deploy], middleware=[MimirMiddleware(m)])
    with pytest.raises(RuntimeError, match="ImagePullBackOff"):
        agent.invoke({"messages": [{"role": "user", "content": "deploy payments"}]})
    [exp] = m.recent(5)
    assert (exp.task, exp.outcome) == ("deploy payments", "failure")
    assert "ImagePullBackOff" in exp.reason


def test_retriever_puts_lessons_first_with_metadata(m: Mimir) -> None:
    seed_lesson(m, rule="Use --legacy-peer-deps.", trigger="install the dashboard dependencies")
    m.record_failure("install the dashboard dependencies", "npm install", "ERESOLVE")
    docs = MimirRetriever(mimir=m, k=8).invoke("install the dashboard dependencies")
    kinds = [d.metadata["kind"] for d in docs]
    # the lesson's 4 identical evidence experiences are one hit (count 4), then the failure
    assert kinds[0] == "lesson" and kinds.count("experience") == 2
    assert sorted(d.metadata["count"] for d in docs if d.metadata["kind"] == "experience") == [1, 4]
    lesson, exp = docs[0], next(d for d in docs if d.metadata.get("outcome") == "failure")
    assert lesson.metadata["confidence"] > 0 and "legacy-peer-deps" in lesson.page_content
    assert exp.metadata["outcome"] == "failure" and exp.id == exp.metadata["id"]
    only = MimirRetriever(mimir=m, include=("experiences",), outcome="failure").invoke(
        "install the dashboard dependencies"
    )
    assert [d.page_content.splitlines()[1] for d in only] == ["Tried: npm install"]


def test_legacy_memory_loads_lessons_and_records_agent_steps(m: Mimir) -> None:
    from langchain_core.agents import AgentAction

    from mimir_integrations.langchain import MimirMemory

    seed_lesson(m, rule="Pin the node version.", trigger="build the frontend")
    mem = MimirMemory(mimir=m, input_key="input")
    assert mem.memory_variables == ["mimir_lessons"]
    assert (
        "Pin the node version"
        in mem.load_memory_variables({"input": "build the frontend"})["mimir_lessons"]
    )
    before = m.stats().experiences
    steps = [
        (AgentAction("shell", {"command": "npm run build"}, ""), "Error: node 16 unsupported"),
        (AgentAction("shell", {"command": "nvm use 20 && npm run build"}, ""), "built in 4s"),
    ]
    mem.save_context(
        {"input": "build the frontend"}, {"output": "done", "intermediate_steps": steps}
    )
    mem.save_context({"input": "hello"}, {"output": "hi"})  # not an attempt
    added = m.recent(2)
    assert m.stats().experiences == before + 2
    assert {e.outcome for e in added} == {"failure", "success"}


def test_legacy_memory_keeps_every_run_and_every_action(m: Mimir) -> None:
    from langchain_core.agents import AgentAction

    from mimir_integrations.langchain import MimirMemory

    mem = MimirMemory(mimir=m, input_key="input")

    def save(command: str, observation: str) -> None:
        steps = [(AgentAction("shell", {"command": command}, ""), observation)]
        mem.save_context({"input": "build it"}, {"output": "", "intermediate_steps": steps})

    save("make build", "built")
    save("cargo build --release", "built")  # the same step id "step-0", another action
    for _ in range(3):  # the same failure in three runs: "failed 3 times here"
        save("make deploy", "Error: permission denied")
    got = sorted((e.outcome, e.action) for e in m.recent(10))
    assert got == [
        ("failure", "make deploy"),
        ("failure", "make deploy"),
        ("failure", "make deploy"),
        ("success", "cargo build --release"),
        ("success", "make build"),
    ]


def test_middleware_without_a_checkpointer_keeps_runs_with_reused_call_ids(m: Mimir) -> None:
    @tool
    def shell(command: str) -> str:
        """Run a shell command."""
        raise ToolException("Error: permission denied")

    shell.handle_tool_error = True
    for _ in range(2):  # two runs; the model numbers its tool calls from c1 each time
        model = ScriptedModel(
            responses=[call("shell", {"command": "make deploy"}, "c1"), AIMessage("It failed.")]
        )
        agent = create_agent(model, tools=[shell], middleware=[MimirMiddleware(m)])
        agent.invoke({"messages": [{"role": "user", "content": "deploy it"}]})
    got = [(e.outcome, e.action) for e in m.recent(10)]
    # recorded when the tool failed and after the run: once per run, and each run counts
    assert got == [("failure", "make deploy")] * 2


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


def test_memory_without_langchain_classic_is_a_clear_error() -> None:
    out = run(
        """
        import sys, importlib.abc
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split('.')[0] == 'langchain_classic':
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        sys.meta_path.insert(0, Block())
        import mimir_integrations.langchain as lc
        try:
            lc.MimirMemory
        except ImportError as exc:
            print(type(exc).__name__, exc)
        """
    )
    assert out.returncode == 0, out.stderr
    assert OptionalDependencyError.__name__ in out.stdout
    assert "'langchain-classic' extra" in out.stdout


_ADAPTERS = [
    "langchain",
    "langgraph",
    "llamaindex",
    "mcp_server",
    "hermes",
    "pydantic_ai",
    "openai_agents",
    "google_adk",
]


def _others(mine: str, *frameworks: str) -> list[str]:
    return [*frameworks, *(f"mimir_integrations.{a}" for a in _ADAPTERS if a != mine)]


@pytest.mark.parametrize(
    ("module", "foreign"),
    [
        ("mimir_integrations.langchain", _others("langchain", "llama_index", "mcp")),
        ("mimir_integrations.langgraph", _others("langgraph", "llama_index", "mcp")),
        (
            "mimir_integrations.llamaindex",
            _others("llamaindex", "langchain", "langgraph", "langchain_core", "mcp"),
        ),
        (
            "mimir_integrations.mcp_server",
            _others("mcp_server", "langchain", "langgraph", "langchain_core", "llama_index"),
        ),
        (
            "mimir_integrations.pydantic_ai",
            _others("pydantic_ai", "langchain_core", "llama_index", "agents", "google.adk"),
        ),
        (
            "mimir_integrations.openai_agents",
            _others("openai_agents", "langchain_core", "llama_index", "pydantic_ai", "google.adk"),
        ),
        (
            "mimir_integrations.google_adk",
            _others("google_adk", "langchain_core", "llama_index", "pydantic_ai", "agents"),
        ),
    ],
)
def test_importing_one_adapter_imports_no_other(module: str, foreign: list[str]) -> None:
    out = run(
        f"""
        import sys
        import {module}
        loaded = sorted(n for n in sys.modules
                        if any(n == f or n.startswith(f + '.') for f in {foreign!r}))
        print(loaded)
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_middleware_guard_tells_the_agent_what_failed_here_before(m: Mimir) -> None:
    """The repeat guard at the tool boundary: in a second run of the same task, the failing
    command's result says it failed here before and what worked instead; the first run's
    results carry nothing (no history), and a command that worked gets no note."""

    @tool
    def shell(command: str) -> str:
        """Run a shell command."""
        if command == "pytest tests/api":
            raise ToolException("UndefinedTable: relation orders does not exist")
        return "ok: 12 passed"

    shell.handle_tool_error = True
    fix = "alembic upgrade head && pytest tests/api"

    def run(thread: str, prefix: str) -> list[Any]:
        SEEN.clear()
        model = ScriptedModel(
            responses=[
                call("shell", {"command": "pytest tests/api"}, f"{prefix}1"),
                call("shell", {"command": fix}, f"{prefix}2"),
                AIMessage("done"),
            ]
        )
        agent = create_agent(
            model, tools=[shell], middleware=[MimirMiddleware(m)], checkpointer=InMemorySaver()
        )
        cfg = {"configurable": {"thread_id": thread}}
        agent.invoke({"messages": [{"role": "user", "content": "run the api tests"}]}, cfg)
        return [msg for msg in SEEN[-1] if msg.type == "tool"]

    first = run("t1", "a")
    assert all("<mimir-memory>" not in str(msg.content) for msg in first)
    failed, worked = run("t2", "b")
    text = str(failed.content)
    assert text.startswith("UndefinedTable")
    assert "failed here before on this task: `pytest tests/api` — 1 of 1 try" in text
    assert f"worked instead on this task: `{fix}`" in text
    assert "<mimir-memory>" not in str(worked.content)
    # The note is shown, never stored: the record's reason is the tool's own error.
    assert all("mimir-memory" not in e.reason for e in m.recent(10))
