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
from pathlib import Path
from typing import Any

import pytest
from cli_hosts import FAILING, MAKE_ERROR, WORKING, CliHome
from fake_models import fake_model_server
from npm_tools import host_cli, host_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def gemini() -> Path:
    return host_cli("@google/gemini-cli", "0.61.0", "gemini")


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


def test_setup_capture_inject_uninstall(gemini: Path, cli_home: CliHome) -> None:
    home, project = cli_home.home, cli_home.project
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

    cli_home.mimir(env, "setup", "gemini")
    cli_home.mimir(env, "setup", "gemini")  # idempotent
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
    cli_home.assert_hooks_quiet()

    exp = cli_home.captured_failure("gemini")
    assert "Exit Code: 2" in exp.reason

    cli_home.mimir(env, "uninstall", "gemini")
    assert json.loads(settings.read_text()) == mine
