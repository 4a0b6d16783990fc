"""The processes of the stress test (``tests/reliability/test_stress.py``), one kind per run.

    python tests/reliability/stress_workers.py KIND TAG N OUT_JSON

Each worker writes ``N`` records to the store its environment names (``MIMIR_HOME``,
``MIMIR_STORE_URI``, ``MIMIR_STORAGE_OPTIONS``, ``MIMIR_EMBEDDER``), reads it now and then, and
writes what it got acknowledged to ``OUT_JSON``: ``{"ids": [...], "keys": [...], "reads": n}``.

Kinds:

* ``claude-code`` / ``cline``: the real hook command (``mimir hook <host>``), one process per
  event, fed that host's payloads. A hook acknowledges nothing to its host but exit 0; what it
  spools is keyed deterministically (``<host>:<session>:fail:<tool call id>``), so the worker
  knows each key it handed over.
* ``mcp``: a real ``mimir mcp`` server over stdio, driven by the MCP SDK's client
  (``record_experience`` / ``record_failure``, ``recall_experiences``): acknowledged ids.
* ``langgraph``: a compiled LangGraph graph whose node records through ``MimirMemoryNode``.
* ``api``: ``Mimir().record`` / ``record_many`` with idempotency keys, re-sending some keys.
* ``consolidate``: ``mimir consolidate --json`` in a loop until the file ``N`` exists (N is a
  path here); writes ``{"runs": ok, "failed": [stderr...]}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
MIMIR = str(BIN / "mimir")
#: Each writer's records carry a tag and a number in an identifier-like token that full-text
#: search finds exactly (the hash embedder knows no paraphrases).
TOKEN = "stk{tag}x{i:04d}"


def token(tag: str, i: int) -> str:
    return TOKEN.format(tag=tag, i=i)


RETRIES = {"lock_timeouts": 0}


def retrying(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, tried again when the store's write lock timed out (a clear
    ``StoreError`` that nothing was written: under heavy load a caller retries, and keys make a
    retry safe)."""
    from mimir_core.errors import StoreError

    for attempt in range(10):
        try:
            return fn(*args, **kwargs)
        except StoreError as exc:
            if "waiting for lock" not in str(exc) or attempt == 9:
                raise
            RETRIES["lock_timeouts"] += 1
    raise AssertionError("unreachable")


def _hook(host: str, payload: dict[str, Any]) -> None:
    proc = subprocess.run(
        [MIMIR, "hook", host],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=120,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"hook {host} exited {proc.returncode}: {proc.stderr[-500:]!r}")
    if proc.stdout.strip():
        json.loads(proc.stdout)  # an answer is one JSON object or nothing


def claude_code(tag: str, n: int) -> dict[str, Any]:
    sid = f"stress-{tag}"
    base = {"session_id": sid, "transcript_path": "/t.jsonl", "cwd": f"/repo/{tag}"}
    _hook(
        "claude-code",
        {
            **base,
            "hook_event_name": "UserPromptSubmit",
            "prompt": f"deploy the {tag} service to staging",
        },
    )
    keys = []
    for i in range(n):
        tok = token(tag, i)
        if i % 5 == 4:  # a successful call, then the turn ends: the episode closes as a success
            call = f"ok-{i}"
            _hook(
                "claude-code",
                {
                    **base,
                    "hook_event_name": "PostToolUse",
                    "tool_name": "Bash",
                    "tool_input": {"command": f"make deploy-{tok}", "description": "deploy"},
                    "tool_use_id": call,
                    "tool_response": {"stdout": "deployed", "stderr": "", "interrupted": False},
                },
            )
            _hook("claude-code", {**base, "hook_event_name": "Stop", "stop_hook_active": False})
            keys.append(f"claude-code:{sid}:ok:{call}")
            # The next turn starts with a prompt, which also closes the episode if the Stop
            # above was taken for a duplicate (identical Stop payloads within 30 s are).
            prompt = f"deploy the {tag} service to staging, attempt {i}"
            _hook("claude-code", {**base, "hook_event_name": "UserPromptSubmit", "prompt": prompt})
        else:
            call = f"fail-{i}"
            _hook(
                "claude-code",
                {
                    **base,
                    "hook_event_name": "PostToolUseFailure",
                    "tool_name": "Bash",
                    "tool_input": {
                        "command": f"kubectl apply -f {tok}.yaml",
                        "description": "apply",
                    },
                    "tool_use_id": call,
                    "error": f"Exit code 1\nerror: {tok} admission webhook denied the request",
                    "is_interrupt": False,
                },
            )
            keys.append(f"claude-code:{sid}:fail:{call}")
    _hook("claude-code", {**base, "hook_event_name": "SessionEnd", "reason": "exit"})
    return {"ids": [], "keys": keys, "reads": 0}


