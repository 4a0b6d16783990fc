"""The MCP Inspector CLI (npm ``@modelcontextprotocol/inspector``) as an external client.

Each call starts the server over stdio from the Inspector (a Node process, the TypeScript SDK),
so this checks the wire format another implementation sees: portable schemas (``--strict``),
tool calls with structured content, error results, resources and the prompt.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from npm_tools import node_missing_reason, npm_tool

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

INSPECTOR = ("@modelcontextprotocol/inspector", "2.12.0", "mcp-inspector")


@pytest.fixture(scope="module")
def inspector() -> Path:
    reason = node_missing_reason()
    if reason:
        pytest.skip(reason)
    exe = npm_tool(*INSPECTOR)
    assert exe is not None
    return exe


@pytest.fixture
def run(inspector: Path, tmp_path: Path) -> Any:
    home = tmp_path / "mimir-home"
    (tmp_path / "inspector-home").mkdir()

    def call(*args: str, ok: bool = True) -> Any:
        cmd = [
            str(inspector),
            "--cli",
            "-e",
            f"MIMIR_HOME={home}",
            "-e",
            "MIMIR_EMBEDDER=hash",
            sys.executable,
            "-m",
            "mimir_integrations.cli_mcp",
            "--no-background",
            *args,
        ]
        env = {"HOME": str(tmp_path / "inspector-home"), "PATH": "/usr/local/bin:/usr/bin:/bin"}
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path
        )
        assert (out.returncode == 0) is ok, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
        return json.loads(out.stdout) if out.stdout.strip() else None

    call.home = home  # type: ignore[attr-defined]
    return call


def test_tools_list_is_portable(run: Any) -> None:
    listing = run("--method", "tools/list", "--strict")
    tools = {t["name"]: t for t in listing["tools"]}
    assert len(tools) == 13
    assert tools["forget"]["annotations"]["destructiveHint"] is True
    assert tools["recall_experiences"]["annotations"]["readOnlyHint"] is True
    assert tools["recall_experiences"]["inputSchema"]["properties"]["k"]["maximum"] == 100
    assert "outputSchema" in tools["record_experience"]


def test_call_record_recall_and_an_error(run: Any) -> None:
    rec = run(
        "--method",
        "tools/call",
        "--tool-name",
        "record_failure",
        "--tool-arg",
        "task=install the frontend dependencies",
        "action=npm ci",
        "reason=ERESOLVE unable to resolve dependency tree",
    )
    assert rec["isError"] is False
    exp_id = rec["structuredContent"]["experience"]["id"]
    got = run(
        "--method",
        "tools/call",
        "--tool-name",
        "recall_experiences",
        "--tool-arg",
        "query=install the frontend dependencies",
        "k=3",
    )
    assert got["structuredContent"]["hits"][0]["id"] == exp_id
    assert "npm ci" in got["content"][0]["text"]
    bad = run(
        "--method",
        "tools/call",
        "--tool-name",
        "recall_experiences",
        "--tool-arg",
        "query=ERESOLVE",
        "k=0",
        ok=False,
    )
    assert bad["isError"] is True
    assert bad["content"][0]["text"] == "k: must be an integer from 1 to 100; got 0"


def test_resources_and_prompt(run: Any) -> None:
    from mimir_core import Mimir
    from mimir_core.testing import seed_lesson

    m = Mimir(run.home, embedder="hash")
    lesson = seed_lesson(
        m, rule="Use npm ci --legacy-peer-deps.", trigger="install the frontend dependencies"
    )
    m.close()
    listed = run("--method", "resources/list")
    assert {r["uri"] for r in listed["resources"]} == {"mimir://lessons", "mimir://stats"}
    read = run("--method", "resources/read", "--uri", f"mimir://lessons/{lesson.id}")
    detail = json.loads(read["contents"][0]["text"])
    assert detail["lesson"]["id"] == lesson.id and len(detail["supporting"]) == 4
    assert detail["audit"][0]["event"] == "seeded"
    prompt = run("--method", "prompts/get", "--prompt-name", "mimir_instructions")
    assert "record_failure" in prompt["messages"][0]["content"]["text"]
