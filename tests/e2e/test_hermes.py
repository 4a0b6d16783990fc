"""The real Hermes Agent (0.19.x from the package index) with ``memory.provider: mimir``.

``mimir setup hermes`` prepares a clean ``HERMES_HOME`` whose model is a fake OpenAI-compatible
server on 127.0.0.1 (streaming, tool calls). Then Hermes runs sessions in which the ``terminal``
tool runs a command that fails (Hermes reports the call as fine: the failure is in the exit
code) and then the fix: the first with the ``hermes -z`` command, the next ones in one process
through ``hermes_cli.oneshot.run_oneshot``, the function behind ``hermes -z`` (a whole session
each: provider loaded by Hermes, turn, session end, shutdown), to spare a start-up per session.
The lesson gate holds out half of the evidence, so a lesson needs about ten such sessions to be
admitted reliably. Proven here:

* each failure became an experience in the Mimir store under ``$HERMES_HOME/mimir``;
* consolidation started by itself when due (the shutdown of the session that made it due) and
  admitted a lesson;
* the next session's request to the model carries that lesson inside ``<memory-context>``, and
  the attempts of that session name the lesson as recalled (evidence for the gate);
* Mimir's tools work through Hermes' tool loop;
* ``mimir uninstall hermes`` restores the config and removes the plugin, keeping the data;
* without consolidation, from the first repeat of a task the next turn's ``<memory-context>``
  carries the observations of past attempts (what failed here, what worked instead).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fake_models
import pytest
import yaml
from fake_models import fake_model_server
from hermes_env import hermes_venv

# The first run builds Hermes' environment (minutes); cached runs take well under that.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(1800)]

TASK = "Run the payments integration tests."
FAIL = "sh -c 'echo UndefinedTable: relation orders does not exist >&2; exit 3'"
FIX = "sh -c 'echo alembic upgrade head: ok; echo 12 passed'"
SESSIONS = 10  # sessions with a failure and its fix: the gate admits a lesson at ~99.6%
DRIVER = """\
import json, sys
from hermes_cli.oneshot import run_oneshot  # what `hermes -z PROMPT` runs

for prompt in json.load(open(sys.argv[1])):
    rc = run_oneshot(prompt)
    print(f"\\n@@ rc={rc}", flush=True)
    if rc:
        sys.exit(rc)
"""
CONFIG = """\
# Hermes config of the end-to-end test (this comment must survive setup)
model:
  provider: custom
  base_url: {url}/v1
  default: fake-model   # the fake server's only model
  api_key: sk-fake
agent:
  max_turns: 8
"""


def text_of(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def script(*commands: str) -> str:
    """The fake model's script: call ``terminal`` once per command, in order."""
    calls = ",".join("terminal" for _ in commands)
    return f"CALL:{calls} ARGS={json.dumps([{'command': c} for c in commands])}"


def decide_openai(body: dict[str, Any]) -> dict[str, Any]:
    """The fake server's decision, extended: ``ARGS=[{...}, {...}]`` gives each call its own
    arguments (the shared server gives every call the same ones)."""
    msgs = body.get("messages", [])
    user = next(
        (m for m in reversed(msgs) if m.get("role") == "user" and "CALL:" in str(m.get("content"))),
        None,
    )
    # the script is the user's text; Hermes appends recalled memory (which may quote it) after
    text = text_of(user.get("content")).split("<memory-context>")[0] if user else ""
    start = text.find("ARGS=[")
    if user is None or start < 0:
        return ORIGINAL_DECIDE(body)
    args, _end = json.JSONDecoder().raw_decode(text, start + len("ARGS="))
    done = [x for x in msgs[msgs.index(user) + 1 :] if x.get("role") == "tool"]
    if len(done) < len(args):
        return {"tool": "terminal", "args": args[len(done)]}
    return {"text": "FINAL: tool said " + text_of(done[-1].get("content"))[:200]}


ORIGINAL_DECIDE = fake_models.decide_openai


@pytest.fixture(scope="module")
def venv() -> Path:
    return hermes_venv()


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setattr(fake_models, "decide_openai", decide_openai)
    with fake_model_server("openai") as server:
        yield server


