"""One store, every adapter: what one adapter records, every other recalls.

Eight writers run as separate processes at the same time on one store directory, each recording
one experience through its own adapter: a LangChain tool call, a LangGraph memory node, a
LlamaIndex memory block flush, an MCP ``record_experience`` call, a hook's spool line (the
stdlib-only capture path, drained by whichever process reads next), a Pydantic AI run with the
Mimir capability, an OpenAI Agents SDK run with a Mimir session, and a Google ADK session given
to the Mimir memory service. Then each reader, again in its own process, recalls all eight
through its own adapter: the LangChain retriever, the LangGraph node (past attempts put into
the state), the LlamaIndex retriever, the MCP ``recall_experiences`` tool, the same tool run by
Pydantic AI and by the Agents SDK, and ADK's ``search_memory``. Hooks are a writer only: they
read back lessons, not experiences."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: adapter -> the identifier its experience carries (recall finds identifiers exactly)
MARKERS = {
    "langchain": "svc-lc-4711",
    "langgraph": "svc-lg-4712",
    "llamaindex": "svc-li-4713",
    "mcp": "svc-mcp-4714",
    "spool": "svc-hook-4715",
    "pydantic-ai": "svc-pa-4716",
    "openai-agents": "svc-oa-4717",
    "google-adk": "svc-adk-4718",
}

PRELUDE = """
import asyncio, json, sys
home = sys.argv[1]
def mimir():
    from mimir_core import Mimir
    return Mimir(home, embedder="hash")
def task(marker):
    return f"deploy the {marker} service"
def action(marker):
    return f"helm upgrade {marker} --atomic"
"""

WRITERS = {
    "langchain": """
from mimir_integrations.langchain import get_tools
[tool] = get_tools(mimir(), ["record_experience"])
args = {"task": task(M), "action": action(M), "outcome": "success"}
tool.invoke({"type": "tool_call", "id": "call-1", "name": tool.name, "args": args})
""",
    "langgraph": """
from typing import TypedDict
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from mimir_integrations.langgraph import MimirMemoryNode
class State(TypedDict, total=False):
    task: str
    action: str
    outcome: str
def step(state):
    return {"action": action(M), "outcome": "success"}
g = StateGraph(State)
g.add_node("deploy", MimirMemoryNode(mimir()).wrap(step))
g.add_edge(START, "deploy")
g.add_edge("deploy", END)
app = g.compile(checkpointer=InMemorySaver())
app.invoke({"task": task(M)}, {"configurable": {"thread_id": "x"}})
""",
    "llamaindex": """
from llama_index.core.llms import ChatMessage
from mimir_integrations.llamaindex import MimirMemoryBlock
call = {"id": "c1", "type": "function",
        "function": {"name": "shell", "arguments": json.dumps({"command": action(M)})}}
msgs = [
    ChatMessage(role="user", content=task(M)),
    ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": [call]}),
    ChatMessage(role="tool", content="released", additional_kwargs={"tool_call_id": "c1"}),
]
asyncio.run(MimirMemoryBlock(mimir=mimir()).aput(msgs, session_id="s1"))
""",
    "mcp": """
import anyio
from mcp import Client
from mimir_integrations.mcp_server import build_server
async def main():
    async with Client(build_server(mimir(), background=False)) as client:
        args = {"task": task(M), "action": action(M), "outcome": "success"}
        result = await client.call_tool("record_experience", args)
        assert not result.is_error, result
anyio.run(main)
""",
    "spool": """
from mimir_core.ingest.spool import append, spool_dir
append(spool_dir(home), {"task": task(M), "action": action(M), "outcome": "success",
                         "source": "hook", "idempotency_key": "hook:" + M})
heavy = [m for m in ("lancedb", "pyarrow", "numpy", "pydantic") if m in sys.modules]
assert heavy == [], heavy   # the hook path stays stdlib-only
""",
}

WRITERS["pydantic-ai"] = """
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from mimir_integrations.pydantic_ai import MimirCapability
def model(messages, info):
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("shell", {"command": action(M)}, "c1")])
    return ModelResponse(parts=[TextPart("released")])
def shell(command: str) -> str:
    return "released"
agent = Agent(FunctionModel(model), tools=[shell], capabilities=[MimirCapability(mimir())])
agent.run_sync(task(M))
"""
WRITERS["openai-agents"] = """
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from mimir_integrations.openai_agents import MimirAgentsMemory
set_tracing_disabled(True)
@function_tool
def shell(command: str) -> str:
    return "released"
model = ScriptedModel([[function_call("shell", {"command": action(M)}, call_id="c1")],
                       [assistant_message("released")]])
memory = MimirAgentsMemory(mimir())
Runner.run_sync(Agent(name="ops", model=model, tools=[shell]), task(M),
                session=memory.session("s1"), run_config=memory.run_config())
"""
WRITERS["google-adk"] = """
from google.adk.events import Event
from google.adk.sessions import Session
from google.genai import types
from mimir_integrations.google_adk import MimirMemoryService
call = types.Part(function_call=types.FunctionCall(id="c1", name="shell",
                                                   args={"command": action(M)}))
reply = types.Part(function_response=types.FunctionResponse(id="c1", name="shell",
                                                            response={"output": "released"}))
