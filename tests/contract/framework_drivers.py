"""Drivers for the in-process agent frameworks' contract suite (``test_agent_frameworks.py``).

Each driver runs the real framework's agent loop against the scripted OpenAI-compatible server
of ``tests/e2e/fake_models.py`` on 127.0.0.1 (Google ADK against its Gemini twin), with a
``deploy`` tool that fails for ``target == "prod"`` in the framework's own way, and Mimir's
adapter attached. A driver also calls one of Mimir's tools through the framework (``invoke``),
for the tool contract.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from mimir_core.conversation import function_schemas

FAIL_TEXT = "helm: release failed: ImagePullBackOff for billing"
TASK = "deploy the billing service"


def listed_schemas() -> dict[str, dict[str, Any]]:
    return {s["name"]: s["parameters"] for s in function_schemas()}


class PydanticAIDriver:
    """Pydantic AI: ``Agent(OpenAIChatModel, capabilities=[MimirCapability])``."""

    name = source = "pydantic-ai"
    module = "pydantic_ai"
    api = "openai"

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


def run_async(coro: Any) -> Any:
    return asyncio.run(coro)


DRIVERS: dict[str, type[Any]] = {"pydantic-ai": PydanticAIDriver}
