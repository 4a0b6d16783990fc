"""The Hermes memory provider (``mimir_integrations.hermes``) on a real store, without Hermes.

Every method Hermes calls is exercised the way Hermes 0.19 calls it (see the reference notes),
including garbage: a provider method must never raise into Hermes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mimir_core import Mimir
from mimir_core.tools.specs import TOOLS
from mimir_integrations import hermes
from mimir_integrations.hermes import MimirMemoryProvider

TASK = "run the payments integration tests"
ERROR = 'E   UndefinedTable: relation "orders" does not exist'


def session(n: int, *, task: str = TASK) -> list[dict[str, Any]]:
    """The messages of one Hermes session: the tests fail, the migration fixes them."""

    def call(cid: str, command: str) -> dict[str, Any]:
        fn = {"name": "terminal", "arguments": json.dumps({"command": command})}
        return {"role": "assistant", "content": None, "tool_calls": [{"id": cid, "function": fn}]}

    def out(cid: str, output: str, code: int) -> dict[str, Any]:
        body = json.dumps({"output": output, "exit_code": code, "error": None})
        return {"role": "tool", "name": "terminal", "tool_call_id": cid, "content": body}

    return [
        {"role": "system", "content": "You are Hermes."},
        {"role": "user", "content": task},
        call(f"call_{n}a", "pytest tests/integration"),
        out(f"call_{n}a", ERROR, 1),
        call(f"call_{n}b", "alembic upgrade head && pytest tests/integration"),
        out(f"call_{n}b", "12 passed", 0),
        {"role": "assistant", "content": "Fixed: the migration had not run."},
    ]


@pytest.fixture
def hermes_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Hermes home; Mimir settings as Hermes' environment would have them."""
    monkeypatch.delenv("MIMIR_HOME", raising=False)
    monkeypatch.setenv("MIMIR_EMBEDDER", "hash")
    monkeypatch.setenv("MIMIR_AUTO_CONSOLIDATE", "0")
    return tmp_path / "hermes-home"


@pytest.fixture
def provider(hermes_home: Path) -> Iterator[MimirMemoryProvider]:
    p = MimirMemoryProvider()
    p.initialize("sess-1", hermes_home=str(hermes_home), platform="cli", agent_context="primary")
    yield p
    p.shutdown()


def settle(p: MimirMemoryProvider) -> None:
    """Wait until everything captured is stored (generous: CI machines can be slow)."""
    assert p._memory.live.flush(120)


def store(hermes_home: Path) -> Mimir:
    return Mimir(hermes_home / "mimir", embedder="hash", auto_consolidate=False)


# -- identity and lifecycle ----------------------------------------------------------------------


def test_name_and_availability_need_no_store(tmp_path: Path) -> None:
    p = MimirMemoryProvider()
    assert p.name == "mimir"
    assert p.is_available() is True
    assert not (tmp_path / "hermes-home").exists()


def test_storage_stays_under_the_hermes_home(
    provider: MimirMemoryProvider, hermes_home: Path, tmp_path: Path
) -> None:
    provider.sync_turn(TASK, "done", session_id="sess-1", messages=session(1))
    provider.on_session_end(session(1))
    settle(provider)
    assert (hermes_home / "mimir" / "store").is_dir()
    assert (hermes_home / "mimir" / "logs" / "hermes.log").exists()
    assert provider.backup_paths() == [str(hermes_home / "mimir")]
    assert store(hermes_home).stats().experiences == 2


def test_mimir_home_overrides_the_hermes_home(
    hermes_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIMIR_HOME", str(tmp_path / "elsewhere"))
    p = MimirMemoryProvider()
    p.initialize("s", hermes_home=str(hermes_home), agent_context="primary")
    p.on_session_end(session(1))
    settle(p)
    p.shutdown()
    assert (tmp_path / "elsewhere" / "store").is_dir()
    assert not (hermes_home / "mimir").exists()


def test_the_home_given_at_setup_is_read_from_the_plugin_folder(
    hermes_home: Path, tmp_path: Path
) -> None:
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "mimir.json").write_text(json.dumps({"home": str(tmp_path / "chosen")}))
    p = MimirMemoryProvider(plugin_dir=plugin)
    p.initialize("s", hermes_home=str(hermes_home))
    p.on_session_end(session(1))
    settle(p)
    p.shutdown()
    assert (tmp_path / "chosen" / "store").is_dir()