def cline(tag: str, n: int) -> dict[str, Any]:
    task = f"stress-{tag}"
    base = {"clineVersion": "3.x", "taskId": task, "workspaceRoots": [f"/repo/{tag}"]}
    _hook(
        "cline",
        {
            **base,
            "hookName": "TaskStart",
            "timestamp": "1",
            "taskStart": {"taskMetadata": {"initialTask": f"run the {tag} test suite"}},
        },
    )
    keys = []
    for i in range(n):
        tok = token(tag, i)
        call = f"call-{i}"
        _hook(
            "cline",
            {
                **base,
                "hookName": "tool_result",
                "timestamp": str(i + 2),
                "tool_result": {
                    "id": call,
                    "name": "execute_command",
                    "input": {"command": f"npm test -- {tok}"},
                    "output": [{"success": False, "error": f"1 failing: {tok}", "query": ""}],
                },
            },
        )
        keys.append(f"cline:{task}:fail:{call}")
    return {"ids": [], "keys": keys, "reads": 0}


def mcp(tag: str, n: int) -> dict[str, Any]:
    import anyio
    from mcp import Client, StdioServerParameters

    env = {k: v for k, v in os.environ.items() if k.startswith(("MIMIR_", "HOME", "HF_", "AWS_"))}
    params = StdioServerParameters(
        command=MIMIR, args=["mcp", "--interval", "2"], env=env, cwd=os.getcwd()
    )
    out: dict[str, Any] = {"ids": [], "keys": [], "reads": 0}

    async def main() -> None:
        async with Client(params, mode="legacy", read_timeout_seconds=300) as c:
            await c.list_tools()
            for i in range(n):
                tok = token(tag, i)
                task = f"migrate the {tag} database schema {tok}"
                if i % 3 == 0:
                    args = {"task": task, "action": "alembic downgrade base", "reason": "locked"}
                    r = await c.call_tool("record_failure", args)
                else:
                    args = {"task": task, "action": "alembic upgrade head", "outcome": "success"}
                    r = await c.call_tool("record_experience", args)
                for _attempt in range(10):  # a lock timeout under load: nothing was written
                    if not (r.is_error and "waiting for lock" in str(r.content)):
                        break
                    RETRIES["lock_timeouts"] += 1
                    r = await c.call_tool(
                        "record_failure" if i % 3 == 0 else "record_experience", args
                    )
                if r.is_error:
                    raise RuntimeError(f"record over MCP failed: {r.content}")
                out["ids"].append(r.structured_content["experience"]["id"])
                if i % 10 == 9:  # reads drain the hooks' spool too
                    r = await c.call_tool("recall_experiences", {"query": task, "k": 3})
                    if r.is_error:
                        raise RuntimeError(f"recall over MCP failed: {r.content}")
                    out["reads"] += 1

    anyio.run(main)
    return out


