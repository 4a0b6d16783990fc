"""The real GitHub Copilot CLI (1.0.102, from npm) with Mimir set up by ``mimir setup copilot``.

Copilot CLI talks to a fake OpenAI chat completions server on 127.0.0.1 through its own
"bring your own key" provider settings (``COPILOT_PROVIDER_BASE_URL``), with
``COPILOT_OFFLINE=true`` (no GitHub sign-in, telemetry or update check) in a sandboxed HOME.
Its hooks run ``mimir hook copilot``, whose adapter is the declarative mapping
``integrations/copilot/mapping.json``. Proven here: setup merges the hooks into
``settings.json`` and the MCP server into ``mcp-config.json`` next to the user's own (idempotent,
with byte-for-byte backups); a shell command that exits 2 (Copilot still reports
``resultType: "success"``, with ``completed with exit code 2`` in the text) is captured as a
failure; the next session's prompt carries what failed here and what worked instead, and the
repeated command draws the repeat guard; uninstall restores the user's files.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_models import fake_model_server
from npm_tools import host_cli, host_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BIN = Path(sys.executable).parent
FAILING = "make deploy-staging"
WORKING = "./scripts/deploy.sh staging billing"
MAKE_ERROR = "No rule to make target"


@pytest.fixture(scope="module")
def copilot() -> Path:
    return host_cli("@github/copilot", "1.0.102", "copilot")


def mimir_cli(env: dict[str, str], *args: str) -> str:
    out = subprocess.run(
        [str(BIN / "mimir"), *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def billing_project(home: Path) -> Path:
    project = home / "billing"
    (project / ".git").mkdir(parents=True)
    (project / "Makefile").write_text("test:\n\t@echo tests pass\n")
    deploy = project / "scripts" / "deploy.sh"
    deploy.parent.mkdir()
    deploy.write_text('#!/bin/sh\necho "deployed $2 to $1"\n')
    deploy.chmod(0o755)
    return project


def session(copilot: Path, home: Path, project: Path, server: Any, prompt: str) -> list[Any]:
    """One ``copilot -p`` whose model runs the failing command, then the working one; returns
    the chat completions requests it made."""
    server.requests.clear()
    server.script = [
        ("bash", {"command": FAILING, "description": "deploy with make"}),
        ("bash", {"command": WORKING, "description": "deploy with the script"}),
    ]
    out = subprocess.run(
        [str(copilot), "-p", prompt, "--allow-all-tools", "-s"],
        env=host_env(
            home,
            copilot,
            COPILOT_OFFLINE="true",
            COPILOT_PROVIDER_BASE_URL=f"{server.url}/v1",
            COPILOT_PROVIDER_API_KEY="sk-fake",
            COPILOT_MODEL="gpt-4o",
            COPILOT_AUTO_UPDATE="false",
        ),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "FINAL: tool said" in out.stdout and "deployed billing to staging" in out.stdout, (
        out.stdout[-2000:]
    )
    return [r["body"] for r in server.requests if r["path"].endswith("/chat/completions")]


def test_setup_capture_inject_uninstall(copilot: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = billing_project(home)
    config = home / ".copilot"
    config.mkdir()
    user_hook = {"type": "command", "bash": "true", "timeoutSec": 5}
    settings, mcp = config / "settings.json", config / "mcp-config.json"
    settings.write_text(json.dumps({"model": "gpt-4o", "hooks": {"postToolUse": [user_hook]}}))
    theirs = {"type": "local", "command": "other-mcp", "args": [], "tools": ["*"]}
    mcp.write_text(json.dumps({"mcpServers": {"other": theirs}}))
    originals = {p: p.read_bytes() for p in (settings, mcp)}
    env = host_env(home, copilot)

    mimir_cli(env, "setup", "copilot")
    mimir_cli(env, "setup", "copilot")  # idempotent
    hooks = json.loads(settings.read_text())["hooks"]
    assert hooks["postToolUse"][0] == user_hook and len(hooks["postToolUse"]) == 2
    assert hooks["preToolUse"][0]["bash"].endswith("hook copilot")
    servers = json.loads(mcp.read_text())["mcpServers"]
    assert servers["other"] == theirs and servers["mimir"]["args"] == ["mcp"]
    for path, original in originals.items():
        [backup] = config.glob(f"{path.name}.mimir-backup-*")
        assert backup.read_bytes() == original

    with fake_model_server("openai") as server:
        first = session(copilot, home, project, server, "deploy the billing service to staging")
        second = session(
            copilot, home, project, server, "deploy billing to the staging environment"
        )
    assert len(first) == len(second) == 3  # prompt, after make, after the script
    # (Mimir's MCP tools, which Copilot offers the model, name the block in their descriptions.)
    assert "mimir-memory" not in json.dumps([body["messages"] for body in first])
    assert any(t.get("function", {}).get("name", "").startswith("mimir") for t in first[0]["tools"])

    # (a) The prompt of session 2, before any tool ran.
    prompt = next(
        m["content"]
        for m in second[0]["messages"]
        if m["role"] == "user" and "deploy billing to the staging" in json.dumps(m)
    )
    assert "<mimir-memory>" in json.dumps(prompt), prompt
    shown = json.dumps(prompt)
    assert f"- failed here: `{FAILING}`" in shown and MAKE_ERROR in shown
    assert f"- worked here instead: `{WORKING}`" in shown
    # (b) The repeated make: the preToolUse repeat guard reaches the next request.
    after_make = json.dumps(second[1]["messages"][-2:])
    assert "failed here before on this task" in after_make and FAILING in after_make, after_make
    hooks_log = home / ".mimir" / "logs" / "hooks.log"
    assert not hooks_log.exists(), hooks_log.read_text()[-3000:]

    from mimir_core import Mimir

    m = Mimir(home / ".mimir", embedder="hash")
    try:
        assert m.ingest().ingested >= 1
        failures = [h.experience for h in m.recall("deploy billing", outcome="failure", scope="*")]
        exp = next(e for e in failures if e.source == "copilot")
        assert exp.action == FAILING and "exit code 2" in exp.reason
        assert exp.scope == str(project.resolve())
    finally:
        m.close()

    mimir_cli(env, "uninstall", "copilot")
    for path, original in originals.items():
        assert json.loads(path.read_text()) == json.loads(original)
