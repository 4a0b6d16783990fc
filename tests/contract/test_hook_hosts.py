"""The hook hosts' contract, replayed with each host's real payloads (``tests/data/<host>-<version>
-hooks.json``, recorded from the pinned CLI): the same round trip for every host, through the
real ``mimir hook <host>`` process.

For each host: a session whose shell call fails is captured as a failure with the host's own
failure signal; in the next session the repeated command draws the repeat guard, in the host's
context field, before it runs; once it failed twice, the next session's prompt carries it; a
payload Mimir cannot read is answered with nothing and exit 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from mimir_core.ingest import spool

BIN = Path(sys.executable).parent
DATA = Path(__file__).resolve().parents[1] / "data"


class HostCase(NamedTuple):
    name: str
    data: str
    #: (event, payload) of one session: the recorded ones, pointed at ``project`` and ``tmp``.
    session: Callable[[dict[str, Any], Path, Path, str], list[tuple[str, dict[str, Any]]]]
    #: The injected text of a hook's answer ("" when none).
    context: Callable[[dict[str, Any]], str]
    prompt_event: str
    #: Where the repeat guard speaks: before the tool runs, or (a host that reads no context
    #: before a tool) with the repeated command's failure.
    guard_event: str


def _codex_session(
    data: dict[str, Any], project: Path, tmp: Path, session_id: str
) -> list[tuple[str, dict[str, Any]]]:
    transcript = tmp / f"rollout-{session_id}.jsonl"
    transcript.write_text(json.dumps(data["transcript_item_completed"]) + "\n")
    out = []
    for p in data["payloads"]:
        p = dict(p, cwd=str(project), session_id=session_id)
        if "transcript_path" in p:
            p["transcript_path"] = str(transcript)
        out.append((p["hook_event_name"], p))
    return out


def _gemini_session(
    data: dict[str, Any], project: Path, tmp: Path, session_id: str
) -> list[tuple[str, dict[str, Any]]]:
    return [
        (p["hook_event_name"], dict(p, cwd=str(project), session_id=session_id))
        for p in data["payloads"]
    ]


def _copilot_session(
    data: dict[str, Any], project: Path, tmp: Path, session_id: str
) -> list[tuple[str, dict[str, Any]]]:
    """Copilot's payloads do not name their event: the recording lists the names beside them."""
    return [
        (name, dict(p, cwd=str(project), sessionId=session_id))
        for name, p in zip(data["events"], data["payloads"], strict=True)
    ]


def _top_level(answer: dict[str, Any]) -> str:
    return str(answer.get("additionalContext") or "")


def _hook_specific(answer: dict[str, Any]) -> str:
    return str((answer.get("hookSpecificOutput") or {}).get("additionalContext") or "")


CASES = [
    HostCase(
        "codex",
        "codex-0.171.0-hooks.json",
        _codex_session,
        _hook_specific,
        "UserPromptSubmit",
        "PreToolUse",
    ),
    HostCase(
        "gemini",
        "gemini-0.61.0-hooks.json",
        _gemini_session,
        _hook_specific,
        "BeforeAgent",
        "AfterTool",
    ),
    HostCase(
        "copilot",
        "copilot-1.0.102-hooks.json",
        _copilot_session,
        _top_level,
        "userPromptSubmitted",
        "preToolUse",
    ),
]


def hook(home: Path, host: str, payload: Any) -> dict[str, Any]:
    out = subprocess.run(
        [str(BIN / "mimir"), "hook", host],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
        env={**os.environ, "MIMIR_HOME": str(home), "MIMIR_AUTO_CONSOLIDATE": "0"},
    )
    assert out.returncode == 0 and out.stderr == b"", out.stderr
    return json.loads(out.stdout) if out.stdout.strip() else {}


def pending(home: Path) -> list[dict[str, Any]]:
    path = spool.spool_dir(home) / spool.PENDING
    return spool.records(path.read_bytes().splitlines()) if path.exists() else []


