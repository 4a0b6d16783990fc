"""Every host boundary on arbitrary input.

* Hooks (Claude Code, Cline, a config mapping): arbitrary bytes or JSON on stdin → exit 0, and
  stdout is empty or one JSON object of the host's protocol; the parsers either give an event or
  raise ``ValueError`` (which the runner logs as a bad payload), and the runner never logs an
  unexpected exception. Most examples run in process; a handful through the real ``mimir hook``.
* MCP: every tool with arbitrary argument dicts → a result (an error result with a message for
  bad arguments), never a protocol failure; the session stays usable.
* Hermes: every lifecycle callback with arbitrary payloads → never raises.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mimir_core.ingest.capture import HookMapping
from mimir_integrations.claude_code.payload import from_claude_code
from mimir_integrations.cline.payload import from_cline
from tests.property.conftest import PROPS, json_texts, json_values, texts, values
from tests.security.helpers import MCPSession, run_hook_inprocess

BIN = Path(sys.executable).parent
MAPPING = {
    "host": "my-agent",
    "session": "sid",
    "cwd": "dir",
    "events": [
        {"when": {"ev": "ask"}, "kind": "task", "text": "q", "inject": True},
        {"when": {"ev": "ran"}, "kind": "tool", "tool": "name", "input": "cmd", "error": "err"},
    ],
    "reply": {"field": "context"},
}
CC_EVENTS = [
    "UserPromptSubmit",
    "PostToolUse",
    "PostToolUseFailure",
    "SessionStart",
    "SessionEnd",
    "PreCompact",
    "Stop",
]
CLINE_HOOKS = ["UserPromptSubmit", "TaskStart", "TaskResume", "PreToolUse", "PostToolUse"]

# Payloads shaped like the hosts' (right keys, arbitrary values) and entirely arbitrary ones.
cc_payloads = st.fixed_dictionaries(
    {"hook_event_name": st.one_of(st.sampled_from(CC_EVENTS), values)},
    optional={
        "session_id": values,
        "cwd": values,
        "prompt": st.one_of(texts, values),
        "tool_name": st.one_of(st.just("Bash"), values),
        "tool_input": values,
        "tool_response": values,
        "error": values,
        "tool_use_id": values,
    },
)
cline_payloads = st.fixed_dictionaries(
    {"hookName": st.one_of(st.sampled_from(CLINE_HOOKS), values)},
    optional={
        "taskId": values,
        "workspaceRoots": values,
        "userPromptSubmit": values,
        "preToolUse": values,
        "postToolUse": st.one_of(
            values, st.fixed_dictionaries({}, optional={"toolName": values, "success": values})
        ),
        "tool_result": values,
        "tool_call": values,
    },
)
map_payloads = st.fixed_dictionaries(
    {"ev": st.one_of(st.sampled_from(["ask", "ran"]), values)},
    optional={"sid": values, "dir": values, "q": values, "cmd": values, "err": values},
)
raw_bytes = st.one_of(
    st.binary(max_size=200),
    st.sampled_from([b"", b"null", b"[]", b"{", b'"x"', b"\xff\xfe", b'{"a": NaN}', b"1e999"]),
    st.builds(lambda v: json.dumps(v, default=str).encode(), values),
)


@pytest.fixture(scope="module")
def hook_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mimir_core.lessons.sign import load_or_create_key
    from mimir_core.tools.digest import write_digest

    home = tmp_path_factory.mktemp("hooks") / "home"
    lesson = {
        "id": "feedc0de12345678",
        "rule": "Run alembic upgrade head before the payments integration tests.",
        "trigger": "run the payments integration tests",
        "kind": "procedure",
        "confidence": 0.8,
    }
    write_digest(home, [lesson], load_or_create_key(home))  # so that some hooks answer
    (home.parent / "map.json").write_text(json.dumps(MAPPING))
    return home


def _log(home: Path) -> str:
    path = home / "logs" / "hooks.log"
    return path.read_text() if path.exists() else ""


def check_answer(args: list[str], out: str) -> None:
    if not out:
        return
    answer = json.loads(out)  # one JSON object, nothing else
    assert isinstance(answer, dict)
    if args[0] == "claude-code":
        assert set(answer) <= {"hookSpecificOutput", "systemMessage", "continue"}
    elif args[0] == "cline":
        assert answer.get("cancel", False) is False  # never cancels the user's task
    else:
        assert set(answer) == {"context"}


def run_inprocess(home: Path, args: list[str], raw: bytes) -> None:
    before = len(_log(home))
    rc, out = run_hook_inprocess(home, args, raw)
    assert rc == 0
    check_answer(args, out)
    # an unexpected exception is logged with its traceback: none may happen
    assert "Traceback" not in _log(home)[before:] and 'File "' not in _log(home)[before:]


@PROPS
@given(payload=cc_payloads)
def test_claude_code_hook(hook_home: Path, payload: dict[str, Any]) -> None:
    run_inprocess(hook_home, ["claude-code"], json.dumps(payload, default=str).encode())


@PROPS
@given(payload=cline_payloads)
def test_cline_hook(hook_home: Path, payload: dict[str, Any]) -> None:
    run_inprocess(hook_home, ["cline"], json.dumps(payload, default=str).encode())


@PROPS
@given(payload=map_payloads)
def test_config_mapping_hook(hook_home: Path, payload: dict[str, Any]) -> None:
    args = ["--config", str(hook_home.parent / "map.json")]
    run_inprocess(hook_home, args, json.dumps(payload, default=str).encode())


@PROPS
@given(raw=raw_bytes, host=st.sampled_from(["claude-code", "cline", "config"]))
def test_any_bytes_on_stdin(hook_home: Path, raw: bytes, host: str) -> None:
    args = ["--config", str(hook_home.parent / "map.json")] if host == "config" else [host]
    run_inprocess(hook_home, args, raw)


@PROPS
@given(payload=st.one_of(cc_payloads, cline_payloads, map_payloads, st.dictionaries(texts, values)))
def test_parsers_give_an_event_or_a_value_error(payload: Any) -> None:
    # (the runner hands them JSON objects only: anything else is refused before)
    mapping = HookMapping.from_dict(MAPPING)
    for parse in (from_claude_code, from_cline, mapping.event):
        try:
            parse(payload)
        except ValueError:
            pass


@pytest.mark.parametrize(
    ("args", "raw"),
    [
        (["claude-code"], b"\xff\x00garbage"),
        (
            ["claude-code"],
            json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": 7}).encode(),
        ),
        (["cline"], b'{"hookName": ["x"], "taskId": {"a": null}}'),
        (["cline"], b"[1, 2, 3]"),
        (["--config", "MAP"], b'{"ev": "ask", "q": {"deep": [1, 2]}}'),
        (["--config", "/nonexistent/map.json"], b"{}"),
    ],
)
def test_real_hook_processes(hook_home: Path, args: list[str], raw: bytes) -> None:
    args = [str(hook_home.parent / "map.json") if a == "MAP" else a for a in args]
    env = {**os.environ, "MIMIR_HOME": str(hook_home), "MIMIR_AUTO_CONSOLIDATE": "0"}
    out = subprocess.run(
        [str(BIN / "mimir"), "hook", *args], input=raw, capture_output=True, timeout=60, env=env
    )
    assert out.returncode == 0
    check_answer(args, out.stdout.decode())


# -- MCP -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MCPSession]:
    pytest.importorskip("mcp")
    from mimir_core import Mimir

    m = Mimir(tmp_path_factory.mktemp("mcp") / "home", embedder="hash", auto_consolidate=False)
    m.record("run the payments integration tests", "pytest tests/integration", "failure")
    with MCPSession(m) as s:
        yield s
    m.close()


TOOL_FIELDS = [
    "query",
    "k",
    "outcome",
    "scope",
    "task",
    "explore",
    "action",
    "score",
    "reason",
    "context",
    "dry_run",
    "id",
    "with_experiences",
    "pinned",
    "n",
    "lesson_id",
    "helped",
    "note",
]


def tool_names() -> list[str]:
    from mimir_core.tools.specs import TOOLS

    return [t.name for t in TOOLS if t.name != "consolidate"]


@PROPS
@given(
    name=st.one_of(st.sampled_from(tool_names()), json_texts),
    args=st.dictionaries(st.one_of(st.sampled_from(TOOL_FIELDS), st.text(max_size=6)), json_values),
)
def test_mcp_tools(mcp: MCPSession, name: str, args: dict[str, Any]) -> None:
    text, is_error = mcp.call(name, args)
    if is_error:
        assert text.strip(), "an error result without a message"
    # the session survived: the next call works
    assert not mcp.call("memory_stats", {})[1]


# -- Hermes ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from mimir_integrations.hermes import MimirMemoryProvider

    saved = {
        k: os.environ.get(k) for k in ("MIMIR_HOME", "MIMIR_EMBEDDER", "MIMIR_AUTO_CONSOLIDATE")
    }
    os.environ.pop("MIMIR_HOME", None)
    os.environ.update(MIMIR_EMBEDDER="hash", MIMIR_AUTO_CONSOLIDATE="0")
    p = MimirMemoryProvider()
    p.initialize(
        "sess", hermes_home=str(tmp_path_factory.mktemp("hermes")), agent_context="primary"
    )
    yield p
    p.shutdown()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


messages = st.one_of(
    values,
    st.lists(
        st.one_of(
            values,
            st.fixed_dictionaries(
                {"role": st.one_of(st.sampled_from(["user", "assistant", "tool"]), values)},
                optional={"content": values, "tool_calls": values, "tool_call_id": values},
            ),
        ),
        max_size=4,
    ),
)


@PROPS
@given(
    query=st.one_of(texts, values),
    msgs=messages,
    name=st.one_of(st.just("recall_experiences"), texts),
    args=values,
)
def test_hermes_callbacks_never_raise(
    provider: Any, query: Any, msgs: Any, name: Any, args: Any
) -> None:
    provider.prefetch(query, session_id=query)
    provider.queue_prefetch(query)
    provider.sync_turn(query, query, session_id=query, messages=msgs)
    provider.on_pre_compress(msgs)
    provider.on_session_switch(query)
    out = provider.handle_tool_call(name, args)
    assert isinstance(json.loads(out), dict)
    provider.system_prompt_block()
    provider.get_tool_schemas()
