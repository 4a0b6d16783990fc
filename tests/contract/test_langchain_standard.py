"""langchain-tests standard suites: ``ToolsUnitTests`` and ``ToolsIntegrationTests`` for every
Mimir tool, ``RetrieversIntegrationTests`` for the retriever, on a real store."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

import pytest
from langchain_tests.integration_tests import RetrieversIntegrationTests, ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from mimir_core import Mimir
from mimir_core.testing import seed_lesson
from mimir_core.tools.specs import TOOLS
from mimir_integrations.langchain import MimirRetriever, MimirTool

# The suites mix sync and async tests; pytest-asyncio runs the async ones (strict mode).
pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings("ignore:.*is marked with '@pytest.mark.asyncio' but it is not"),
]


@functools.cache
def seeded() -> Mimir:
    """One store for the suites, with experiences and a lesson to find."""
    m = Mimir(Path(tempfile.mkdtemp(prefix="mimir-lc-std-")), embedder="hash")
    for action, outcome in [
        ("pytest tests/api", "failure"),
        ("alembic upgrade head && pytest tests/api", "success"),
        ("docker compose up db && pytest tests/api", "success"),
        ("pytest -x tests/api", "failure"),
    ]:
        m.record(
            "run the api tests",
            action,
            outcome,
            reason="relation orders does not exist" if outcome == "failure" else None,
        )
    seed_lesson(
        m,
        rule="Run alembic upgrade head before the api tests.",
        trigger="run the api tests",
        action="alembic upgrade head && pytest tests/api",
    )
    return m


def _fresh_experience() -> str:
    return seeded().record("clean the build cache", "rm -rf build", "success").id


def _fresh_lesson() -> str:
    return seed_lesson(seeded(), rule="Use make clean.", trigger="clean the build", evidence=1).id


#: Valid arguments per tool; callables run at each use (destructive tools need a fresh target).
EXAMPLES: dict[str, Any] = {
    "recall_experiences": lambda: {"query": "run the api tests", "k": 3},
    "recommend_action": lambda: {"task": "run the api tests"},
    "past_attempts": lambda: {"action": "make test", "task": "run the api tests"},
    "record_experience": lambda: {
        "task": "run the api tests",
        "action": "make test",
        "outcome": "success",
    },
    "record_failure": lambda: {
        "task": "run the api tests",
        "action": "make test-api",
        "reason": "no rule to make target",
    },
    "recall_lessons": lambda: {"query": "run the api tests", "k": 2},
    "consolidate": lambda: {"dry_run": True},
    "forget": lambda: {"id": _fresh_experience()},
    "pin_lesson": lambda: {"id": _fresh_lesson(), "pinned": True},
    "quarantine_lesson": lambda: {"id": _fresh_lesson(), "reason": "misled the agent"},
    "memory_stats": lambda: {},
    "recent_experiences": lambda: {"n": 3},
    "lesson_feedback": lambda: {"lesson_id": _fresh_lesson(), "helped": True},
}


def test_every_core_tool_has_an_example() -> None:
    assert set(EXAMPLES) == {spec.name for spec in TOOLS}


class _ToolCase:
    tool_name = ""

    @property
    def tool_constructor(self) -> MimirTool:
        return MimirTool(name=self.tool_name, mimir=seeded())

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return dict(EXAMPLES[self.tool_name]())


class _ToolFromEnv:
    @property
    def init_from_env_params(self) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        home = tempfile.mkdtemp(prefix="mimir-lc-env-")
        return (
            {"MIMIR_HOME": home, "MIMIR_EMBEDDER": "hash"},
            {"name": "memory_stats"},
            {"name": "memory_stats"},
        )


for _spec in TOOLS:
    _camel = "".join(part.title() for part in _spec.name.split("_"))
    _attrs = {"tool_name": _spec.name, "__module__": __name__}
    globals()[f"Test{_camel}Unit"] = type(
        f"Test{_camel}Unit", (_ToolCase, ToolsUnitTests), dict(_attrs)
    )
    globals()[f"Test{_camel}Integration"] = type(
        f"Test{_camel}Integration", (_ToolCase, ToolsIntegrationTests), dict(_attrs)
    )


class TestToolFromEnvironment(_ToolFromEnv, ToolsUnitTests):
    @property
    def tool_constructor(self) -> type[MimirTool]:
        return MimirTool

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        return {"name": "memory_stats", "mimir": seeded()}


class TestMimirRetriever(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[MimirRetriever]:
        return MimirRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"mimir": seeded(), "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "run the api tests"


class TestMimirExperienceRetriever(TestMimirRetriever):
    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"mimir": seeded(), "include": ("experiences",)}