def hermes_env(venv: Path, hermes_home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MIMIR_", "OPENAI_", "ANTHROPIC_", "OPENROUTER_", "HERMES_"))
    }
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        HERMES_HOME=str(hermes_home),
        HF_HUB_OFFLINE="1",
        # consolidate as soon as the sessions have given enough failures
        MIMIR_AUTO_CONSOLIDATE_HOURS="0",
        MIMIR_AUTO_CONSOLIDATE_FAILURES=str(SESSIONS),
    )
    return env


def run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> str:
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{cmd} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}"
    return out.stdout


def user_messages(requests: list[dict[str, Any]]) -> list[str]:
    return [
        text_of(m.get("content"))
        for r in requests
        if r["path"].rstrip("/").endswith("/chat/completions")
        for m in r["body"].get("messages", [])
        if m.get("role") == "user"
    ]


def wait_for_lessons(mimir: Any, log: Path, timeout: float = 180) -> list[Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        if re.search(r"consolidated|failed", text):
            break
        time.sleep(1)
    lessons = mimir.list_lessons(status="active")
    assert lessons, (
        f"no lesson was learned; consolidate.log:\n{log.read_text() if log.exists() else '(none)'}"
    )
    return lessons


def test_setup_capture_learn_and_recall_with_real_hermes(
    venv: Path, llm: Any, tmp_path: Path, fast_embedder: object
) -> None:
    from mimir_core import Mimir

    hermes_home = tmp_path / "hermes-home"
    hermes_home.mkdir()
    workdir = tmp_path / "work"
    workdir.mkdir()
    config = hermes_home / "config.yaml"
    config.write_text(CONFIG.format(url=llm.url))
    before = config.read_text()
    env = hermes_env(venv, hermes_home)

    # -- mimir setup hermes --------------------------------------------------------------------
    out = run([str(venv / "bin" / "mimir"), "setup", "hermes"], env, workdir)
    assert "memory.provider: mimir" in out and "can load the provider" in out, out
    after = config.read_text()
    assert after.startswith(before) and after[len(before) :] == "memory:\n  provider: mimir\n"
    assert (hermes_home / "plugins" / "mimir" / "__init__.py").exists()
    assert run([str(venv / "bin" / "mimir"), "setup", "hermes"], env, workdir)  # idempotent
    assert config.read_text() == after

    # -- sessions in which a command fails, then the fix works ---------------------------------
    hermes = str(venv / "bin" / "hermes")
    prompt = f"{TASK} {script(FAIL, FIX)}"
    answer = run([hermes, "-z", prompt], env, workdir)
    assert "FINAL: tool said" in answer and "12 passed" in answer, answer
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps([prompt] * (SESSIONS - 1)))
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    answers = run([str(venv / "bin" / "python"), str(driver), str(prompts)], env, workdir, 900)
    assert answers.count("12 passed") == SESSIONS - 1, answers

    home = hermes_home / "mimir"
    assert (home / "store").is_dir(), "Mimir did not keep its store under HERMES_HOME"
    m = Mimir(home, embedder=fast_embedder, auto_consolidate=False)  # type: ignore[arg-type]
    exps = m.recent(50, scope="*")
    failures = [e for e in exps if e.outcome == "failure"]
    assert len(failures) == SESSIONS, [(e.outcome, e.action) for e in exps]
    for e in failures:
        assert e.action == FAIL and e.source == "hermes" and e.context["exit_code"] == 3
        assert "UndefinedTable: relation orders does not exist" in e.reason
        assert e.task.startswith(TASK) and e.scope == str(workdir.resolve())
    fixes = [e for e in exps if e.outcome == "success"]
    assert len(fixes) == SESSIONS and all(e.action == FIX for e in fixes)

    # -- consolidation started by itself and learned a lesson ----------------------------------
    lessons = wait_for_lessons(m, home / "logs" / "consolidate.log")
    lesson_ids = {le.id for le in lessons}

    # -- the next session gets the lesson in <memory-context> ----------------------------------
    llm.requests.clear()
    answer = run([hermes, "-z", f"{TASK} {script(FIX)}"], env, workdir)
    assert "12 passed" in answer
    first_user = user_messages(llm.requests)[0]
    assert "<memory-context>" in first_user, (first_user, sorted((home / "digest").glob("*")))
    block = first_user[first_user.index("<memory-context>") :]
    assert "</memory-context>" in block and "<mimir-memory>" in block, first_user
    shown = [i for i in lesson_ids if i in block]
    assert shown, f"none of {lesson_ids} in:\n{block}"
    assert "sh -c 'echo alembic upgrade head" in block
    m.close()
    latest = [e for e in m.recent(50, scope="*") if e.id not in {x.id for x in exps}]
    assert latest and all(set(shown) <= set(e.recalled_lesson_ids) for e in latest)

    # -- Mimir's tools through Hermes' tool loop -----------------------------------------------
    tools = {t["function"]["name"] for t in llm.requests[-1]["body"]["tools"]}
    assert {"recall_experiences", "record_failure", "lesson_feedback"} <= tools
    args = json.dumps({"query": "payments integration tests UndefinedTable"})
    prompts.write_text(json.dumps([f"What failed before? CALL:recall_experiences ARGS={args}"]))
    answer = run([str(venv / "bin" / "python"), str(driver), str(prompts)], env, workdir)
    assert "FINAL: tool said" in answer and "UndefinedTable" in answer, answer

    # -- mimir uninstall hermes ----------------------------------------------------------------
    out = run([str(venv / "bin" / "mimir"), "uninstall", "hermes"], env, workdir)
    assert config.read_text() == before, out
    assert not (hermes_home / "plugins" / "mimir").exists()
    assert (home / "store").is_dir()
    assert yaml.safe_load(config.read_text())["model"]["default"] == "fake-model"


