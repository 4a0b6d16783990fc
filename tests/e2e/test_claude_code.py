"""The real Claude Code CLI (2.1.112, pure JS on Node) with Mimir set up by ``mimir setup``.

Claude Code talks to a fake Anthropic Messages server on 127.0.0.1 (no network) in a sandboxed
HOME. Proven here: a failing tool call becomes a failure experience in the store, a lesson
reaches the model's request as injected context, the plugin validates, and ``mimir uninstall``
removes exactly what setup added.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
