"""The in-process adapters stay thin (issue 31): the work is the core's, framework-free, and
each adapter only wires it to its framework's types. This holds them to that."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: An adapter over this many lines has grown logic that belongs in the core.
MAX_LINES = 160
ADAPTERS = ("openai_agents.py", "google_adk.py", "pydantic_ai.py")
#: The core modules the adapters are built on.
CORE = ("agent_run.py", "item_log.py", "responses_run.py", "wire_formats.py")
FRAMEWORKS = ("agents", "google", "pydantic_ai", "langchain", "langchain_core", "langgraph")


@pytest.mark.parametrize("name", ADAPTERS)
def test_an_adapter_stays_thin(name: str) -> None:
    lines = len((ROOT / "integrations" / name).read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"integrations/{name}: {lines} lines > {MAX_LINES}"


@pytest.mark.parametrize("name", CORE)
def test_the_core_imports_no_framework(name: str) -> None:
    tree = ast.parse((ROOT / "mimir_core" / "hosting" / name).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            tops = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            tops = [(node.module or "").split(".")[0]]
        else:
            continue
        assert not set(tops) & set(FRAMEWORKS), f"mimir_core/hosting/{name} imports {tops}"
