"""The real Claude Code CLI (2.1.112) as an MCP client of ``mimir-mcp``.

``claude mcp add`` registers the server, ``claude mcp list`` connects to it (the MCP handshake,
offline), and a headless ``claude -p`` run against a fake Anthropic server on 127.0.0.1 calls
the tools: a record lands in the store, and a bad argument reaches the model as an error
result carrying the real message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_models import fake_model_server
from npm_tools import node_missing_reason, npm_tool

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def claude() -> Path:
    reason = node_missing_reason()
    if reason:
        pytest.skip(reason)
    exe = npm_tool("@anthropic-ai/claude-code", "2.1.112", "claude")
    assert exe is not None
    return exe


def env_for(home: Path, claude: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": f"{claude.parent}:{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        **extra,
    }


def server_command() -> list[str]:
    script = BIN / "mimir-mcp"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "mimir_integrations.cli_mcp"]


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=240)


def test_claude_code_connects_and_calls_the_tools(claude: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = home / "shop"
    (project / ".git").mkdir(parents=True)
    mimir_home = home / ".mimir"
    env = env_for(home, claude)

    added = run(
        [
            str(claude),
            "mcp",
            "add",
            "mimir",
            "-e",
            f"MIMIR_HOME={mimir_home}",
            "-e",
            "MIMIR_EMBEDDER=hash",
            "--",
            *server_command(),
        ],
        env,
        project,
    )
    assert added.returncode == 0, added.stderr
    listed = run([str(claude), "mcp", "list"], env, project)
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith("mimir:"))
    assert "✓ Connected" in line, listed.stdout

    task = "run the checkout service tests"
    record = {"task": task, "action": "make test", "reason": "redis connection refused"}
    with fake_model_server("anthropic") as server:
        model_env = env_for(
            home, claude, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-ant-fake"
        )
        calls = [
            ("record_failure", record),
            ("recall_experiences", {"query": task, "k": 0}),
        ]
        for tool, args in calls:
            # A headless run does not always wait for MCP servers that are still starting (on a
            # busy machine): the first request then offers no mcp__ tools. Run it again.
            for _attempt in range(4):
                out = run(
                    [
                        str(claude),
                        "-p",
                        f"CALL:mcp__mimir__{tool} ARGS={json.dumps(args)}",
                        "--allowedTools",
                        "mcp__mimir",
                        "--output-format",
                        "json",
                    ],
                    model_env,
                    project,
                )
                assert out.returncode == 0, out.stderr[-2000:]
                if "(no tool mcp__mimir__" not in json.loads(out.stdout)["result"]:
                    break
        results = [
            block
            for r in server.requests
            if "/v1/messages" in r["path"]
            for msg in r["body"].get("messages", [])
            if isinstance(msg.get("content"), list)
            for block in msg["content"]
            if block.get("type") == "tool_result"
        ]
        offered = {t["name"] for r in server.requests for t in r["body"].get("tools", []) or []}
    assert {"mcp__mimir__record_failure", "mcp__mimir__recall_experiences"} <= offered
    # Claude Code 2.1.112 hands the model the structured content (JSON), not the text rendering.
    texts = [json.dumps(b.get("content")) for b in results]
    assert any("redis connection refused" in t and "experience" in t for t in texts), texts
    errors = [b for b in results if b.get("is_error")]
    assert errors and "k: must be an integer from 1 to 100; got 0" in json.dumps(errors[0])

    from mimir_core import Mimir

    m = Mimir(mimir_home, embedder="hash")
    [exp] = m.recent(5, scope="*")
    assert (exp.task, exp.action, exp.source) == (task, "make test", "mcp")
    assert exp.scope == str(project.resolve())  # the project Claude Code started the server in
    m.close()


def test_claude_code_connects_over_http_with_a_token(claude: Path, tmp_path: Path) -> None:
    import socket
    import time

    home = tmp_path / "home"
    project = home / "shop"
    (project / ".git").mkdir(parents=True)
    token = "claude-code-test-token-0123456789"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server_env = dict(os.environ, MIMIR_HOME=str(home / ".mimir"), MIMIR_EMBEDDER="hash")
    proc = subprocess.Popen(
        [*server_command(), "--http", "--port", str(port), "--token", token],
        env=server_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        env = env_for(home, claude)
        url = f"http://127.0.0.1:{port}/mcp"
        for name, header in [("mimir", f"Authorization: Bearer {token}"), ("nokey", "X-A: b")]:
            cmd = [str(claude), "mcp", "add", "--transport", "http", name, url, "--header", header]
            assert run(cmd, env, project).returncode == 0
        listed = run([str(claude), "mcp", "list"], env, project)
        lines = {x.split(":")[0]: x for x in listed.stdout.splitlines() if ": http" in x}
        assert "✓ Connected" in lines["mimir"], listed.stdout
        assert "✓ Connected" not in lines["nokey"], listed.stdout
    finally:
        proc.terminate()
        proc.wait(timeout=30)