prompt = types.Part(text=task(M))
events = [Event(author="user", content=types.Content(role="user", parts=[prompt])),
          Event(author="ops", content=types.Content(role="model", parts=[call])),
          Event(author="ops", content=types.Content(role="user", parts=[reply]))]
session = Session(id="s1", app_name="ops", user_id="u1", events=events)
asyncio.run(MimirMemoryService(mimir()).add_session_to_memory(session))
"""

READERS = {
    "langchain": """
from mimir_integrations.langchain import MimirRetriever
r = MimirRetriever(mimir=mimir(), k=3, include=("experiences",))
print(json.dumps({m: any(action(m) in d.page_content for d in r.invoke(m)) for m in MARKERS}))
""",
    "langgraph": """
from mimir_integrations.langgraph import MimirMemoryNode
node = MimirMemoryNode(mimir(), experiences=3)
print(json.dumps({m: action(m) in node.before({"task": m})["mimir_experiences"] for m in MARKERS}))
""",
    "llamaindex": """
from mimir_integrations.llamaindex import MimirRetriever
r = MimirRetriever(mimir(), top_k=3, include=("experiences",))
print(json.dumps({m: any(action(m) in n.node.get_content() for n in r.retrieve(m))
                  for m in MARKERS}))
""",
    "mcp": """
import anyio
from mcp import Client
from mimir_integrations.mcp_server import build_server
async def main():
    async with Client(build_server(mimir(), background=False)) as client:
        found = {}
        for m in MARKERS:
            result = await client.call_tool("recall_experiences", {"query": m, "k": 3})
            text = "\\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
            found[m] = action(m) in text
        print(json.dumps(found))
anyio.run(main)
""",
}


READERS["pydantic-ai"] = """
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from mimir_integrations.pydantic_ai import mimir_toolset
tools = mimir_toolset(mimir())
def text_for(m):
    def model(messages, info):
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("recall_experiences", {"query": m, "k": 3})])
        return ModelResponse(parts=[TextPart("ok")])
    out = Agent(FunctionModel(model), toolsets=[tools]).run_sync("recall")
    return " ".join(str(p.content) for msg in out.all_messages() for p in msg.parts
                    if isinstance(p, ToolReturnPart))
print(json.dumps({m: action(m) in text_for(m) for m in MARKERS}))
"""
READERS["openai-agents"] = """
from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from mimir_integrations.openai_agents import mimir_tools
set_tracing_disabled(True)
tools = mimir_tools(mimir(), ["recall_experiences"])
def text_for(m):
    model = ScriptedModel([[function_call("recall_experiences", {"query": m, "k": 3},
                                          call_id="r1")], [assistant_message("ok")]])
    out = Runner.run_sync(Agent(name="reader", model=model, tools=tools), "recall")
    return " ".join(str(getattr(i, "output", "")) for i in out.new_items)
print(json.dumps({m: action(m) in text_for(m) for m in MARKERS}))
"""
READERS["google-adk"] = """
from mimir_integrations.google_adk import MimirMemoryService
service = MimirMemoryService(mimir(), k=3)
def text_for(m):
    found = asyncio.run(service.search_memory(app_name="ops", user_id="u1", query=m))
    return " ".join(p.text or "" for e in found.memories for p in e.content.parts)
print(json.dumps({m: action(m) in text_for(m) for m in MARKERS}))
"""


def script(body: str, **consts: object) -> str:
    lines = [f"{k} = {v!r}" for k, v in consts.items()]
    return textwrap.dedent(PRELUDE) + "\n".join(lines) + "\n" + textwrap.dedent(body)


def start(code: str, home: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "MIMIR_EMBEDDER": "hash", "MIMIR_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-c", code, str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )


def test_every_adapter_recalls_what_every_other_recorded(tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    home = tmp_path / "home"
    from mimir_core import Mimir

    Mimir(home, embedder="hash").stats()  # create the store once, as an installed Mimir has

    writers = {name: start(script(body, M=MARKERS[name]), home) for name, body in WRITERS.items()}
    for name, proc in writers.items():
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name} writer failed:\n{err}"

    readers = {
        name: start(script(body, MARKERS=list(MARKERS.values())), home)
        for name, body in READERS.items()
    }
    found: dict[str, dict[str, bool]] = {}
    for name, proc in readers.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name} reader failed:\n{err}"
        found[name] = json.loads(out.strip().splitlines()[-1])
    expected = dict.fromkeys(MARKERS.values(), True)
    assert found == dict.fromkeys(READERS, expected)

    m = Mimir(home, embedder="hash")
    sources = {e.task.split()[2]: e.source for e in m.recent(20)}
    assert len(sources) == len(MARKERS)  # one record each, none lost or duplicated
    assert m.stats().experiences == len(MARKERS)
    assert sources[MARKERS["spool"]] == "hook" and sources[MARKERS["mcp"]] == "mcp"
    adapters = (
        "langchain",
        "langgraph",
        "llamaindex",
        "pydantic-ai",
        "openai-agents",
        "google-adk",
    )
    assert {a: sources[MARKERS[a]] for a in adapters} == {a: a for a in adapters}