def load(case: HostCase) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / case.data).read_text())
    assert data["host"] == case.name and data["version"]
    return data


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_failure_is_captured_and_shown_from_the_first_repeat(
    case: HostCase, tmp_path: Path
) -> None:
    data = load(case)
    home, project = tmp_path / "mimir", tmp_path / "billing"
    (project / ".git").mkdir(parents=True)
    first = {}
    for name, p in case.session(data, project, tmp_path, "session-one"):
        first[name] = hook(home, case.name, p)
    assert not any(case.context(a) for a in first.values())  # nothing was tried before
    [failure] = [r for r in pending(home) if r["outcome"] == "failure"]
    assert failure["source"] == case.name and failure["scope"] == str(project.resolve())
    failed_action = failure["action"]
    assert failed_action and failure["reason"]

    second = {}
    for name, p in case.session(data, project, tmp_path, "session-two"):
        second[name] = hook(home, case.name, p)
    # One failure and nothing that worked: the prompt says nothing yet, the repeat is guarded.
    assert not case.context(second[case.prompt_event])
    guard = case.context(second[case.guard_event])
    assert "failed here before on this task" in guard and f"`{failed_action}`" in guard, second
    # Failed twice: from now on the prompt itself carries it, before any tool runs.
    third = case.session(data, project, tmp_path, "session-3")
    upto = next(i for i, (name, _) in enumerate(third) if name == case.prompt_event)
    answers = {name: hook(home, case.name, p) for name, p in third[: upto + 1]}
    shown = case.context(answers[case.prompt_event])
    assert "<mimir-memory>" in shown and f"failed here: `{failed_action}` — 2 of 2" in shown


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_an_unreadable_payload_is_answered_with_nothing(case: HostCase, tmp_path: Path) -> None:
    out = subprocess.run(
        [str(BIN / "mimir"), "hook", case.name],
        input=b"{not json",
        capture_output=True,
        timeout=60,
        env={**os.environ, "MIMIR_HOME": str(tmp_path)},
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, b"", b"")
    assert "hook " + case.name in (tmp_path / "logs" / "hooks.log").read_text()


def test_codex_reads_the_exit_code_from_the_transcript(tmp_path: Path) -> None:
    """A Codex shell call's ``tool_response`` is its output alone: without the transcript's
    record of the call the same payload reads as a success, with it as exit code 2."""
    from mimir_integrations.codex.payload import from_codex

    data = load(CASES[0])
    [post] = [p for _, p in _codex_session(data, tmp_path, tmp_path, "s") if "tool_response" in p]
    ev = from_codex(post)
    assert (ev.ok, ev.tool, ev.tool_input) == (False, "Bash", {"command": "ls /nonexistent_xyz"})
    assert ev.error.startswith("Exit code 2\nls: cannot access")
    assert from_codex(dict(post, transcript_path=str(tmp_path / "missing.jsonl"))).ok
    ok_item = json.loads(json.dumps(data["transcript_item_completed"]))
    ok_item["payload"]["item"].update(exit_code=0, status="completed")
    Path(post["transcript_path"]).write_text(json.dumps(ok_item) + "\n")
    assert from_codex(post).ok


def test_gemini_reads_the_error_field_and_the_exit_code_in_the_output() -> None:
    """Gemini CLI marks a failed tool with ``tool_response.error``; a shell command that exited
    non-zero has no error, only ``Exit Code: N`` in its ``llmContent``."""
    from mimir_integrations.gemini.payload import from_gemini

    data = load(CASES[1])
    ev = from_gemini(data["after_tool_error"])
    assert (ev.kind, ev.ok, ev.tool) == ("tool", False, "read_file")
    assert ev.error.startswith("File not found: ")
    [shell] = [p for p in data["payloads"] if p["hook_event_name"] == "AfterTool"]
    ev = from_gemini(shell)
    assert (ev.ok, ev.tool_input["command"]) == (False, "ls /nonexistent_xyz")
    assert "Exit Code: 2" in ev.error
    worked = json.loads(json.dumps(shell).replace("Exit Code: 2", "Exit Code: 0"))
    assert from_gemini(worked).ok
    del worked["tool_response"]["llmContent"]
    assert from_gemini(worked).ok  # no exit code, no error: nothing failed


def test_copilot_payloads_are_told_apart_by_their_fields() -> None:
    """Copilot CLI's payloads do not name their event; a shell's exit code is only in its text
    (``resultType`` stays ``success``); a tool that failed fires ``postToolUseFailure``."""
    from mimir_integrations.copilot.payload import from_copilot

    data = load(CASES[2])
    kinds = [(from_copilot(p).kind, from_copilot(p).name) for p in data["payloads"]]
    assert kinds == [
        ("start", "sessionStart"),
        ("task", "userPromptSubmitted"),
        ("pretool", "preToolUse"),
        ("tool", "postToolUse"),
        ("stop", "agentStop"),
        ("end", "sessionEnd"),
    ]
    post = data["payloads"][3]
    ev = from_copilot(post)
    assert (ev.ok, ev.tool, ev.tool_input["command"]) == (False, "bash", "ls /nonexistent_xyz")
    assert "exit code 2" in ev.error
    worked = json.loads(json.dumps(post).replace("exit code 2>", "exit code 0>"))
    assert from_copilot(worked).ok
    failure = from_copilot(data["post_tool_use_failure"])
    assert (failure.kind, failure.ok, failure.error) == ("tool", False, "Path does not exist")