DEPLOY_FAILS = "make deploy-staging"
DEPLOY_WORKS = "./scripts/deploy.sh staging billing"
MAKE_ERROR = "No rule to make target 'deploy-staging'"
TURNS_DRIVER = """\
import json, sys, time
import run_agent
from hermes_cli.oneshot import run_oneshot  # what `hermes -z PROMPT` runs

TURNS = json.load(open(sys.argv[1]))
one_turn = run_agent.AIAgent.run_conversation


def turns(agent, _prompt, **kwargs):
    # One Hermes session, several user turns, as `hermes chat` runs them.
    history, result = None, {}
    for n, prompt in enumerate(TURNS):
        if n:
            # Hermes' own barrier (sync_turn and queue_prefetch have run), then until Mimir's
            # store is open: this turn's prefetch is Mimir.context() on the store.
            assert agent._memory_manager.flush_pending(60)
            [mimir] = [p for p in agent._memory_manager.providers if p.name == "mimir"]
            live, deadline = mimir._memory.live, time.monotonic() + 60
            while not live.ready and live.error is None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert live.ready, f"Mimir's store did not open: {live.error}"
        result = one_turn(agent, prompt, conversation_history=history)
        history = result.get("messages")
    return result


run_agent.AIAgent.run_conversation = turns
sys.exit(run_oneshot("(the turns of TURNS)"))
"""


def memory_context(requests: list[dict[str, Any]], prompt: str) -> str:
    """The ``<memory-context>`` block Hermes sent with ``prompt`` in its first request for it."""
    shown = [u for u in user_messages(requests) if u.startswith(prompt)]
    assert shown, f"{prompt!r} never reached the model"
    text = shown[0]
    assert "<memory-context>" in text and "</memory-context>" in text, text
    return text[text.index("<memory-context>") : text.index("</memory-context>")]


