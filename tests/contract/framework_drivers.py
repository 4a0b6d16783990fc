"""Drivers for the in-process agent frameworks' contract suite (``test_agent_frameworks.py``).

Each driver runs the real framework's agent loop against the scripted OpenAI-compatible server
of ``tests/e2e/fake_models.py`` on 127.0.0.1 (Google ADK against its Gemini twin), with a
``deploy`` tool that fails for ``target == "prod"`` in the framework's own way, and Mimir's
adapter attached. A driver also calls one of Mimir's tools through the framework (``invoke``),
for the tool contract.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from mimir_core.hosting.conversation import function_schemas

FAIL_TEXT = "helm: release failed: ImagePullBackOff for billing"
TASK = "deploy the billing service"


def listed_schemas() -> dict[str, dict[str, Any]]:
    return {s["name"]: s["parameters"] for s in function_schemas()}


class PydanticAIDriver:
    """Pydantic AI: ``Agent(OpenAIChatModel, capabilities=[MimirCapability])``."""

    name = source = "pydantic-ai"
    module = "pydantic_ai"
    api = "openai"
    crash_unseen = ""

    def __init__(self, mimir: Any, server: Any) -> None:
        self.mimir, self.server = mimir, server

    def run(self, prompt: str = TASK, *, crash: bool = False) -> Any:
        from pydantic_ai import Agent, ToolFailed
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        from mimir_integrations.pydantic_ai import MimirCapability

        def deploy(target: str) -> str:
            """Deploy the service to a target."""
            if target == "prod":
                if crash:
                    raise RuntimeError(FAIL_TEXT)
                raise ToolFailed(FAIL_TEXT)
            return f"deployed to {target}"

        provider = OpenAIProvider(base_url=self.server.url + "/v1", api_key="test")
        model = OpenAIChatModel("fake-model", provider=provider)
        agent = Agent(
            model,
            tools=[deploy],
            capabilities=[MimirCapability(self.mimir, tools=True)],
            instructions="You deploy services.",
        )
        return agent.run_sync(prompt).output

    def invoke(self, name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any] | None, bool]:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
        from pydantic_ai.models.function import FunctionModel

        from mimir_integrations.pydantic_ai import mimir_toolset

        if name not in listed_schemas():  # Pydantic AI answers an unknown tool itself
            return f"no tool named {name!r}", None, True
        call_id = uuid.uuid4().hex

        def model(messages: list[Any], info: Any) -> ModelResponse:
            if len(messages) == 1:
                return ModelResponse(parts=[ToolCallPart(name, json.dumps(args), call_id)])
            return ModelResponse(parts=[TextPart("done")])

        agent = Agent(FunctionModel(model), toolsets=[mimir_toolset(self.mimir)], retries=0)
        result = agent.run_sync("contract")
        [part] = [
            p
            for msg in result.all_messages()
            for p in getattr(msg, "parts", [])
            if isinstance(p, ToolReturnPart) and p.tool_call_id == call_id
        ]
        return str(part.content), part.metadata, part.outcome != "success"


class OpenAIAgentsDriver:
    """OpenAI Agents SDK: ``Runner.run(agent, session=memory.session(...), run_config=...)``."""

    name = source = "openai-agents"
    module = "agents"
    api = "openai"
    #: Why a crashing tool's failure is not recorded ("" when it is).
    crash_unseen = (
        "a tool that raises with failure_error_function=None ends the run before the SDK calls "
        "any formatter or hook Mimir could see (openai-agents 0.24)"
    )

    def __init__(self, mimir: Any, server: Any) -> None:
        from agents import set_tracing_disabled

        set_tracing_disabled(True)  # the SDK would export traces to OpenAI
        self.mimir, self.server = mimir, server
        self._client: Any = None
        self.sessions = 0

    def _model(self) -> Any:
        from agents import OpenAIChatCompletionsModel
        from openai import AsyncOpenAI

        if self._client is None:  # one client, as an app has (a new one costs ~0.3 s)
            self._client = AsyncOpenAI(base_url=self.server.url + "/v1", api_key="test")
        return OpenAIChatCompletionsModel("fake-model", self._client)

    def run(self, prompt: str = TASK, *, crash: bool = False) -> Any:
        from agents import Agent, Runner, function_tool

        from mimir_integrations.openai_agents import MimirAgentsMemory, mimir_tools

        def deploy(target: str) -> str:
            """Deploy the service to a target."""
            if target == "prod":
                raise RuntimeError(FAIL_TEXT)
            return f"deployed to {target}"

        tool = (
            function_tool(deploy, failure_error_function=None) if crash else function_tool(deploy)
        )
        memory = MimirAgentsMemory(self.mimir)
        agent = Agent(
            name="deployer",
            instructions="You deploy services.",
            model=self._model(),
            tools=[tool, *mimir_tools(self.mimir)],
        )
        self.sessions += 1
        session = memory.session(f"session-{self.sessions}")
        result = Runner.run_sync(agent, prompt, session=session, run_config=memory.run_config())
        return result.final_output

    def invoke(self, name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any] | None, bool]:
        from agents import Agent, Runner

        from mimir_integrations.openai_agents import mimir_tools

        if name not in listed_schemas():  # the SDK answers an unknown tool itself
            return f"no tool named {name!r}", None, True
        self.server.script = [(name, args)]
        self.server.requests.clear()
        agent = Agent(name="contract", model=self._model(), tools=mimir_tools(self.mimir))
        Runner.run_sync(agent, "contract")
        [output] = [m for m in self.server.requests[-1]["body"]["messages"] if m["role"] == "tool"]
        answer = json.loads(output["content"])
        if "error" in answer:
            return str(answer["error"]), None, True
        return answer["result"], answer["data"], False


class GoogleADKDriver:
    """Google ADK: ``Runner(plugins=[MimirPlugin], memory_service=MimirMemoryService)``."""

    name = source = "google-adk"
    module = "google.adk"
    api = "gemini"
    crash_unseen = ""

    def __init__(self, mimir: Any, server: Any) -> None:
        self.mimir, self.server = mimir, server
        self._gemini: Any = None

    def _model(self) -> Any:
        from google.adk.models import Gemini

        if self._gemini is None:  # one model (and client), as an app has
            self._gemini = Gemini(
                model="gemini-2.5-flash", base_url=self.server.url, client_kwargs=KEY
            )
        return self._gemini

    def _run(self, agent: Any, prompt: str, plugins: list[Any], *, keep: bool) -> tuple[str, Any]:
        import asyncio

        from google.adk.apps import App
        from google.adk.runners import InMemoryRunner
        from google.genai import types

        from mimir_integrations.google_adk import MimirMemoryService

        async def go() -> tuple[str, Any]:
            app = App(name="contract", root_agent=agent, plugins=plugins)
            runner = InMemoryRunner(app=app)
            session = await runner.session_service.create_session(app_name="contract", user_id="u")
            message = types.Content(role="user", parts=[types.Part(text=prompt)])
            final = ""
            async for event in runner.run_async(
                user_id="u", session_id=session.id, new_message=message
            ):
                if event.content and event.content.parts and event.content.parts[0].text:
                    final = event.content.parts[0].text
            done = await runner.session_service.get_session(
                app_name="contract", user_id="u", session_id=session.id
            )
            if keep:  # what an app does at the end of a session
                await MimirMemoryService(self.mimir).add_session_to_memory(done)
            return final, done

        return asyncio.run(go())

    def run(self, prompt: str = TASK, *, crash: bool = False) -> Any:
        from google.adk.agents import LlmAgent

        from mimir_integrations.google_adk import MimirPlugin, mimir_tools

        def deploy(target: str) -> dict[str, Any]:
            """Deploy the service to a target."""
            if target == "prod":
                if crash:
                    raise RuntimeError(FAIL_TEXT)
                return {"status": "error", "error_message": FAIL_TEXT}
            return {"status": "success", "report": f"deployed to {target}"}

        agent = LlmAgent(
            name="deployer",
            model=self._model(),
            instruction="You deploy services.",
            tools=[deploy, *mimir_tools(self.mimir)],
        )
        return self._run(agent, prompt, [MimirPlugin(self.mimir)], keep=True)[0]

    def invoke(self, name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any] | None, bool]:
        from google.adk.agents import LlmAgent

        from mimir_integrations.google_adk import mimir_tools

        if name not in listed_schemas():  # ADK answers an unknown tool itself
            return f"no tool named {name!r}", None, True
        self.server.script = [(name, args)]
        agent = LlmAgent(name="contract", model=self._model(), tools=mimir_tools(self.mimir))
        _final, session = self._run(agent, "contract", [], keep=False)
        [answer] = [
            p.function_response.response
            for e in session.events
            for p in (e.content.parts if e.content else [])
            if p.function_response is not None
        ]
        if "error" in answer:
            return str(answer["error"]), None, True
        return answer["result"], answer["data"], False


KEY = {"api_key": "test-key"}  # never sent anywhere but the fake server


DRIVERS: dict[str, type[Any]] = {
    "google-adk": GoogleADKDriver,
    "pydantic-ai": PydanticAIDriver,
    "openai-agents": OpenAIAgentsDriver,
}
