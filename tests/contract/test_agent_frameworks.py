"""The contract suite over the in-process agent frameworks (Pydantic AI, OpenAI Agents SDK,
Google ADK): the same tools, the same round trip, the same failure behaviour.

Each case runs the real framework's agent loop against a scripted model server on 127.0.0.1
(``framework_drivers.py``), with a real store:

* Mimir's tools, called through the framework, pass the core's tool contract;
* a tool call that fails is recorded once, with the framework as its source, and a second
  session's model request carries that evidence, and the failed result says it failed before;
* a tool that crashes the run still leaves its failure in the store;
* a memory that fails never fails the agent.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from fake_models import fake_model_server
from framework_drivers import DRIVERS, FAIL_TEXT, TASK, listed_schemas

from mimir_core import Mimir
from mimir_core.testing import assert_tool_contract

FRAMEWORKS = sorted(DRIVERS)


def _driver(name: str, mimir: Any, server: Any) -> Any:
    pytest.importorskip(DRIVERS[name].module, reason=f"the {name} extra is not installed")
    return DRIVERS[name](mimir, server)


def _seen(server: Any) -> list[str]:
    """The text of every model request, as the server received it."""
    return [str(r["body"]) for r in server.requests]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_tools_pass_the_adapter_contract(framework: str, mimir: Mimir) -> None:
    with fake_model_server(DRIVERS[framework].api) as server:
        driver = _driver(framework, mimir, server)
        assert_tool_contract(driver.invoke, mimir, listed=listed_schemas())


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_failure_is_recorded_once_and_shown_in_the_next_session(
    framework: str, hash_mimir: Mimir
) -> None:
    with fake_model_server(DRIVERS[framework].api) as server:
        driver = _driver(framework, hash_mimir, server)
        server.script = [("deploy", {"target": "prod"}), ("deploy", {"target": "staging"})]
        driver.run()
        first = _seen(server)
        assert "<mimir-memory>" not in first[0]  # nothing known yet
        records = hash_mimir.recent(10)
        failures = [e for e in records if e.outcome == "failure"]
        assert [(e.action, e.source) for e in failures] == [
            ('deploy {"target": "prod"}', DRIVERS[framework].source)
        ]
        assert FAIL_TEXT in failures[0].reason and "mimir-memory" not in failures[0].reason
        assert [e.action for e in records if e.outcome == "success"] == [
            'deploy {"target": "staging"}'
        ]

        server.requests.clear()
        driver.run()
        second = _seen(server)
        # The evidence reaches the model at the framework's context seam ...
        assert any("<mimir-memory>" in t and "ImagePullBackOff" in t for t in second)
        # ... and the failed result itself says it failed here before, and what worked.
        assert any("failed here before on this task" in t for t in second[1:])
        assert any("worked instead on this task" in t and "staging" in t for t in second)
        failures = [e for e in hash_mimir.recent(20) if e.outcome == "failure"]
        assert len(failures) == 2  # one per session: the note is never a second record


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_tool_that_crashes_the_run_is_still_recorded(framework: str, hash_mimir: Mimir) -> None:
    if DRIVERS[framework].crash_unseen:
        pytest.skip(DRIVERS[framework].crash_unseen)
    with fake_model_server(DRIVERS[framework].api) as server:
        driver = _driver(framework, hash_mimir, server)
        server.script = [("deploy", {"target": "prod"})]
        with pytest.raises(Exception, match="ImagePullBackOff"):
            driver.run(crash=True)
    [failure] = hash_mimir.recent(5)
    assert failure.outcome == "failure" and failure.task == TASK
    assert failure.source == DRIVERS[framework].source


class BrokenMimir:
    """A memory whose every call fails (a full disk, a locked store)."""

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise OSError(f"mimir store unavailable ({name})")

        return fail


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_failing_memory_never_fails_the_agent(framework: str) -> None:
    with fake_model_server(DRIVERS[framework].api) as server:
        driver = _driver(framework, BrokenMimir(), server)
        server.script = [("deploy", {"target": "prod"}), ("deploy", {"target": "staging"})]
        out = driver.run()
    assert "deployed to staging" in str(out)