def test_system_prompt_block_names_the_tools(provider: MimirMemoryProvider) -> None:
    block = provider.system_prompt_block()
    assert "Mimir" in block and "recall_experiences" in block and "lesson_feedback" in block
    assert "<memory-context>" not in block and len(block) < 1500


# -- capture -------------------------------------------------------------------------------------


def test_sync_turn_records_the_failure_hidden_in_the_exit_code(
    provider: MimirMemoryProvider, hermes_home: Path
) -> None:
    provider.sync_turn(TASK, "Fixed.", session_id="sess-9", messages=session(1))
    settle(provider)
    m = store(hermes_home)
    exps = sorted(m.recent(10, scope="*"), key=lambda e: e.outcome)
    assert [e.outcome for e in exps] == ["failure", "success"]
    fail, ok = exps
    assert fail.task == TASK and fail.action == "pytest tests/integration"
    assert "does not exist" in fail.reason and fail.context["exit_code"] == 1
    assert ok.action == "alembic upgrade head && pytest tests/integration"
    for e in exps:
        assert e.source == "hermes" and e.session_id == "sess-9"
        assert e.scope == provider._memory.live.scope and e.context["host"] == "hermes"


def test_session_end_before_the_last_sync_turn_stores_each_attempt_once(
    provider: MimirMemoryProvider, hermes_home: Path
) -> None:
    # hermes -z: on_session_end, then the queued sync_turn, then shutdown
    history = session(1)[:-1] + session(2)[1:]
    provider.sync_turn(TASK, "x", session_id="sess-1", messages=session(1))
    provider.on_session_end(history)
    provider.sync_turn(TASK, "y", session_id="sess-1", messages=history)
    provider.queue_prefetch(TASK, session_id="sess-1")
    provider.shutdown()
    settle(provider)
    assert store(hermes_home).stats().experiences == 4


def test_records_survive_a_crash_before_they_were_stored(hermes_home: Path) -> None:
    from mimir_core.hosting.turns import turn_records
    from mimir_core.ingest import spool

    # A previous Hermes process spooled a turn and died before storing it.
    spool_dir = spool.spool_dir(hermes_home / "mimir")
    for record in turn_records(session(7), source="hermes"):
        spool.append(spool_dir, record)
    p = MimirMemoryProvider()
    p.initialize("next", hermes_home=str(hermes_home))
    settle(p)
    p.shutdown()
    assert store(hermes_home).stats().experiences == 2


def test_subagents_read_but_do_not_record(hermes_home: Path) -> None:
    p = MimirMemoryProvider()
    p.initialize("child", hermes_home=str(hermes_home), agent_context="subagent")
    p.sync_turn(TASK, "x", messages=session(1))
    p.on_session_end(session(1))
    assert p.prefetch(TASK) == ""
    p.shutdown()
    assert store(hermes_home).stats().experiences == 0


def test_pre_compress_captures_and_keeps_the_failures_in_the_summary(
    provider: MimirMemoryProvider, hermes_home: Path
) -> None:
    summary = provider.on_pre_compress(session(3))
    assert "pytest tests/integration" in summary and "does not exist" in summary
    settle(provider)
    assert store(hermes_home).stats().experiences == 2


def test_session_switch_changes_the_session_of_later_records(
    provider: MimirMemoryProvider, hermes_home: Path
) -> None:
    provider.on_session_switch("sess-2", parent_session_id="sess-1", reset=False)
    provider.on_session_end(session(4))
    settle(provider)
    assert {e.session_id for e in store(hermes_home).recent(5, scope="*")} == {"sess-2"}


# -- lessons in, evidence out --------------------------------------------------------------------


