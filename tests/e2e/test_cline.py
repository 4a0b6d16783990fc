"""The real Cline CLI (npm ``cline`` 3.0.65) with Mimir set up by ``mimir setup cline``.

Cline talks to a fake OpenAI-compatible server on 127.0.0.1 (no network) in a sandboxed HOME.
Proven here: the hooks installed in both global hook directories capture a failing command once
(not twice), a lesson reaches the model after the tool result as hook context, the run is never
cancelled, and ``mimir uninstall cline`` removes the hooks and the MCP entry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_models import fake_model_server
from npm_tools import host_cli, host_env, reap_processes_of, seed_lesson

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BIN = Path(sys.executable).parent
TASK = "deploy the billing worker to staging"
RULE = (
    "Before deploying the billing worker, raise its memory limit to 1Gi: it is OOMKilled at 512Mi."
)


@pytest.fixture(scope="module")
def cline() -> Path:
    return host_cli("cline", "3.0.65", "cline")


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    yield home
    reap_processes_of(home)  # Cline's hub daemon outlives the run


def test_setup_capture_inject_uninstall(cline: Path, home: Path) -> None:
    project = home / "billing"
    (project / ".git").mkdir(parents=True)
    lesson_id = seed_lesson(home / ".mimir", rule=RULE, trigger=TASK)
    env = host_env(home, cline)

    def run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args), env=env, cwd=project, capture_output=True, text=True, timeout=timeout
        )

    setup = run(str(BIN / "mimir"), "setup", "cline")
    assert setup.returncode == 0, setup.stderr
    for directory in (home / "Documents" / "Cline" / "Hooks", home / ".cline" / "hooks"):
        script = directory / "PostToolUse"
        assert os.access(script, os.X_OK) and "hook cline" in script.read_text()
    mcp_file = home / ".cline" / "data" / "settings" / "cline_mcp_settings.json"
    assert json.loads(mcp_file.read_text())["mcpServers"]["mimir"]["args"] == ["mcp"]

    with fake_model_server("openai") as server:
        auth = run(
            str(cline),
            "auth",
            "-p",
            "openai-compatible",
            "-k",
            "sk-fake",
            "-m",
            "fake-model",
            "-b",
            server.url + "/v1",
        )
        assert auth.returncode == 0, auth.stderr[-2000:]
        args = json.dumps({"commands": ["kubectl apply -f /nonexistent_xyz/worker.yaml"]})
        out = run(str(cline), "--json", f"{TASK} CALL:run_commands ARGS={args}", timeout=400)
        bodies = [json.dumps(r["body"]) for r in server.requests]
    assert out.returncode == 0, out.stderr[-2000:]
    result = [json.loads(line) for line in out.stdout.splitlines() if '"run_result"' in line]
    assert result and result[-1]["finishReason"] == "completed"  # never cancelled
    # The lesson reached the model as hook context (exactly once, though two hook dirs ran).
    assert sum(body.count(RULE) for body in bodies[-1:]) == 1, bodies[-1][-3000:]
    assert "<mimir-memory>" in bodies[-1]
    hooks_log = home / ".mimir" / "logs" / "hooks.log"
    assert not hooks_log.exists(), hooks_log.read_text()[-3000:]

    from mimir_core import Mimir

    m = Mimir(home / ".mimir", embedder="hash")
    assert m.ingest().ingested >= 1
    got = [e for e in m.recent(20, scope="*") if e.source == "cline"]
    assert len(got) == 1, got  # captured once
    exp = got[0]
    assert exp.outcome == "failure" and exp.task.startswith(TASK)
    assert exp.action == "kubectl apply -f /nonexistent_xyz/worker.yaml"
    assert "exited with code" in exp.reason and lesson_id in exp.recalled_lesson_ids
    m.close()

    removed = run(str(BIN / "mimir"), "uninstall", "cline")
    assert removed.returncode == 0, removed.stderr
    assert not list((home / ".cline" / "hooks").iterdir())
    assert not list((home / "Documents" / "Cline" / "Hooks").iterdir())
    assert "mimir" not in json.loads(mcp_file.read_text())["mcpServers"]
