"""The real Gemini CLI (0.61.0, from npm) with Mimir set up by ``mimir setup gemini``.

Gemini CLI talks to a fake Gemini API on 127.0.0.1 (``GOOGLE_GEMINI_BASE_URL``, an API key;
no network) in a sandboxed HOME, in a workspace trusted for the run
(``GEMINI_CLI_TRUST_WORKSPACE=true``, as a headless run needs). Its hooks run
``mimir hook gemini``, whose adapter is the declarative mapping ``integrations/gemini/
mapping.json``. Proven here: setup merges hooks and the MCP server into ``settings.json`` next
to the user's own hook (idempotent, with a byte-for-byte backup); a shell command that exits 2
(Gemini reports ``Exit Code: 2`` only inside the tool's output) is captured as a failure; the
next session's prompt carries what failed here and what worked instead, and the repeated
command's result carries the repeat guard's facts; uninstall restores the user's file.
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
def gemini() -> Path:
    return host_cli("@google/gemini-cli", "0.61.0", "gemini")


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


def session(gemini: Path, home: Path, project: Path, server: Any, prompt: str) -> list[Any]:
    """One ``gemini -p`` whose model runs the failing command, then the working one; returns
    the chat requests it made (not the CLI's JSON routing checks)."""
    server.requests.clear()
    args = {"description": "deploy"}
    server.script = [
        ("run_shell_command", {"command": FAILING, **args}),
        ("run_shell_command", {"command": WORKING, **args}),
    ]
    out = subprocess.run(
        [str(gemini), "-p", prompt, "--yolo", "-o", "json"],
        env=host_env(
            home,
            gemini,
            GEMINI_API_KEY="fake-key",
            GOOGLE_GEMINI_BASE_URL=server.url,
            GEMINI_CLI_TRUST_WORKSPACE="true",
        ),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    said = json.loads(out.stdout)["response"]
    assert "FINAL: tool said" in said and "deployed billing to staging" in said, said
    return [
        r["body"]
        for r in server.requests
        if "GenerateContent" in r["path"]
        and (r["body"].get("generationConfig") or {}).get("responseMimeType") != "application/json"
    ]


def test_setup_capture_inject_uninstall(gemini: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = billing_project(home)
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    user_hook = {"matcher": "write_file", "hooks": [{"type": "command", "command": "true"}]}
    mine = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "hooks": {"AfterTool": [user_hook]},
    }
    settings.write_text(json.dumps(mine, indent=4))
    original = settings.read_bytes()
    env = host_env(home, gemini)

    mimir_cli(env, "setup", "gemini")
    mimir_cli(env, "setup", "gemini")  # idempotent
    data = json.loads(settings.read_text())
    assert data["hooks"]["AfterTool"][0] == user_hook and len(data["hooks"]["AfterTool"]) == 2
    assert data["hooks"]["BeforeAgent"][0]["hooks"][0]["command"].endswith("hook gemini")
    assert data["mcpServers"]["mimir"]["args"] == ["mcp"]
    [backup] = settings.parent.glob("settings.json.mimir-backup-*")
    assert backup.read_bytes() == original

    with fake_model_server("gemini") as server:
        first = session(gemini, home, project, server, "deploy the billing service to staging")
        second = session(gemini, home, project, server, "deploy billing to the staging environment")
    assert len(first) == len(second) == 3  # prompt, after make, after the script
    assert "mimir-memory" not in json.dumps(first)

    # (a) The prompt of session 2, before any tool ran: a <hook_context> beside the user's words.
    prompt = second[0]["contents"][-1]
    texts = [p["text"] for p in prompt["parts"] if "text" in p]
    shown = "\n".join(t for t in texts if "mimir-memory" in t)
    assert shown.startswith("<hook_context>&lt;mimir-memory&gt;"), texts
    assert f"- failed here: `{FAILING}`" in shown and MAKE_ERROR in shown
    assert f"- worked here instead: `{WORKING}`" in shown
    # (b) The repeated make: its result carries the guard's facts.
    after_make = json.dumps(second[1]["contents"][-1])
    assert "failed here before on this task" in after_make and FAILING in after_make
    hooks_log = home / ".mimir" / "logs" / "hooks.log"
    assert not hooks_log.exists(), hooks_log.read_text()[-3000:]

    from mimir_core import Mimir

    m = Mimir(home / ".mimir", embedder="hash")
    try:
        assert m.ingest().ingested >= 1
        failures = [h.experience for h in m.recall("deploy billing", outcome="failure", scope="*")]
        exp = next(e for e in failures if e.source == "gemini")
        assert exp.action == FAILING and "Exit Code: 2" in exp.reason
        assert exp.scope == str(project.resolve())
    finally:
        m.close()

    mimir_cli(env, "uninstall", "gemini")
    assert json.loads(settings.read_text()) == mine
