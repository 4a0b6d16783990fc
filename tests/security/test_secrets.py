"""Secrets never reach the store, the embedder, the logs or an answer.

Every entry of the secrets corpus (tests/data/secrets_corpus.json: fake, format-correct secrets
of 60+ kinds in realistic text) goes in as tool input and as tool output through three doors:
the Claude Code and Cline hooks (spooled, then ingested), the Python API, and the MCP record
tools. Afterwards no fragment of any secret is in any file under the home (store tables, their
older versions and indexes, spool, logs), in any text handed to the embedder, on stderr, or in
what recall returns. ``<private>`` spans and user patterns (``MIMIR_REDACT_PATTERNS``) likewise.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mimir_core import Mimir
from mimir_core.settings import MimirSettings
from tests.security.helpers import (
    FAILED_CALL,
    SECRETS,
    MCPSession,
    RecordingEmbedder,
    files_blob,
    leaks,
    run_hook_inprocess,
)

ALL = [e["secret"] for e in SECRETS]
PRIVATE = "zebra-quokka-private-7731"
CANARY = "okapicanary"  # non-secret text that must arrive, proving the texts were stored
# Queries that find the stored records (a query holding a secret would only echo the caller's
# own text back, which proves nothing about the store).
QUERIES = [f"{CANARY} deploy step {i}" for i in range(0, len(SECRETS), 5)] + [
    "export AWS access key credentials",
    "Authorization Bearer token curl",
    "password database connection url",
    "private key BEGIN",
]


def cc_payloads(i: int, text: str) -> list[dict[str, Any]]:
    base = {"session_id": f"s{i}", "transcript_path": "/t.jsonl", "cwd": "/repo/app"}
    return [
        {**base, "hook_event_name": "UserPromptSubmit", "prompt": f"{CANARY} deploy step {i}"},
        {
            **base,
            "hook_event_name": "PostToolUseFailure",
            "tool_name": "Bash",
            "tool_input": {"command": f"{CANARY}{i} {text}"},
            "tool_use_id": f"t{i}a",
            "error": f"Exit code 1\n{text}\n<private>{PRIVATE}</private>",
        },
        {
            **base,
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": f"retry {text}"},
            "tool_use_id": f"t{i}b",
            "tool_response": {"stdout": text, "stderr": "", "interrupted": False},
        },
        {**base, "hook_event_name": "Stop", "stop_hook_active": False},
    ]


def cline_payloads(i: int, text: str) -> list[dict[str, Any]]:
    base = {"taskId": f"c{i}", "clineVersion": "3.40.0", "timestamp": "1", "workspaceRoots": []}
    return [
        {**base, "hookName": "UserPromptSubmit", "userPromptSubmit": {"prompt": f"deploy {i}"}},
        {
            **base,
            "hookName": "PostToolUse",
            "postToolUse": {
                "toolName": "execute_command",
                "parameters": {"command": f"{CANARY}{i} {text}"},
                "result": f"Command failed with exit code 1\n{text}",
                "success": False,
                "executionTimeMs": 5,
            },
        },
    ]


@pytest.fixture(autouse=True)
def _verbose_logs() -> Any:
    """Log everything while secrets flow (a leak into a debug line counts too)."""
    logger = logging.getLogger("mimir")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    yield
    logger.setLevel(level)


def check_no_leak(home: Path, emb: RecordingEmbedder, *answers: str) -> None:
    blob = files_blob(home)
    assert CANARY.encode() in blob, "nothing was stored: the test would prove nothing"
    assert leaks(ALL, blob) == [], "secret stored on disk"
    assert PRIVATE.encode() not in blob
    stored = emb.seen[: emb.mark]  # what was embedded for storage (queries come after)
    assert stored and leaks(ALL, "\n".join(stored)) == [], "secret embedded"
    assert leaks(ALL, "\n".join(answers)) == [], "secret returned"


def test_hook_payloads_leak_nothing(home: Path, capfd: pytest.CaptureFixture[str]) -> None:
    outputs: list[str] = []
    for i, e in enumerate(SECRETS):
        for payload in cc_payloads(i, e["text"]):
            rc, out = run_hook_inprocess(home, ["claude-code"], json.dumps(payload).encode())
            assert rc == 0
            outputs.append(out)
        for payload in cline_payloads(i, e["text"]):
            rc, out = run_hook_inprocess(home, ["cline"], json.dumps(payload).encode())
            assert rc == 0
            outputs.append(out)
        # a broken payload carrying the secret: logged as an error, without the secret
        run_hook_inprocess(home, ["claude-code"], b'{"prompt": "' + e["text"].encode())
    spooled = files_blob(home)  # before the drain: the spool itself
    assert leaks(ALL, spooled) == [] and PRIVATE.encode() not in spooled
    emb = RecordingEmbedder()
    m = Mimir(home, embedder=emb, auto_consolidate=False)
    try:
        report = m.ingest()
        assert report.ingested >= len(SECRETS)
        emb.mark = len(emb.seen)
        recalled = [h.model_dump_json() for q in QUERIES for h in m.recall(q, k=10)]
    finally:
        m.close()
    err = capfd.readouterr()
    check_no_leak(home, emb, *outputs, *recalled, err.out, err.err)


def test_api_records_leak_nothing(home: Path, capfd: pytest.CaptureFixture[str]) -> None:
    emb = RecordingEmbedder()
    m = Mimir(home, embedder=emb, auto_consolidate=False)
    answers: list[str] = []
    try:
        for i, e in enumerate(SECRETS):
            text = e["text"]
            m.record(
                f"{CANARY} deploy step {i}",
                text,
                "failure",
                reason=f"{text} <private>{PRIVATE}</private>",
                context={"stdout": text, "env": {"API_TOKEN": e["secret"]}, "n": i},
            )
        m.record_many(
            [
                {"task": f"batch {i}", "action": e["text"], "outcome": "partial"}
                for i, e in enumerate(SECRETS)
            ]
        )
        emb.mark = len(emb.seen)
        for q in QUERIES:
            answers += [h.model_dump_json() for h in m.recall(q, k=10)]
            answers.append(repr(m.recommend(q)))
        answers += [x.model_dump_json() for x in m.recent(50)]
    finally:
        m.close()
    err = capfd.readouterr()
    check_no_leak(home, emb, *answers, err.out, err.err)


def test_mcp_record_tools_leak_nothing(home: Path, capfd: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mcp")
    emb = RecordingEmbedder()
    m = Mimir(home, embedder=emb, auto_consolidate=False)
    answers: list[str] = []
    try:
        with MCPSession(m) as s:
            for i, e in enumerate(SECRETS):
                text = e["text"]
                answers.append(
                    s.call(
                        "record_failure",
                        {"task": f"{CANARY} step {i}", "action": text, "reason": text},
                    )[0]
                )
                answers.append(
                    s.call(
                        "record_experience",
                        {
                            "task": f"ship {i}",
                            "action": f"retry {text}",
                            "outcome": "success",
                            "reason": f"<private>{PRIVATE}</private>",
                            "context": {"output": text},
                        },
                    )[0]
                )
            emb.mark = len(emb.seen)
            for q in QUERIES:
                answers.append(s.call("recall_experiences", {"query": q, "k": 10})[0])
            answers.append(s.call("recent_experiences", {"n": 50})[0])
    finally:
        m.close()
    err = capfd.readouterr()
    check_no_leak(home, emb, *answers, err.out, err.err)


def test_user_patterns_from_settings_are_redacted(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIMIR_REDACT_PATTERNS", json.dumps([r"ACME-\d{6}", r"proj-[a-z]{8}"]))
    monkeypatch.setenv("MIMIR_HOME", str(home))
    emb = RecordingEmbedder()
    m = Mimir.from_settings(MimirSettings(), embedder=emb, auto_consolidate=False)
    try:
        m.record(
            f"{CANARY} rotate ticket ACME-443322",
            "deploy proj-qwertyui",
            "failure",
            reason="ACME-443322 still open",
            context={"ticket": "ACME-443322"},
        )
        emb.mark = len(emb.seen)
        got = [h.model_dump_json() for h in m.recall("rotate ticket")]
    finally:
        m.close()
    blob = files_blob(home)
    assert CANARY.encode() in blob
    for value in ("ACME-443322", "proj-qwertyui"):
        assert value.encode() not in blob and value not in "".join(emb.seen + got)


def test_a_bad_user_pattern_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIMIR_REDACT_PATTERNS", json.dumps(["(unclosed"]))
    with pytest.raises(ValueError, match="unclosed"):
        MimirSettings()


def test_user_patterns_reach_the_hook_before_the_spool(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook applies the user's patterns itself: nothing waits in the spool unredacted."""
    monkeypatch.setenv("MIMIR_REDACT_PATTERNS", json.dumps([r"ACME-\d{6}"]))
    payload = {
        "session_id": "s1",
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash",
        "tool_input": {"command": "close-ticket ACME-443322", "description": "ticket ACME-443322"},
        "error": "Exit code 1\nACME-443322 is locked",
    }
    rc, _ = run_hook_inprocess(home, ["claude-code"], json.dumps(payload).encode())
    assert rc == 0
    blob = files_blob(home)
    assert b"close-ticket" in blob  # captured, into the spool
    assert b"ACME-443322" not in blob