def test_prefetch_serves_learned_lessons_and_the_next_turn_names_them(
    provider: MimirMemoryProvider, hermes_home: Path
) -> None:
    assert provider.prefetch(TASK) == ""  # nothing learned yet
    for n in range(6):
        provider.sync_turn(TASK, "ok", session_id=f"s{n}", messages=session(n))
    settle(provider)
    report = store(hermes_home).consolidate(force=True)
    assert report.admitted, report
    text = provider.prefetch(TASK)
    assert text.startswith("<mimir-memory>") and "alembic upgrade head" in text
    assert "<memory-context>" not in text  # Hermes adds its own fence
    shown = [i for i in report.admitted if i in text]
    assert shown
    provider.sync_turn(TASK, "ok", session_id="s9", messages=session(9))
    settle(provider)
    latest = [e for e in store(hermes_home).recent(20, scope="*") if e.session_id == "s9"]
    assert latest and all(set(shown) <= set(e.recalled_lesson_ids) for e in latest)


def test_the_next_turn_after_a_failing_one_hears_what_failed_without_any_lesson(
    provider: MimirMemoryProvider, hermes_home: Path
) -> None:
    """From the first repeat: one session that failed then worked is enough for the next
    turn's memory context to name the failing command and what worked instead."""
    provider.sync_turn(TASK, "ok", session_id="s1", messages=session(1))
    settle(provider)
    text = provider.prefetch("get the payments integration tests passing")
    assert "- failed here: `pytest tests/integration` — 1 of 1 try, in 1 session" in text
    assert "worked here instead: `alembic upgrade head && pytest tests/integration`" in text
    assert 'relation "orders" does not exist' in text
    assert store(hermes_home).list_lessons() == []


def test_prefetch_while_the_store_loads_reads_the_digests(hermes_home: Path) -> None:
    """A host's first turn, before the store and model are ready: the signed digests answer
    with the same observations as a hook would give."""
    first = MimirMemoryProvider()
    first.initialize("a", hermes_home=str(hermes_home), platform="cli", agent_context="primary")
    first.sync_turn(TASK, "ok", session_id="a", messages=session(1))
    settle(first)
    first.shutdown()
    fresh = MimirMemoryProvider()
    fresh.initialize("b", hermes_home=str(hermes_home), platform="cli", agent_context="primary")
    text = fresh._memory.live._digest(TASK, 2000)
    assert "- failed here: `pytest tests/integration`" in text
    fresh.shutdown()