def langgraph(tag: str, n: int) -> dict[str, Any]:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    from mimir_core import Mimir
    from mimir_integrations.langgraph import MimirMemoryNode

    class State(TypedDict, total=False):
        start: int
        count: int

    memory = MimirMemoryNode(Mimir())
    got: list[Any] = []
    reads = 0

    def act(state: State) -> dict[str, Any]:
        nonlocal reads
        memory.lessons({"task": f"rotate the {tag} certificates"})
        reads += 1
        for i in range(state["start"], state["start"] + state["count"]):
            tok = token(tag, i)
            outcome = "failure" if i % 4 == 0 else "success"
            got.append(
                retrying(
                    memory.record,
                    f"rotate the {tag} certificates {tok}",
                    "certbot renew --force" if outcome == "failure" else "certbot renew --staging",
                    outcome,
                    reason="rate limited" if outcome == "failure" else None,
                    label=f"r{i}",
                )
            )
        return {}

    g = StateGraph(State)
    g.add_node("act", act)
    g.add_edge(START, "act")
    g.add_edge("act", END)
    app = g.compile(checkpointer=InMemorySaver())
    per = 5
    for start in range(0, n, per):
        cfg = {"configurable": {"thread_id": f"{tag}-{start}"}}
        app.invoke({"start": start, "count": min(per, n - start)}, cfg)
    return {
        "ids": [e.id for e in got],
        "keys": [e.idempotency_key for e in got],
        "reads": reads,
    }


def api(tag: str, n: int) -> dict[str, Any]:
    from mimir_core import Mimir

    m = Mimir()
    ids: list[str] = []
    keys: list[str] = []
    reads = 0
    i = 0
    while i < n:
        if i % 20 == 10 and i + 5 <= n:  # a batch of five in one write
            items = [
                {
                    "task": f"run the payments integration tests {token(tag, j)}",
                    "action": "pytest tests/integration",
                    "outcome": "failure",
                    "reason": 'UndefinedTable: relation "orders" does not exist',
                    "idempotency_key": f"{tag}-{j}",
                }
                for j in range(i, i + 5)
            ]
            for e in retrying(m.record_many, items):
                ids.append(e.id)
                keys.append(str(e.idempotency_key))
            i += 5
            continue
        ok = i % 3 != 0
        e = retrying(
            m.record,
            f"run the payments integration tests {token(tag, i)}",
            "alembic upgrade head && pytest tests/integration"
            if ok
            else "pytest tests/integration",
            "success" if ok else "failure",
            reason=None if ok else 'UndefinedTable: relation "orders" does not exist',
            idempotency_key=f"{tag}-{i}",
        )
        ids.append(e.id)
        keys.append(str(e.idempotency_key))
        if i % 7 == 6:  # a retry of an acknowledged key: the same record, no duplicate
            again = retrying(
                m.record, "a retried write", "x", "success", idempotency_key=f"{tag}-{i - 1}"
            )
            if again.id != ids[-2]:
                raise RuntimeError(f"retried key {tag}-{i - 1} gave {again.id}, not {ids[-2]}")
        if i % 10 == 9:
            retrying(m.recall, f"payments integration tests {token(tag, i)}", k=3)
            reads += 1
        i += 1
    return {"ids": ids, "keys": keys, "reads": reads}


def consolidate(stop: Path) -> dict[str, Any]:
    runs, failed = 0, []
    while not stop.exists():
        proc = subprocess.run([MIMIR, "consolidate", "--json"], capture_output=True, timeout=600)
        if proc.returncode == 0:
            runs += 1
        else:
            failed.append(proc.stderr.decode("utf-8", "replace")[-2000:])
        time.sleep(2.0)  # a run costs a process start (~4 CPU-s of imports)
    return {"runs": runs, "failed": failed}


WORKERS = {
    "claude-code": claude_code,
    "cline": cline,
    "mcp": mcp,
    "langgraph": langgraph,
    "api": api,
}


def main() -> None:
    kind, tag, n, out = sys.argv[1:5]
    started = time.monotonic()
    result = consolidate(Path(n)) if kind == "consolidate" else WORKERS[kind](tag, int(n))
    result["wall_s"] = round(time.monotonic() - started, 1)
    result.update(RETRIES)
    Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
