"""Deletion for privacy requests, beyond test_forget_really_removes_the_text in
tests/unit/test_memory.py (experiences: gone from every file, older table versions and indexes
included) and tests/unit/test_lessons_api.py (lessons and the audit entries quoting them): the
derived copies (the hooks' lessons digest, the spool an experience came through) forget it too."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from mimir_core import Mimir
from mimir_core.lessons.lifecycle import insert
from mimir_core.types import Lesson
from tests.security.helpers import run_hook_inprocess

WORD = "zanzibarquokka"


def on_disk(home: Path, word: str) -> str:
    found = subprocess.run(["grep", "-rlai", word, str(home)], capture_output=True, text=True)
    return found.stdout


def test_forget_reaches_the_digest_and_old_versions(home: Path) -> None:
    m = Mimir(home, embedder="hash", auto_consolidate=False)
    try:
        for i in range(10):
            m.record(f"ordinary task {i}", f"ordinary action {i}", "success")
        e = m.record(f"deploy the {WORD} service", "make deploy", "failure", reason=f"{WORD} down")
        lesson = Lesson(
            id="les_deploy",
            rule="Run make migrate before make deploy.",
            trigger="deploy the service",
            status="active",
            supporting_ids=[e.id],
            confidence=0.7,
        )
        insert(m.deps, [lesson], actor="t", event="admitted")
        assert on_disk(home, WORD)  # in the store and in the digest's topic keywords
        m.forget(e.id)
        assert on_disk(home, WORD) == "", "forgotten text still on disk"
    finally:
        m.close()


def test_forget_reaches_what_came_through_the_spool(home: Path) -> None:
    payload = {
        "session_id": "s1",
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash",
        "tool_input": {"command": f"deploy-{WORD} --now"},
        "error": f"Exit code 1\n{WORD} refused",
    }
    run_hook_inprocess(home, ["claude-code"], json.dumps(payload).encode())
    m = Mimir(home, embedder="hash", auto_consolidate=False)
    try:
        assert m.ingest().ingested >= 1
        ids = [e.id for e in m.recent(10) if WORD in e.action]
        assert ids
        for ident in ids:
            m.forget(ident)
        assert on_disk(home, WORD) == "", "forgotten text still on disk"
    finally:
        m.close()