def test_a_bad_user_pattern_never_breaks_the_hook(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIMIR_REDACT_PATTERNS", '["(unclosed"]')
    rc, out = run_hook_inprocess(home, ["claude-code"], json.dumps(FAILED_CALL).encode())
    assert rc == 0 and out == ""
    assert b"make deploy" in files_blob(home)
    assert "MIMIR_REDACT_PATTERNS" in (home / "logs" / "hooks.log").read_text()


# Bare secrets (no key name in front) of the review's finding 5, and a secret split between
# the task and the action (each half a random token of its own).
BARE = [e for e in SECRETS if e["kind"] in ("high_entropy", "basic_auth", "gcp_api_key")]
SPLIT = ("Jq8v2NcX7pLr4TzW9bYd3KJq", "6gMs1AeUo5RiZt0VxCnEyPw")
MIMIR_BIN = str(Path(sys.executable).parent / "mimir")


def _hook_env(home: Path) -> dict[str, str]:
    env = {"MIMIR_HOME": str(home), "MIMIR_AUTO_CONSOLIDATE": "0", "MIMIR_EMBEDDER": "hash"}
    return {**os.environ, **env}


def test_bare_secrets_never_reach_spool_meta_store_or_export(home: Path) -> None:
    """A real ``mimir hook`` subprocess, the API's ``record`` and ``record_failure``, then
    ``mimir export``: no bare secret, whole or in part, in any file, the session's
    ``meta.json`` (checked while the episode is open) or the export."""
    assert len(BARE) >= 8
    secrets = [e["secret"] for e in BARE] + list(SPLIT)
    for i, e in enumerate(BARE):
        base = {"session_id": f"bare{i}", "transcript_path": "/t.jsonl", "cwd": "/repo/app"}
        for payload in (
            {**base, "hook_event_name": "UserPromptSubmit", "prompt": f"{CANARY} {e['text']}"},
            {
                **base,
                "hook_event_name": "PostToolUse",
                "tool_name": "Bash",
                "tool_input": {"command": f"deploy {e['text']}"},
                "tool_use_id": f"b{i}",
                "tool_response": {"stdout": e["text"], "stderr": "", "interrupted": False},
            },
            {
                **base,
                "hook_event_name": "PostToolUseFailure",
                "tool_name": "Bash",
                "tool_input": {"command": f"retry {e['text']}"},
                "tool_use_id": f"c{i}",
                "error": f"Exit code 1\n{e['text']}",
            },
        ):
            proc = subprocess.run(
                [MIMIR_BIN, "hook", "claude-code"],
                input=json.dumps(payload).encode(),
                capture_output=True,
                timeout=60,
                env=_hook_env(home),
            )
            assert proc.returncode == 0 and proc.stdout == b"", proc.stderr
            assert leaks(secrets, proc.stderr) == []
    metas = list(home.rglob("meta.json"))
    assert metas, "no open episode: meta.json was not checked"
    assert CANARY.encode() in files_blob(home)
    assert leaks(secrets, files_blob(home)) == [], "secret in the spool or a session's meta"
    m = Mimir(home, embedder=RecordingEmbedder(), auto_consolidate=False)
    try:
        m.ingest()
        for i, e in enumerate(BARE):
            m.record(f"{CANARY} step {i}", e["text"], "success", reason=e["text"])
            m.record_failure(f"{CANARY} fail {i}", f"retry {e['text']}", reason=e["text"])
        m.record(f"{CANARY} deploy with {SPLIT[0]}", f"{SPLIT[1]} then restart", "success")
    finally:
        m.close()
    proc = subprocess.run(
        [MIMIR_BIN, "export", "--home", str(home), "-o", "-"],
        capture_output=True,
        timeout=120,
        env=_hook_env(home),
    )
    assert proc.returncode == 0, proc.stderr
    assert CANARY.encode() in proc.stdout
    assert leaks(secrets, proc.stdout) == [], "secret in the export"
    assert leaks(secrets, files_blob(home)) == [], "secret in the store"