def test_prefetch_is_bounded_when_the_store_is_busy(
    provider: MimirMemoryProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    settle(provider)
    monkeypatch.setattr(hermes, "PREFETCH_TIMEOUT", 0.3)
    provider._memory.live._worker.submit(lambda: time.sleep(2.0))  # a long job ahead of it
    start = time.monotonic()
    assert provider.prefetch(TASK) == ""
    assert time.monotonic() - start < 1.5


def test_shutdown_starts_consolidation_when_it_is_due(
    hermes_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIMIR_AUTO_CONSOLIDATE", "1")
    monkeypatch.setenv("MIMIR_AUTO_CONSOLIDATE_HOURS", "0")
    monkeypatch.setenv("MIMIR_AUTO_CONSOLIDATE_FAILURES", "3")
    p = MimirMemoryProvider()
    p.initialize("s", hermes_home=str(hermes_home))
    # Six sessions: with four, whether the lesson passed the cross-fitted gate hung on which
    # fold (a hash of the record's idempotency key) each record fell in.
    for n in range(6):
        p.sync_turn(TASK, "ok", session_id=f"s{n}", messages=session(n))
    p.shutdown()
    log = hermes_home / "mimir" / "logs" / "consolidate.log"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        if "consolidated" in text or "failed" in text or "skipped" in text:
            break
        time.sleep(0.5)
    assert "consolidated" in log.read_text(), log.read_text()
    assert store(hermes_home).list_lessons(status="active")


# -- tools ---------------------------------------------------------------------------------------


def test_tool_schemas_render_every_core_tool(provider: MimirMemoryProvider) -> None:
    schemas = provider.get_tool_schemas()
    assert [s["name"] for s in schemas] == [t.name for t in TOOLS]
    for schema, spec in zip(schemas, TOOLS, strict=True):
        assert set(schema) == {"name", "description", "parameters"}
        assert schema["description"] == spec.description
        assert schema["parameters"]["type"] == "object"
        assert "title" not in schema["parameters"]


def test_tool_calls_answer_json_and_record_with_the_hermes_source(
    provider: MimirMemoryProvider, hermes_home: Path
) -> None:
    out = json.loads(
        provider.handle_tool_call(
            "record_failure",
            {"task": TASK, "action": "pytest -x", "reason": "ImportError: orders"},
        )
    )
    exp_id = out["data"]["experience"]["id"]
    assert "Recorded failure" in out["result"]
    recalled = json.loads(provider.handle_tool_call("recall_experiences", {"query": TASK}))
    assert exp_id in json.dumps(recalled["data"])
    assert store(hermes_home).get(exp_id).source == "hermes"


@pytest.mark.parametrize(
    ("name", "args", "needle"),
    [
        ("recall_experiences", {"query": "x", "k": 0}, "k"),
        ("recall_experiences", {}, "query"),
        ("record_experience", {"task": "t", "action": "a", "outcome": "great"}, "outcome"),
        ("no_such_tool", {}, "no_such_tool"),
        ("recall_experiences", "not a dict", "arguments"),
        ("recall_experiences", None, "query"),
        (None, {}, "None"),
    ],
)
def test_bad_tool_calls_come_back_as_errors_naming_the_problem(
    provider: MimirMemoryProvider, name: Any, args: Any, needle: str
) -> None:
    out = json.loads(provider.handle_tool_call(name, args))
    assert set(out) == {"error"} and needle in out["error"]


# -- never raise into Hermes ---------------------------------------------------------------------

GARBAGE: list[Any] = [
    None,
    0,
    -1,
    3.5,
    "",
    " ",
    "x" * 200_000,
    b"\xff\xfe",
    [],
    {},
    [None, 1, "two"],
    {"role": "user"},
    [{"role": "assistant", "tool_calls": [{"function": {"name": 5, "arguments": "{"}}]}],
    object(),
]


def _call_everything(p: MimirMemoryProvider, g: Any) -> None:
    p.system_prompt_block()
    p.prefetch(g)
    p.prefetch(g, session_id=g)
    p.queue_prefetch(g, session_id=g)
    p.sync_turn(g, g, session_id=g, messages=g)
    p.sync_turn(g, g)
    p.on_pre_compress(g)
    p.on_session_switch(g, parent_session_id=g, reset=g)
    p.handle_tool_call(g, g)
    p.handle_tool_call("recall_experiences", {"query": g})
    p.get_tool_schemas()
    p.backup_paths()


def test_garbage_before_initialize_never_raises() -> None:
    p = MimirMemoryProvider()
    for g in GARBAGE:
        _call_everything(p, g)
        p.on_session_end(g)
    p.shutdown()
    p.shutdown()


def test_garbage_after_initialize_never_raises(
    provider: MimirMemoryProvider, hermes_home: Path
) -> None:
    for g in GARBAGE:
        _call_everything(provider, g)
        provider.on_session_end(g)
    provider.shutdown()
    assert store(hermes_home).stats().experiences == 0


def test_garbage_initialize_never_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MIMIR_HOME", raising=False)
    monkeypatch.setenv("MIMIR_EMBEDDER", "hash")
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "env-hermes-home"))
    warnings: list[str] = []
    for kwargs in (
        {},
        {"hermes_home": None},
        {"hermes_home": 42, "agent_context": ["x"]},
        {"hermes_home": str(blocked)},  # the home cannot be created: memory is off
    ):
        p = MimirMemoryProvider()
        p.initialize(None, warning_callback=warnings.append, **kwargs)  # type: ignore[arg-type]
        assert isinstance(p.prefetch(TASK), str)
        p.on_session_end(session(1))
        settle(p)
        p.shutdown()
    assert (tmp_path / "env-hermes-home" / "mimir" / "store").is_dir()
    assert len(warnings) == 1 and warnings[0].startswith("Mimir memory is off")


