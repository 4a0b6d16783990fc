"""The Hermes provider's tools pass the adapter contract (the same suite as MCP and LangChain).

Hermes hands a provider's tools to the model as ``{"type": "function", "function": schema}``
and routes calls to ``handle_tool_call(name, args)``, whose answer must be a JSON string. The
provider answers ``{"result": text, "data": {...}}`` or ``{"error": message}``; the harness
checks every tool's results, data and error messages against the core specs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mimir_core.testing import assert_tool_contract
from mimir_core.tools.specs import AGENT_INSTRUCTIONS, TOOLS
from mimir_integrations.hermes import MimirMemoryProvider


@pytest.fixture
def provider(
    mimir: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[MimirMemoryProvider]:
    """A provider on the same store as the ``mimir`` fixture (as Hermes would start it)."""
    monkeypatch.setenv("MIMIR_HOME", str(mimir.home))
    monkeypatch.setenv("MIMIR_AUTO_CONSOLIDATE", "0")
    p = MimirMemoryProvider()
    p.initialize("contract", hermes_home=str(tmp_path / "hermes"), platform="cli")
    yield p
    p.shutdown()


def invoke(provider: MimirMemoryProvider) -> Any:
    def call(name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any] | None, bool]:
        raw = provider.handle_tool_call(name, args)
        assert isinstance(raw, str)
        answer = json.loads(raw)  # Hermes requires a JSON string
        if "error" in answer:
            return str(answer["error"]), None, True
        return answer["result"], answer["data"], False

    return call


def test_contract(provider: MimirMemoryProvider, mimir: Any) -> None:
    listed = {s["name"]: s["parameters"] for s in provider.get_tool_schemas()}
    assert_tool_contract(invoke(provider), mimir, listed=listed)


def test_schemas_are_the_specs_in_hermes_format() -> None:
    schemas = MimirMemoryProvider().get_tool_schemas()  # listed before initialize() in Hermes
    assert [s["name"] for s in schemas] == [t.name for t in TOOLS]
    for schema, spec in zip(schemas, TOOLS, strict=True):
        want = spec.args.model_json_schema()
        want.pop("title", None)
        assert schema == {"name": spec.name, "description": spec.description, "parameters": want}
        # what Hermes sends to the model must be plain JSON
        assert json.loads(json.dumps({"type": "function", "function": schema}))


def test_no_tool_shadows_a_hermes_core_tool() -> None:
    # Hermes drops provider tools named like its own (0.19: terminal, memory, todo, ...).
    # toolsets._HERMES_CORE_TOOLS of hermes-agent 0.19.0
    hermes_core = {
        "browser_back",
        "browser_cdp",
        "browser_click",
        "browser_console",
        "browser_dialog",
        "browser_get_images",
        "browser_navigate",
        "browser_press",
        "browser_scroll",
        "browser_snapshot",
        "browser_type",
        "browser_vision",
        "clarify",
        "close_terminal",
        "computer_use",
        "cronjob",
        "delegate_task",
        "execute_code",
        "ha_call_service",
        "ha_get_state",
        "ha_list_entities",
        "ha_list_services",
        "image_generate",
        "kanban_attach",
        "kanban_attach_url",
        "kanban_attachments",
        "kanban_block",
        "kanban_comment",
        "kanban_complete",
        "kanban_create",
        "kanban_heartbeat",
        "kanban_link",
        "kanban_list",
        "kanban_show",
        "kanban_unblock",
        "memory",
        "patch",
        "process",
        "read_file",
        "read_terminal",
        "search_files",
        "session_search",
        "skill_manage",
        "skill_view",
        "skills_list",
        "terminal",
        "text_to_speech",
        "todo",
        "vision_analyze",
        "web_extract",
        "web_search",
        "write_file",
    }
    assert not {s["name"] for s in MimirMemoryProvider().get_tool_schemas()} & hermes_core


def test_system_prompt_block_carries_the_shared_instructions() -> None:
    assert MimirMemoryProvider().system_prompt_block().startswith(AGENT_INSTRUCTIONS)
