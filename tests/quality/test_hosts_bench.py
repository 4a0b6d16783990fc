"""CI gate of the hosts benchmark: ``python -m bench.hosts --quick --json --check``.

The quick configuration replays the same scripted sessions (three task families x 4 sessions,
plus 2 in a second project) through every host's real entry point (Claude Code and Cline hook
processes, the Hermes provider, a LangGraph graph, the MCP server with its in-process client)
and a no-memory baseline, with the hash embedder and no consolidation: what an agent is shown
of past attempts before any lesson exists. Offline, in temporary homes (the conftest sandboxes
HOME and MIMIR_HOME; every host gets its own home under a temporary directory). Runs are
deterministic: seeded outcomes and choices, the same for every host.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.hosts import HOSTS, table

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture(scope="module")
def run() -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.hosts", "--quick", "--json", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.stdout.strip(), proc.stderr[-4000:]
    res: dict[str, Any] = json.loads(proc.stdout)
    res["exit"] = proc.returncode
    print(table(res))
    return res


def _shown(fig: dict[str, Any]) -> str:
    """What the agent saw when a goal was missed, for the failure message."""
    return json.dumps(fig["examples"][:3], indent=1, ensure_ascii=False)[:3000]


def test_every_host_and_the_baseline_ran(run: dict[str, Any]) -> None:
    assert set(run["hosts"]) == {*HOSTS, "no-memory"}
    for host, fig in run["hosts"].items():
        assert fig["sessions"] == 14 and fig["tool_calls"] >= fig["sessions"], host


def test_the_baseline_repeats_mistakes(run: dict[str, Any]) -> None:
    # Without memory the agent re-runs commands that already failed here: the gates below
    # measure something. Measured: 7 repeats in 24 calls.
    base = run["hosts"]["no-memory"]
    assert base["repeats"]["n"]["total"] >= 3
    assert base["evidence_share"] == 0


@pytest.mark.parametrize("host", HOSTS)
def test_memory_hosts_repeat_less_than_the_baseline(run: dict[str, Any], host: str) -> None:
    base = run["hosts"]["no-memory"]["repeats"]["per_1000_calls"]["total"]
    assert run["hosts"][host]["repeats"]["per_1000_calls"]["total"] <= base


@pytest.mark.parametrize("host", HOSTS)
def test_no_repeat_after_a_warning_at_task_start(run: dict[str, Any], host: str) -> None:
    fig = run["hosts"][host]
    assert fig["repeats"]["n"]["after_warning"] == 0, _shown(fig)


@pytest.mark.parametrize("host", HOSTS)
def test_first_warning_in_the_session_after_the_first_failure(
    run: dict[str, Any], host: str
) -> None:
    fig = run["hosts"][host]
    wait = fig["sessions_to_first_warning"]
    assert wait["pairs"] > 0
    assert wait["median"] is not None and wait["median"] <= 1, (wait, _shown(fig))


@pytest.mark.parametrize("host", HOSTS)
def test_at_most_5_percent_false_warnings(run: dict[str, Any], host: str) -> None:
    """Too few warnings in the quick configuration to measure 5% (one in six is 17%): none may
    be false but those right after a drift, which no memory can foresee. The full
    configuration judges the rate itself (``python -m bench.hosts --check``)."""
    warnings = run["hosts"][host]["warnings"]
    assert warnings["total"] >= 3, warnings  # warnings were given: the test can fail
    if warnings["total"] >= 20:
        assert warnings["false_rate"] <= 0.05, (warnings, _shown(run["hosts"][host]))
    else:
        stationary = warnings["false"] - warnings["false_after_drift"]
        assert stationary == 0, (warnings, _shown(run["hosts"][host]))


@pytest.mark.parametrize("host", HOSTS)
def test_nothing_from_elsewhere_is_shown_as_here(run: dict[str, Any], host: str) -> None:
    assert run["hosts"][host]["mislabelled_here"] == 0


def test_check_exits_1_exactly_when_a_goal_is_missed(run: dict[str, Any]) -> None:
    assert run["exit"] == (1 if run["missed"] else 0), run["missed"]
