"""End to end, one per in-process framework: a user's program, as the docs show it, run twice.

Each program is a separate Python process (one session each) that builds the framework's real
agent with Mimir attached the documented way (no store passed: ``MIMIR_HOME`` decides) and runs
it against the scripted model server on 127.0.0.1. In the first session the ``deploy`` tool
fails; the second session's model request must carry the evidence of that failure, read back
from the store by a new process. An in-process framework has no host config to write, so there
is no ``mimir setup`` step: installing the extra is the one command (see ``docs/hosts/``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fake_models import fake_model_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

TOOL = '''
def deploy(target: str) -> str:
    """Deploy the billing service to a target."""
    if target == "prod":
        raise FAILED("helm: release failed: ImagePullBackOff for billing")
    return f"deployed to {target}"
'''

PROGRAMS = {
    "pydantic-ai": (
        "pydantic_ai",
        "openai",
        """
from pydantic_ai import Agent, ToolFailed as FAILED
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from mimir_integrations.pydantic_ai import MimirCapability
"""
        + TOOL
        + """
model = OpenAIChatModel("fake-model", provider=OpenAIProvider(base_url=URL + "/v1", api_key="k"))
agent = Agent(model, tools=[deploy], capabilities=[MimirCapability()])
print(agent.run_sync("deploy the billing service").output)
""",
    ),
    "openai-agents": (
        "agents",
        "openai",
        """
import uuid
from agents import (Agent, OpenAIChatCompletionsModel, Runner, function_tool,
                    set_tracing_disabled)
from openai import AsyncOpenAI
from mimir_integrations.openai_agents import MimirAgentsMemory
FAILED = RuntimeError
set_tracing_disabled(True)
"""
        + TOOL
        + """
model = OpenAIChatCompletionsModel("fake-model", AsyncOpenAI(base_url=URL + "/v1", api_key="k"))
agent = Agent(name="deployer", model=model, tools=[function_tool(deploy)])
memory = MimirAgentsMemory()
result = Runner.run_sync(agent, "deploy the billing service",
                         session=memory.session(uuid.uuid4().hex), run_config=memory.run_config())
print(result.final_output)
""",
    ),
    "google-adk": (
        "google.adk",
        "gemini",
        """
import asyncio
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models import Gemini
from google.adk.runners import InMemoryRunner
from google.genai import types
from mimir_integrations.google_adk import MimirMemoryService, MimirPlugin
"""
        + TOOL.replace("-> str", "-> dict")
        .replace(
            'raise FAILED("helm: release failed: ImagePullBackOff for billing")',
            'return {"status": "error", "error_message": "helm: ImagePullBackOff for billing"}',
        )
        .replace('return f"deployed to {target}"', 'return {"report": f"deployed to {target}"}')
        + """
model = Gemini(model="gemini-2.5-flash", base_url=URL, client_kwargs={"api_key": "k"})
agent = LlmAgent(name="deployer", model=model, tools=[deploy])
memory = MimirMemoryService()
runner = InMemoryRunner(app=App(name="ops", root_agent=agent, plugins=[MimirPlugin()]))

async def main():
    session = await runner.session_service.create_session(app_name="ops", user_id="u1")
    message = types.Content(role="user", parts=[types.Part(text="deploy the billing service")])
    async for event in runner.run_async(user_id="u1", session_id=session.id, new_message=message):
        if event.is_final_response():
            print(event.content.parts[0].text)
    done = await runner.session_service.get_session(app_name="ops", user_id="u1",
                                                    session_id=session.id)
    await memory.add_session_to_memory(done)

asyncio.run(main())
""",
    ),
}


def run_session(program: str, url: str, home: Path) -> str:
    code = f"URL = {url!r}\n" + textwrap.dedent(program)
    env = {**os.environ, "MIMIR_HOME": str(home), "MIMIR_AUTO_CONSOLIDATE": "0"}
    env.pop("MIMIR_EMBEDDER", None)  # the real embedder, as a user has it
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.mark.parametrize("framework", sorted(PROGRAMS))
def test_a_failure_in_one_session_reaches_the_next_sessions_model(
    framework: str, tmp_path: Path
) -> None:
    module, api, program = PROGRAMS[framework]
    pytest.importorskip(module, reason=f"the {framework} extra is not installed")
    home = tmp_path / "mimir"
    with fake_model_server(api) as server:
        server.script = [("deploy", {"target": "prod"}), ("deploy", {"target": "staging"})]
        run_session(program, server.url, home)
        first = json.dumps(server.requests[0]["body"])
        assert "deploy" in first and "<mimir-memory>" not in first  # nothing known yet

        server.requests.clear()
        out = run_session(program, server.url, home)
        second = [json.dumps(r["body"]) for r in server.requests]
    assert "FINAL" in out
    # The first request of the new session already carries the evidence, at the context seam.
    assert "<mimir-memory>" in second[0] and "ImagePullBackOff" in second[0]
    assert "staging" in second[0]  # what worked instead
    assert "failed here before on this task" in second[1]

    from mimir_core import Mimir

    records = Mimir(home).recent(10)
    assert sorted((e.outcome, e.source) for e in records) == [
        ("failure", framework),
        ("failure", framework),
        ("success", framework),
        ("success", framework),
    ]