@pytest.mark.parametrize(
    ("writer", "reader"),
    [(0, 1), (1, 2), (2, 0)],
    ids=["codex>gemini", "gemini>copilot", "copilot>codex"],
)
def test_a_failure_one_host_captured_guards_the_next_host(
    writer: int, reader: int, tmp_path: Path
) -> None:
    """One project, one Mimir home, two hosts: the command that failed under one CLI draws the
    other CLI's repeat guard, and both records are recalled as the store's own."""
    home, project = tmp_path / "mimir", tmp_path / "billing"
    (project / ".git").mkdir(parents=True)
    first, then = CASES[writer], CASES[reader]

    def same_task(p: dict[str, Any]) -> dict[str, Any]:
        # Copilot's recorded prompt carries the fake model's script; the task is the same.
        return {
            k: "list the fixtures" if k in ("prompt", "initialPrompt") else v for k, v in p.items()
        }

    for _, p in first.session(load(first), project, tmp_path, "writer"):
        hook(home, first.name, same_task(p))
    said = {
        name: hook(home, then.name, same_task(p))
        for name, p in then.session(load(then), project, tmp_path, "reader")
    }
    guard = then.context(said[then.guard_event])
    assert "failed here before on this task" in guard and "`ls /nonexistent_xyz`" in guard

    from mimir_core import Mimir

    m = Mimir(home, embedder="hash")
    try:
        assert m.ingest().ingested >= 2
        failures = [e for e in m.recent(20, scope="*") if e.outcome == "failure"]
        assert {e.source for e in failures} == {first.name, then.name}
        assert {e.action for e in failures} == {"ls /nonexistent_xyz"}
    finally:
        m.close()


