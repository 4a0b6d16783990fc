"""The real Codex CLI (0.171.0, from npm) with Mimir set up by ``mimir setup codex``.

Codex talks to a fake OpenAI Responses server on 127.0.0.1 (a ``model_providers`` entry in its
``config.toml``; no network) in a sandboxed HOME. Codex runs a new hook only once the user
trusted it in the TUI (``/hooks``); a headless test passes ``--dangerously-bypass-hook-trust``,
the flag Codex provides for exactly this. Proven here: setup merges into ``hooks.json`` next to
the user's own hook (idempotent, with a backup) and registers the MCP server through
``codex mcp add``; a failing shell call (its exit code read from Codex's transcript) is captured
as a failure; the next session's first model request carries the observation as a developer
message, and the repeated command draws the repeat guard; uninstall restores the user's files.
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
MAKE_ERROR = "No rule to make target 'deploy-staging'"


@pytest.fixture(scope="module")
def codex() -> Path:
    return host_cli("@openai/codex", "0.171.0", "codex")


def mimir_cli(env: dict[str, str], *args: str) -> str:
    out = subprocess.run(
        [str(BIN / "mimir"), *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def billing_project(home: Path) -> Path:
    """A git project whose Makefile has no ``deploy-staging`` target and whose script works."""
    project = home / "billing"
    (project / ".git").mkdir(parents=True)
    (project / "Makefile").write_text("test:\n\t@echo tests pass\n")
    deploy = project / "scripts" / "deploy.sh"
    deploy.parent.mkdir()
    deploy.write_text('#!/bin/sh\necho "deployed $2 to $1"\n')
    deploy.chmod(0o755)
    return project


def provider_config(url: str) -> str:
    return (
        'model = "fake-model"\nmodel_provider = "fake"\ncheck_for_update_on_startup = false\n'
        "[analytics]\nenabled = false\n\n"
        '[model_providers.fake]\nname = "fake"\n'
        f'base_url = "{url}/v1"\nwire_api = "responses"\nenv_key = "FAKE_OPENAI_KEY"\n'
    )


def session(codex: Path, home: Path, project: Path, server: Any, prompt: str) -> list[Any]:
    """One ``codex exec`` whose model runs the failing command, then the working one; returns
    the Responses requests it made."""
    server.requests.clear()
    server.script = [("exec_command", {"cmd": FAILING}), ("exec_command", {"cmd": WORKING})]
    out = subprocess.run(
        [
            str(codex),
            "exec",
            "--dangerously-bypass-hook-trust",
            "--skip-git-repo-check",
            "-s",
            "danger-full-access",
            prompt,
        ],
        env=host_env(home, codex, FAKE_OPENAI_KEY="sk-fake", RUST_LOG="error"),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "FINAL: tool said" in out.stdout and "deployed billing to staging" in out.stdout, (
        out.stdout[-2000:]
    )
    return [r["body"] for r in server.requests if r["path"].endswith("/responses")]


def developer_texts(body: dict[str, Any]) -> list[str]:
    return [
        part.get("text", "")
        for item in body["input"]
        if item.get("type") == "message" and item.get("role") == "developer"
        for part in item.get("content") or []
    ]


def test_setup_capture_inject_uninstall(codex: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = billing_project(home)
    codex_dir = home / ".codex"
    codex_dir.mkdir()
    user_hook = {"hooks": [{"type": "command", "command": "true", "timeout": 5}]}
    hooks_json = codex_dir / "hooks.json"
    hooks_json.write_text(json.dumps({"hooks": {"PostToolUse": [user_hook]}}))
    original = hooks_json.read_bytes()
    env = host_env(home, codex)

    with fake_model_server("responses") as server:
        config = codex_dir / "config.toml"
        config.write_text(provider_config(server.url))
        said = mimir_cli(env, "setup", "codex")
        assert "codex mcp add" in said and "/hooks" in said
        mimir_cli(env, "setup", "codex")  # idempotent
        data = json.loads(hooks_json.read_text())["hooks"]
        assert data["PostToolUse"][0] == user_hook and len(data["PostToolUse"]) == 2
        assert data["PreToolUse"][0]["hooks"][0]["command"].endswith("hook codex")
        [backup] = codex_dir.glob("hooks.json.mimir-backup-*")
        assert backup.read_bytes() == original
        assert "[mcp_servers.mimir]" in config.read_text()

        first = session(codex, home, project, server, "deploy the billing service to staging")
        second = session(codex, home, project, server, "deploy billing to the staging environment")

    assert len(first) == len(second) == 3  # prompt, after make, after the script
    assert not any("<mimir-memory>" in t for body in first for t in developer_texts(body))
    # (a) Before any tool ran in session 2: what failed here and what worked instead.
    shown = "\n".join(t for t in developer_texts(second[0]) if "<mimir-memory>" in t)
    assert f"- failed here: `{FAILING}`" in shown and MAKE_ERROR in shown, shown
    assert f"- worked here instead: `{WORKING}`" in shown
    # (b) The repeated make: the PreToolUse repeat guard reaches the next request.
    guard = [t for t in developer_texts(second[1]) if "failed here before on this task" in t]
    assert guard and FAILING in guard[0], developer_texts(second[1])
    hooks_log = home / ".mimir" / "logs" / "hooks.log"
    assert not hooks_log.exists(), hooks_log.read_text()[-3000:]

    from mimir_core import Mimir

    m = Mimir(home / ".mimir", embedder="hash")
    try:
        assert m.ingest().ingested >= 1
        failures = [h.experience for h in m.recall("deploy billing", outcome="failure", scope="*")]
        exp = next(e for e in failures if e.source == "codex")
        assert exp.action == FAILING and MAKE_ERROR in exp.reason
        assert exp.scope == str(project.resolve())
    finally:
        m.close()

    mimir_cli(env, "uninstall", "codex")
    assert json.loads(hooks_json.read_text()) == {"hooks": {"PostToolUse": [user_hook]}}
    assert "mcp_servers.mimir" not in (codex_dir / "config.toml").read_text()