def test_observations_reach_the_next_turn_without_consolidation(
    venv: Path, llm: Any, tmp_path: Path, fast_embedder: object
) -> None:
    """Facts of past attempts reach the real Hermes' model from the first repeat, with no
    consolidation (``MIMIR_AUTO_CONSOLIDATE=0``) and no lesson, through the real MiniLM
    embedder (Mimir's default).

    In every session the ``terminal`` tool runs ``make deploy-staging`` (exit 2: no such
    target; Hermes reports the call as fine, the failure is only in the exit code), then
    ``./scripts/deploy.sh staging billing`` (works; not a read-only command, so it is
    recorded). The prompts hold only the user's words (the fake model's script is kept on the
    server), so the tasks match by their wording alone. Proven:

    * session 1 ("Deploy the billing service to staging.") is shown no observation: nothing
      was tried before;
    * session 2, turn 1, with other words ("Deploy billing to the staging environment."): the
      request carries inside ``<memory-context>`` Mimir's block naming the make command as
      failed here (with make's error) and the script as what worked instead, 1 of 1 try each
      (in a new Hermes process the store is usually still opening at the first prefetch: the
      signed attempts digest with the spool's tail then answers, in the same words);
    * session 2, turn 2 (the driver waits for Hermes' sync barrier and for Mimir's store to be
      open, so the answer is ``Mimir.context()``: the experiences on topic by vector
      similarity): both sessions' attempts, 2 of 2 tries in 2 sessions each, so turn 1's
      attempts went through ``sync_turn`` → spool → ingest. (Hermes replays turn 1's block with
      turn 1's message in the history: the model then sees both blocks.)
    * no lesson exists: all of this is observations, not consolidation.
    """
    from mimir_core import Mimir

    hermes_home = tmp_path / "hermes-home"
    hermes_home.mkdir()
    workdir = tmp_path / "billing"
    (workdir / ".git").mkdir(parents=True)
    (workdir / "Makefile").write_text("test:\n\t@echo tests pass\n")
    deploy = workdir / "scripts" / "deploy.sh"
    deploy.parent.mkdir()
    deploy.write_text('#!/bin/sh\necho "deployed $2 to $1"\n')
    deploy.chmod(0o755)
    (hermes_home / "config.yaml").write_text(CONFIG.format(url=llm.url))
    env = {**hermes_env(venv, hermes_home), "MIMIR_AUTO_CONSOLIDATE": "0"}
    run([str(venv / "bin" / "mimir"), "setup", "hermes"], env, workdir)
    llm.script = [
        ("terminal", {"command": DEPLOY_FAILS}),
        ("terminal", {"command": DEPLOY_WORKS}),
    ]

    # -- session 1: make fails, the script works; nothing to show yet --------------------------
    first = "Deploy the billing service to staging."
    answer = run([str(venv / "bin" / "hermes"), "-z", first], env, workdir)
    assert "FINAL: tool said" in answer and "deployed billing to staging" in answer, answer
    assert not [u for u in user_messages(llm.requests) if "Observed on tasks" in u]

    # -- session 2: two turns, the same task in other words ------------------------------------
    llm.requests.clear()
    again = [
        "Deploy billing to the staging environment.",
        "Deploy the billing service to staging, please.",
    ]
    turns = tmp_path / "turns.json"
    turns.write_text(json.dumps(again))
    driver = tmp_path / "turns_driver.py"
    driver.write_text(TURNS_DRIVER)
    answer = run([str(venv / "bin" / "python"), str(driver), str(turns)], env, workdir)
    assert "deployed billing to staging" in answer, answer

    block = memory_context(llm.requests, again[0])
    assert "<mimir-memory>" in block and "Observed on tasks like this" in block, block
    assert f"- failed here: `{DEPLOY_FAILS}` — 1 of 1 try, in 1 session; last error:" in block
    assert MAKE_ERROR in block
    assert f"- worked here instead: `{DEPLOY_WORKS}` — 1 of 1 try, in 1 session" in block

    block = memory_context(llm.requests, again[1])
    assert f"- failed here: `{DEPLOY_FAILS}` — 2 of 2 tries, in 2 sessions; last error:" in block
    assert f"- worked here instead: `{DEPLOY_WORKS}` — 2 of 2 tries, in 2 sessions" in block

    home = hermes_home / "mimir"
    m = Mimir(home, embedder=fast_embedder, auto_consolidate=False)  # type: ignore[arg-type]
    try:
        assert not m.list_lessons(), "a lesson exists: this was not observations alone"
        tried = sorted((e.action, e.outcome) for e in m.recent(20, scope="*"))
        assert tried == [(DEPLOY_WORKS, "success")] * 3 + [(DEPLOY_FAILS, "failure")] * 3
    finally:
        m.close()