def test_codex_asks_before_a_command_that_never_worked_when_told_to(tmp_path: Path) -> None:
    """``MIMIR_GUARD_ASK_AFTER=1``: Codex's ``PreToolUse`` answer asks the user first (its
    ``permissionDecision``), with the guard's facts as the reason."""
    home, project = tmp_path / "mimir", tmp_path / "billing"
    (project / ".git").mkdir(parents=True)
    data = load(CASES[0])
    for _, p in _codex_session(data, project, tmp_path, "one"):
        hook(home, "codex", p)
    os.environ["MIMIR_GUARD_ASK_AFTER"] = "1"
    try:
        said = {n: hook(home, "codex", p) for n, p in _codex_session(data, project, tmp_path, "2")}
    finally:
        del os.environ["MIMIR_GUARD_ASK_AFTER"]
    out = said["PreToolUse"]["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse" and out["permissionDecision"] == "ask"
    assert "ls /nonexistent_xyz" in out["permissionDecisionReason"]


def _wait_for_ingest_of(home: Path, timeout: float = 60.0) -> None:
    """Until no ``mimir ingest`` of ``home`` runs (the background one a hook started)."""
    import time

    deadline = time.monotonic() + timeout
    needle = str(home).encode()
    while time.monotonic() < deadline:
        running = False
        for proc in Path("/proc").iterdir():
            try:
                cmd = (proc / "cmdline").read_bytes() if proc.name.isdigit() else b""
            except OSError:
                continue
            running = running or (b"ingest" in cmd and needle in cmd)
        if not running:
            return
        time.sleep(0.2)


@pytest.mark.parametrize("case", CASES[1:], ids=[c.name for c in CASES[1:]])
def test_a_mapped_host_ends_a_session_like_a_python_one(case: HostCase, tmp_path: Path) -> None:
    """The hosts shipped as mapping files get what the Python ones do: a session's start lets
    what was said before be said again (a resumed or cleared session), and its end starts the
    background ingest."""
    home, project = tmp_path / "mimir", tmp_path / "billing"
    (project / ".git").mkdir(parents=True)
    data = load(case)
    for _, p in case.session(data, project, tmp_path, "one"):
        hook(home, case.name, p)
    for _, p in case.session(data, project, tmp_path, "two"):
        hook(home, case.name, p)
    session = case.session(data, project, tmp_path, "three")
    start = next(p for name, p in session if name == session[0][0])
    prompt = next(p for name, p in session if name == case.prompt_event)

    def at(p: dict[str, Any], stamp: int) -> dict[str, Any]:
        # A repeated event differs in its timestamp (a byte-identical one is a duplicate hook).
        return dict(p, timestamp=stamp)

    hook(home, case.name, at(start, 1))
    assert case.context(hook(home, case.name, at(prompt, 2)))  # failed twice: at the prompt
    assert not case.context(hook(home, case.name, at(prompt, 3)))  # once per session
    # The session starts again (resumed, cleared): its task's block is given again, at once.
    again = case.context(hook(home, case.name, at(start, 4)))
    assert "failed here: `ls /nonexistent_xyz`" in again

    end = session[-1][1]
    out = subprocess.run(
        [str(BIN / "mimir"), "hook", case.name],
        input=json.dumps(end).encode(),
        capture_output=True,
        timeout=60,
        env={**os.environ, "MIMIR_HOME": str(home), "MIMIR_AUTO_CONSOLIDATE": "1"},
    )
    try:
        assert out.returncode == 0
        assert "started background ingest" in (home / "logs" / "hooks.log").read_text()
    finally:
        _wait_for_ingest_of(home)


#: host -> (its config file under the user's home, the user's own hook there, the event it is on)
USER_FILES = {
    "codex": (".codex/hooks.json", {"hooks": [{"type": "command", "command": "true"}]}, "Stop"),
    "gemini": (
        ".gemini/settings.json",
        {"hooks": [{"type": "command", "command": "true"}]},
        "AfterTool",
    ),
    "copilot": (".copilot/settings.json", {"type": "command", "bash": "true"}, "postToolUse"),
}


@pytest.mark.parametrize("name", list(USER_FILES))
def test_setup_merges_backs_up_and_uninstall_restores(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the CLI installed: setup keeps the user's own hook and settings, backs the file
    up byte for byte, is idempotent, and uninstall leaves the user's content as it was."""
    from mimir_integrations.setup_cmd import SetupEnv, target_module

    for var in ("CODEX_HOME", "COPILOT_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")  # no host CLI: setup says what to run later
    rel, mine, event = USER_FILES[name]
    path = tmp_path / rel
    path.parent.mkdir(parents=True)
    original = {"theme": "dark", "hooks": {event: [mine]}}
    path.write_text(json.dumps(original, indent=3))
    before = path.read_bytes()
    module = target_module(name)
    module.setup(SetupEnv(user_home=tmp_path))
    merged = path.read_text()
    module.setup(SetupEnv(user_home=tmp_path))
    assert path.read_text() == merged  # idempotent
    data = json.loads(merged)
    assert data["theme"] == "dark" and data["hooks"][event][0] == mine
    assert len(data["hooks"][event]) == 2 and f"hook {name}" in json.dumps(data["hooks"][event][1])
    [backup] = path.parent.glob(f"{path.name}.mimir-backup-*")
    assert backup.read_bytes() == before
    module.uninstall(SetupEnv(user_home=tmp_path))
    assert json.loads(path.read_text()) == original


def test_what_each_hook_host_recorded_the_mcp_server_recalls(tmp_path: Path) -> None:
    """The cross-adapter test's MCP reader (the server these CLIs are given) recalls, in its own
    process, the failures Codex, Gemini and Copilot captured through their real hook payloads,
    each host's task and command marked so recall finds them exactly. (The other readers read
    the same store the same way: ``test_cross_adapter`` proves it for a hook's spool line.)"""
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from test_cross_adapter import READERS, script, start

    from mimir_core import Mimir

    home, project = tmp_path / "home", tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    Mimir(home, embedder="hash").stats()
    markers = {case.name: f"svc-{case.name}-47{i}" for i, case in enumerate(CASES)}
    for case in CASES:
        m = markers[case.name]
        for _, p in case.session(load(case), project, tmp_path, f"s-{m}"):
            text = json.dumps(p).replace("ls /nonexistent_xyz", f"helm upgrade {m} --atomic")
            p = json.loads(text)
            for key in ("prompt", "initialPrompt"):
                if key in p:
                    p[key] = f"deploy the {m} service"
            hook(home, case.name, p)
    proc = start(script(READERS["mcp"], MARKERS=list(markers.values())), home)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, f"the MCP reader failed:\n{err}"
    assert json.loads(out.strip().splitlines()[-1]) == dict.fromkeys(markers.values(), True)
