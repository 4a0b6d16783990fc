"""The real Claude Code CLI (2.1.112, pure JS on Node) with Mimir set up by ``mimir setup``.

Claude Code talks to a fake Anthropic Messages server on 127.0.0.1 (no network) in a sandboxed
HOME. Proven here: a failing tool call becomes a failure experience in the store, a lesson
reaches the model's request as injected context, the plugin validates, ``mimir uninstall``
removes exactly what setup added, and from the first repeat of a task the observations of past
attempts (what failed here, what worked instead) reach the model at the prompt and with the
repeated command, with no ingest or consolidation in between.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_models import fake_model_server
from npm_tools import host_cli, host_env, seed_lesson

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PLUGIN = ROOT / "integrations" / "claude_plugin"
TASK = "run the payments integration tests"
RULE = "Run alembic upgrade head before the payments integration tests: a migration creates orders."


@pytest.fixture(scope="module")
def claude() -> Path:
    return host_cli("@anthropic-ai/claude-code", "2.1.112", "claude")


def claude_env(home: Path, claude: Path, **extra: str) -> dict[str, str]:
    return host_env(
        home,
        claude,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        **extra,
    )


def mimir_cli(env: dict[str, str], *args: str) -> str:
    out = subprocess.run(
        [str(BIN / "mimir"), *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_setup_capture_inject_uninstall(claude: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = home / "payments"
    (project / ".git").mkdir(parents=True)
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    user_hook = {"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}
    settings.write_text(json.dumps({"model": "sonnet", "hooks": {"PostToolUse": [user_hook]}}))
    lesson_id = seed_lesson(home / ".mimir", rule=RULE, trigger=TASK)
    env = claude_env(home, claude)

    said = mimir_cli(env, "setup", "claude-code")
    assert "claude mcp add" in said
    mimir_cli(env, "setup", "claude-code")  # idempotent
    data = json.loads(settings.read_text())
    assert data["model"] == "sonnet" and data["hooks"]["PostToolUse"][0] == user_hook
    assert len(data["hooks"]["PostToolUse"]) == 2 and len(data["hooks"]["Stop"]) == 1
    assert list(settings.parent.glob("settings.json.mimir-backup-*"))
    mcp = json.loads((home / ".claude.json").read_text())["mcpServers"]["mimir"]
    assert mcp["args"] == ["mcp"]

    with fake_model_server("anthropic") as server:
        args = json.dumps({"command": "ls /nonexistent_xyz", "description": "list the fixtures"})
        out = subprocess.run(
            [
                str(claude),
                "-p",
                f"{TASK} CALL:Bash ARGS={args}",
                "--allowedTools",
                "Bash",
                "--output-format",
                "json",
            ],
            env=claude_env(
                home, claude, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-ant-fake"
            ),
            cwd=project,
            capture_output=True,
            text=True,
            timeout=240,
        )
        requests = [r["body"] for r in server.requests if "/v1/messages" in r["path"]]
    assert out.returncode == 0, out.stderr[-2000:]
    assert "No such file or directory" in json.loads(out.stdout)["result"]
    # The lesson reached the model as injected context of the user's prompt.
    injected = [json.dumps(body) for body in requests if RULE in json.dumps(body)]
    assert injected, "the lesson never reached the model"
    assert (
        "<mimir-memory>" in injected[0]
        and "UserPromptSubmit hook additional context" in (injected[0])
    )
    hooks_log = home / ".mimir" / "logs" / "hooks.log"
    assert not hooks_log.exists(), hooks_log.read_text()[-3000:]

    from mimir_core import Mimir

    m = Mimir(home / ".mimir", embedder="hash")
    assert m.ingest().ingested >= 1
    failures = [h.experience for h in m.recall(TASK, outcome="failure", scope="*")]
    exp = next(e for e in failures if e.source == "claude-code")
    assert exp.action == "ls /nonexistent_xyz"
    assert "No such file or directory" in exp.reason and exp.task.startswith(TASK)
    assert exp.scope == str(project.resolve()) and lesson_id in exp.recalled_lesson_ids
    m.close()

    mimir_cli(env, "uninstall", "claude-code")
    data = json.loads(settings.read_text())
    assert data == {"model": "sonnet", "hooks": {"PostToolUse": [user_hook]}}
    assert "mimir" not in json.loads((home / ".claude.json").read_text()).get("mcpServers", {})


def test_plugin_validates_with_the_real_cli(claude: Path, tmp_path: Path) -> None:
    from mimir_integrations.claude_code import hooks_config

    out = subprocess.run(
        [str(claude), "plugin", "validate", str(PLUGIN)],
        env=claude_env(tmp_path, claude),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and "Validation passed" in out.stdout, out.stdout + out.stderr
    hooks = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]
    assert hooks == hooks_config("mimir hook claude-code")
    mcp = json.loads((PLUGIN / ".mcp.json").read_text())["mcpServers"]["mimir"]
    assert mcp == {"command": "mimir", "args": ["mcp"]}


FAILING = "make deploy-staging"
WORKING = "./scripts/deploy.sh staging billing"
MAKE_ERROR = "No rule to make target 'deploy-staging'"


def billing_project(home: Path) -> Path:
    """A git project whose Makefile has no ``deploy-staging`` target (``make`` exits 2) and
    whose deploy script works."""
    project = home / "billing"
    (project / ".git").mkdir(parents=True)
    (project / "Makefile").write_text("test:\n\t@echo tests pass\n")
    deploy = project / "scripts" / "deploy.sh"
    deploy.parent.mkdir()
    deploy.write_text('#!/bin/sh\necho "deployed $2 to $1"\n')
    deploy.chmod(0o755)
    return project


def deploy_session(claude: Path, home: Path, project: Path, server: Any, prompt: str) -> list[Any]:
    """One ``claude -p`` session whose model runs the failing command, then the working one;
    returns the Messages requests it made (the prompt holds only the user's words)."""
    server.requests.clear()
    server.script = [
        ("Bash", {"command": FAILING, "description": "deploy with make"}),
        ("Bash", {"command": WORKING, "description": "deploy with the script"}),
    ]
    out = subprocess.run(
        [str(claude), "-p", prompt, "--allowedTools", "Bash", "--output-format", "json"],
        env=claude_env(
            home, claude, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-ant-fake"
        ),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    said = json.loads(out.stdout)["result"]
    assert "FINAL: tool said deployed billing to staging" in said, said
    return [r["body"] for r in server.requests if "/v1/messages" in r["path"]]


def texts(message: dict[str, Any]) -> list[str]:
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content if b.get("type") == "text"]


def tool_use_id(requests: list[Any], command: str) -> str:
    return next(
        b["id"]
        for body in requests
        for m in body["messages"]
        if m["role"] == "assistant"
        for b in m["content"]
        if b.get("type") == "tool_use" and b["input"].get("command") == command
    )


def test_observations_reach_the_model_from_the_first_repeat(claude: Path, tmp_path: Path) -> None:
    """Facts of past attempts reach the real Claude Code's model from the first repeat, with no
    ingest and no consolidation between the sessions (``MIMIR_AUTO_CONSOLIDATE=0``): the hooks
    read the signed attempts digest and the spool's tail.

    Session 1 ("deploy the billing service to staging") runs ``make deploy-staging`` (exit 2, no
    such target), then ``./scripts/deploy.sh staging billing`` (works); Mimir shows nothing, as
    nothing was tried before. Session 2 ("deploy billing to the staging environment": other
    words, the same task) gets:

    * in its first request, before any tool ran, the ``UserPromptSubmit`` context: a
      ``<mimir-memory>`` block naming the make command as failed here (with make's error) and
      the script as what worked instead;
    * when its model runs ``make deploy-staging`` again, the ``PreToolUse`` repeat guard
      (``failed here before on this task``). Claude Code 2.1.112 renders a hook's
      ``additionalContext`` as a ``<system-reminder>`` text ``PreToolUse:Bash hook additional
      context: <text>``, and delivers it in the user message that carries the tool's *result*
      (after the ``tool_result`` block): the model reads the guard after the command ran, in
      the next request, not before it runs. The failure that follows adds no second block (the
      guard said it), and the guard says nothing before the script that worked.

    No hook logged an error, and setup installed the ``PreToolUse`` hook for every tool.
    """
    home = tmp_path / "home"
    project = billing_project(home)
    env = claude_env(home, claude)
    assert env["MIMIR_AUTO_CONSOLIDATE"] == "0"
    mimir_cli(env, "setup", "claude-code")
    hooks = json.loads((home / ".claude" / "settings.json").read_text())["hooks"]
    assert hooks["PreToolUse"] == hooks["PostToolUse"], hooks  # the same Mimir hook command
    assert hooks["PreToolUse"][0]["matcher"] == "*"
    assert hooks["PreToolUse"][0]["hooks"][0]["command"].endswith("hook claude-code")

    with fake_model_server("anthropic") as server:
        first = deploy_session(
            claude, home, project, server, "deploy the billing service to staging"
        )
        second = deploy_session(
            claude, home, project, server, "deploy billing to the staging environment"
        )
    assert len(first) == len(second) == 3  # prompt, after make, after the script
    assert not any("<mimir-memory>" in json.dumps(body) for body in first)

    # (a) The first request of session 2, before any tool ran: the task-start observations.
    [prompt_message] = second[0]["messages"]
    injected = [t for t in texts(prompt_message) if "<mimir-memory>" in t]
    assert len(injected) == 1, texts(prompt_message)
    shown = injected[0]
    assert "UserPromptSubmit hook additional context: <mimir-memory>" in shown
    assert "Observed on tasks like this (facts from past attempts, not rules):" in shown
    assert f"- failed here: `{FAILING}` — 1 of 1 try, in 1 session; last error:" in shown
    assert MAKE_ERROR in shown
    assert f"- worked here instead: `{WORKING}` — 1 of 1 try, in 1 session" in shown
    assert texts(prompt_message)[-1] == "deploy billing to the staging environment"

    # (b) The request after the model ran make again: its result, then the repeat guard.
    make_id = tool_use_id(second, FAILING)
    after_make = second[1]["messages"][-1]
    blocks = after_make["content"]
    assert blocks[0]["type"] == "tool_result" and blocks[0]["tool_use_id"] == make_id
    assert blocks[0]["is_error"] and MAKE_ERROR in json.dumps(blocks[0]["content"])
    [guard] = [t for t in texts(after_make) if "PreToolUse:Bash hook additional context" in t]
    assert guard.startswith("<system-reminder>\nPreToolUse:Bash hook additional context: <mimir")
    assert f"- failed here before on this task: `{FAILING}` — 1 of 1 try, in 1 session" in guard
    assert "never worked" in guard and MAKE_ERROR in guard
    assert f"- worked instead on this task: `{WORKING}`" in guard
    after = [t for t in texts(after_make) if "<mimir-memory>" in t]
    # The failure's own note would say the same again: the guard already said it.
    assert after == [guard], after
    # The script that worked draws no guard: its result comes alone.
    after_script = second[2]["messages"][-1]
    assert tool_use_id(second, WORKING) == after_script["content"][0]["tool_use_id"]
    assert not [t for t in texts(after_script) if "<mimir-memory>" in t]

    hooks_log = home / ".mimir" / "logs" / "hooks.log"
    assert not hooks_log.exists(), hooks_log.read_text()[-3000:]
