"""``LiveMemory``: a Mimir opened in the background, bounded calls, capture through the spool."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from mimir_core.hosting.background import LiveMemory
from mimir_core.ingest import spool
from mimir_core.ingest.capture.events import lesson_ids
from mimir_core.settings import MimirSettings
from mimir_core.tools.digest import render_block


def settings(home: Path, **kw: object) -> MimirSettings:
    return MimirSettings(home=home, embedder="hash", auto_consolidate=False, **kw)


RECORD = {
    "task": "run the api tests",
    "action": "pytest tests/api",
    "outcome": "failure",
    "reason": "relation orders does not exist",
    "idempotency_key": "live-test-1",
}


def test_lesson_ids_reads_the_core_rendering() -> None:
    block = render_block(
        [
            {"id": "les_a1", "kind": "avoid", "confidence": 0.8, "rule": "never `rm -rf /`"},
            {"id": "les_b2", "kind": "prefer", "confidence": 0.7, "rule": "run alembic first"},
        ]
    )
    assert lesson_ids(block) == ["les_a1", "les_b2"]
    assert lesson_ids("") == [] and lesson_ids("- [not a lesson line") == []


def test_capture_is_durable_and_stored_once(tmp_path: Path) -> None:
    live = LiveMemory(settings(tmp_path / "home"))
    assert live.capture([RECORD, RECORD]) == ["live-test-1", "live-test-1"]  # both spooled
    assert live.flush(30)
    assert live.call(lambda m: m.stats().experiences, 30) == 1
    assert not spool.has_pending(live.spool_dir)


def test_calls_are_bounded_and_say_why(tmp_path: Path) -> None:
    live = LiveMemory(settings(tmp_path / "home"))
    assert live.flush(30) and live.ready
    gate = threading.Event()
    live.call(lambda m: None, 5)
    live._worker.submit(gate.wait)  # the worker is busy with a long job
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"did not answer within 0\.2s"):
        live.call(lambda m: m.stats(), 0.2)
    assert not live.flush(0.2)
    assert time.monotonic() - start < 2
    gate.set()
    assert live.flush(30)


def test_a_store_that_cannot_open_is_reported_and_captures_stay_spooled(tmp_path: Path) -> None:
    messages: list[str] = []
    blocked = tmp_path / "file"
    blocked.write_text("x")
    live = LiveMemory(
        settings(tmp_path / "home", store_uri=str(blocked / "store")), on_error=messages.append
    )
    live.capture([RECORD])
    assert live.flush(30)  # nothing to do: the store is not open
    assert messages and messages[0].startswith("Mimir memory is off")
    assert live.error and not live.ready
    with pytest.raises(RuntimeError, match="not available"):
        live.call(lambda m: m.stats(), 5)
    assert spool.has_pending(live.spool_dir)  # kept for the next process that can store it


def test_finish_never_raises(tmp_path: Path) -> None:
    live = LiveMemory(settings(tmp_path / "home"))
    live.capture([RECORD])
    assert live.finish(timeout=30) is True
    assert live.call(lambda m: m.stats().experiences, 30) == 1


class SlowToOpen(LiveMemory):
    """A LiveMemory whose store opens only when the test says so (a host's first turn)."""

    gate = threading.Event()

    def _open(self) -> None:
        self.gate.wait(60)
        super()._open()


def test_the_digest_answers_while_the_store_is_still_opening(tmp_path: Path) -> None:
    from mimir_core.tools.digest import write_digest

    home = tmp_path / "home"
    key = b"k" * 32
    lesson = {
        "id": "les_digest1",
        "kind": "prefer",
        "confidence": 0.8,
        "trigger": "run the payments integration tests",
        "rule": "Run `alembic upgrade head` before the payments integration tests.",
    }
    write_digest(home, [lesson], key)
    SlowToOpen.gate.clear()
    live = SlowToOpen(settings(home, signing_key=key.decode()))
    try:
        start = time.monotonic()
        text, ids = live.context("run the payments integration tests", 5)
        assert time.monotonic() - start < 1 and not live.ready
        assert ids == ["les_digest1"] and "alembic upgrade head" in text
        with pytest.raises(TimeoutError):  # nothing in the digest: it waits for the store
            live.context("format the billing report", 0.2)
    finally:
        SlowToOpen.gate.set()
    assert live.flush(60) and live.ready
    assert live.context("format the billing report", 30) == ("", [])