def test_a_store_that_cannot_open_turns_memory_off_with_a_warning(
    hermes_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIMIR_STORE_URI", "unknown-scheme://nowhere/at/all")
    warnings: list[str] = []
    p = MimirMemoryProvider()
    p.initialize("s", hermes_home=str(hermes_home), warning_callback=warnings.append)
    assert p.prefetch(TASK) == ""
    assert "error" in json.loads(p.handle_tool_call("memory_stats", {}))
    p.on_session_end(session(1))
    p.shutdown()
    assert warnings and warnings[0].startswith("Mimir memory is off")


def test_the_provider_never_imports_mcp(tmp_path: Path) -> None:
    # hermes-agent[mcp] pins an older mcp than Mimir's server needs: the provider must not care.
    code = f"""
import importlib.abc, json, os, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] == 'mcp':
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
os.environ.update(MIMIR_EMBEDDER='hash', MIMIR_AUTO_CONSOLIDATE='0')
os.environ.pop('MIMIR_HOME', None)
from mimir_integrations.hermes import MimirMemoryProvider
p = MimirMemoryProvider()
p.initialize('s', hermes_home={str(tmp_path)!r})
p.system_prompt_block(); p.get_tool_schemas(); p.prefetch('run the tests')
p.sync_turn('run the tests', 'ok', messages={session(1)!r})
out = json.loads(p.handle_tool_call('memory_stats', {{}}))
p.on_session_end([]); p.shutdown()
print(json.dumps([out.get('error'), sorted(m for m in sys.modules if m.startswith('mcp'))]))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [None, []]


def test_a_history_seen_again_is_not_spooled_again(
    provider: MimirMemoryProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    spooled: list[int] = []
    capture = provider._memory.live.capture
    monkeypatch.setattr(
        provider._memory.live,
        "capture",
        lambda records: spooled.append(len(records)) or capture(records),
    )
    history = session(1)[:-1] + session(2)[1:]
    provider.sync_turn(TASK, "x", messages=session(1))
    provider.on_session_end(history)  # the first turn again, and a new one
    provider.sync_turn(TASK, "y", messages=history)  # the new turn again
    assert spooled == [2, 2, 0]


def test_a_turn_that_could_not_be_spooled_is_captured_again_at_session_end(
    provider: MimirMemoryProvider, hermes_home: Path, tmp_path: Path
) -> None:
    live = provider._memory.live
    spool_dir = live.spool_dir
    live.spool_dir = tmp_path / "not-a-dir"
    live.spool_dir.write_text("a file where the spool should be")
    provider.sync_turn(TASK, "Fixed.", session_id="sess-1", messages=session(1))  # fails open
    live.spool_dir = spool_dir
    provider.on_session_end(session(1))
    provider.shutdown()
    settle(provider)
    outcomes = sorted(e.outcome for e in store(hermes_home).recent(10, scope="*"))
    assert outcomes == ["failure", "success"]


def test_records_are_redacted_before_they_reach_the_spool(
    hermes_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The store cannot open, so the spooled lines stay on disk for the test to read.
    monkeypatch.setenv("MIMIR_STORE_URI", "unknown-scheme://nowhere/at/all")
    token = "ghp_" + "a1B2c3D4e5" * 4
    p = MimirMemoryProvider()
    p.initialize("s", hermes_home=str(hermes_home))
    p.on_session_end(
        [
            {"role": "user", "content": f"push the release with {token}"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "function": {
                            "name": "terminal",
                            "arguments": json.dumps({"command": f"git push https://{token}@x/y"}),
                        },
                    }
                ],
            },
            {
                "role": "tool",
                "name": "terminal",
                "tool_call_id": "c1",
                "content": json.dumps({"output": "denied", "exit_code": 1, "error": None}),
            },
        ]
    )
    p.shutdown()
    files = [f for f in p._memory.live.spool_dir.rglob("*") if f.is_file()]
    spooled = b"".join(f.read_bytes() for f in files)
    assert b"[REDACTED:github_token]" in spooled and token.encode() not in spooled
