"""The hosts of :mod:`bench.hosts`, each driven through its real entry point.

Every driver plays a session the way its host would (:meth:`Driver.play`): what the host shows
at task start (``start``), as a tool is about to run (``before``), after the tool ran (``after``,
which is also where a host records), and at the end of the session (``end``). The agent only
ever sees the strings these return. Each driver works in a home of its own with consolidation
off (``MIMIR_AUTO_CONSOLIDATE=0``): no lesson is ever made, what is shown is observations.

* ``claude-code`` / ``cline``: one real ``python -m mimir_integrations.cli hook <host>`` process
  per event, with the payload shapes the hosts send (``HOME``, ``MIMIR_HOME`` in the temporary
  directory; ``cwd`` / ``workspaceRoots`` = the project); at a session's end, ``mimir ingest``
  as the host's end-of-session hook starts it in the background in a default install;
* ``hermes``: :class:`mimir_integrations.hermes.MimirMemoryProvider`, a new one per session (a
  Hermes run is a process), its callbacks in Hermes' order, in the project's directory;
* ``langgraph``: a compiled graph (``recall`` → ``agent`` ⇄ ``tools`` → ``record``) with
  :class:`~mimir_integrations.langgraph.MimirMemoryNode` on the project's ``Mimir(scope=...)``
  (so other projects' evidence can be shown, labelled): ``before`` puts the block in the state,
  ``ToolNode(wrap_tool_call=...)`` notes the tool results, ``after`` records the turn; the
  agent node is the simulated agent, the ``terminal`` tool raises ``ToolException`` on failure;
* ``mcp``: :func:`mimir_integrations.mcp_server.build_server` per project (the server a host
  starts in the project) and the SDK's in-process client, a connection per session;
* ``no-memory``: shows nothing, records nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .hosts import Turn
    from .hosts_scenario import Result, Session

PY = sys.executable


class Driver:
    """The no-memory host, and the loop every host shares (see the module doc)."""

    def __init__(self, root: Path, embedder: str) -> None:
        self.root, self.embedder = root, embedder
        self.home = root / "mimir"
        root.mkdir(parents=True, exist_ok=True)

    def start(self, s: Session) -> str:
        return ""

    def before(self, s: Session, cmd: str, n: int) -> str:
        return ""

    def after(self, s: Session, cmd: str, n: int, res: Result) -> str:
        return ""

    def end(self, s: Session, turn: Turn) -> None:
        return None

    def close(self) -> None:
        return None

    def play(self, s: Session, turn: Turn) -> None:
        """One session: the guard's note arrives as the tool already runs (the call counts)."""
        turn.begin(self.start(s))
        n = 0
        while (cmd := turn.choose()) is not None:
            note = self.before(s, cmd, n)
            res = turn.run(cmd)
            turn.shown(note, self.after(s, cmd, n, res))
            n += 1
        self.end(s, turn)


# -- hook hosts ----------------------------------------------------------------------------------


class HookDriver(Driver):
    """A host that runs ``mimir hook <name>`` once per event, a process each time."""

    host = ""

    def __init__(self, root: Path, embedder: str) -> None:
        super().__init__(root, embedder)
        (root / "user").mkdir(exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("MIMIR_")}
        self.env.update(
            HOME=str(root / "user"),
            MIMIR_HOME=str(self.home),
            MIMIR_AUTO_CONSOLIDATE="0",
            MIMIR_EMBEDDER=embedder,
            HF_HUB_OFFLINE="1",
        )

    def hook(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        proc = subprocess.run(
            [PY, "-m", "mimir_integrations.cli", "hook", self.host],
            input=json.dumps(payload),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"mimir hook {self.host} exited {proc.returncode}: {proc.stderr}")
        out = proc.stdout.strip()
        return json.loads(out) if out else None

    def drain(self) -> None:
        """What a session's end starts in the background in a default install (``mimir
        ingest``, here without the consolidation), run to its end: sessions of real work are
        minutes apart, so the next one finds what it stored (the spool drained, the attempts
        digest and its topics current). Lessons are never made here."""
        proc = subprocess.run(
            [PY, "-m", "mimir_integrations.cli", "ingest", "--home", str(self.home)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"mimir ingest exited {proc.returncode}: {proc.stderr}")


class ClaudeCode(HookDriver):
    host = "claude-code"

    def _base(self, s: Session) -> dict[str, Any]:
        return {
            "session_id": s.sid,
            "transcript_path": str(self.root / "user" / f"{s.sid}.jsonl"),
            "cwd": s.cwd,
            "permission_mode": "default",
        }

    def _event(self, s: Session, name: str, **fields: Any) -> str:
        answer = self.hook({**self._base(s), "hook_event_name": name, **fields})
        return str(((answer or {}).get("hookSpecificOutput") or {}).get("additionalContext") or "")

    def start(self, s: Session) -> str:
        said = [
            self._event(s, "SessionStart", source="startup"),
            self._event(s, "UserPromptSubmit", prompt=s.ask),
        ]
        return "\n".join(x for x in said if x)

    def _tool(self, s: Session, cmd: str, n: int) -> dict[str, Any]:
        return {
            "tool_name": "Bash",
            "tool_input": {"command": cmd, "description": s.family.key},
            "tool_use_id": f"toolu_{s.sid}_{n}",
        }

    def before(self, s: Session, cmd: str, n: int) -> str:
        return self._event(s, "PreToolUse", **self._tool(s, cmd, n))

    def after(self, s: Session, cmd: str, n: int, res: Result) -> str:
        if res.ok:
            response = {"stdout": res.output, "stderr": "", "interrupted": False}
            return self._event(s, "PostToolUse", **self._tool(s, cmd, n), tool_response=response)
        error = f"Exit code {res.code}\n{res.output}"
        return self._event(
            s, "PostToolUseFailure", **self._tool(s, cmd, n), error=error, is_interrupt=False
        )

    def end(self, s: Session, turn: Turn) -> None:
        self._event(s, "Stop", stop_hook_active=False, last_assistant_message="Done.")
        self._event(s, "SessionEnd", reason="other")
        self.drain()


class Cline(HookDriver):
    """The VS Code extension's hooks (``TaskStart`` carries the task)."""

    host = "cline"

    def _event(self, s: Session, name: str, **fields: Any) -> str:
        payload = {
            "clineVersion": "3.x",
            "hookName": name,
            "taskId": s.sid,
            "workspaceRoots": [s.cwd],
            **fields,
        }
        answer = self.hook(payload) or {}
        return str(answer.get("contextModification") or "")

    def start(self, s: Session) -> str:
        return self._event(s, "TaskStart", taskStart={"taskMetadata": {"task": s.ask}})

    def before(self, s: Session, cmd: str, n: int) -> str:
        call = {"toolName": "execute_command", "parameters": {"command": cmd}}
        return self._event(s, "PreToolUse", preToolUse=call)

    def after(self, s: Session, cmd: str, n: int, res: Result) -> str:
        result = res.output if res.ok else f"Command exited with code {res.code}\n{res.output}"
        post = {
            "toolName": "execute_command",
            "parameters": {"command": cmd},
            "result": result,
            "success": res.ok,
            "executionTimeMs": 1200,
        }
        return self._event(s, "PostToolUse", postToolUse=post)

    def end(self, s: Session, turn: Turn) -> None:
        self._event(s, "TaskComplete", taskComplete={"taskMetadata": {"task": s.ask}})
        self.drain()


# -- in-process hosts ----------------------------------------------------------------------------


class InProcess(Driver):
    """A host that runs Mimir in its own process: the environment it would have, restored on
    :meth:`close`."""

    def __init__(self, root: Path, embedder: str) -> None:
        super().__init__(root, embedder)
        self._saved = {k: os.environ.get(k) for k in ("MIMIR_HOME", "MIMIR_SCOPE")}
        self._saved.update({k: os.environ.get(k) for k in ("MIMIR_EMBEDDER", "MIMIR_STORE_URI")})
        self._saved["MIMIR_AUTO_CONSOLIDATE"] = os.environ.get("MIMIR_AUTO_CONSOLIDATE")
        os.environ.pop("MIMIR_SCOPE", None)
        os.environ.pop("MIMIR_STORE_URI", None)
        os.environ.update(
            MIMIR_HOME=str(self.home), MIMIR_EMBEDDER=embedder, MIMIR_AUTO_CONSOLIDATE="0"
        )
        self._mimirs: dict[str, Any] = {}

    def mimir(self, cwd: str) -> Any:
        """The project's Mimir (one per project, as a host started in it would open)."""
        if cwd not in self._mimirs:
            from mimir_core import Mimir
            from mimir_core.scope import scope_for

            self._mimirs[cwd] = Mimir(
                self.home, embedder=self.embedder, scope=scope_for(cwd), auto_consolidate=False
            )
        return self._mimirs[cwd]

    def close(self) -> None:
        for m in self._mimirs.values():
            m.close()
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Hermes(InProcess):
    """Hermes Agent's memory-provider callbacks; the tool loop shows nothing of Mimir's."""

    def start(self, s: Session) -> str:
        from mimir_integrations.hermes import MimirMemoryProvider

        self._cwd = os.getcwd()
        os.chdir(s.cwd)  # Hermes runs in the project: the provider's scope comes from it
        self.provider = MimirMemoryProvider()
        self.provider.initialize(
            s.sid, hermes_home=str(self.root / "hermes"), platform="cli", agent_context="primary"
        )
        self.provider.system_prompt_block()
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": s.ask}]
        return str(self.provider.prefetch(s.ask) or "")

    def after(self, s: Session, cmd: str, n: int, res: Result) -> str:
        call_id = f"call_{s.sid}_{n}"
        args = json.dumps({"command": cmd})
        fn = {"name": "terminal", "arguments": args}
        self.messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": call_id, "type": "function", "function": fn}],
            }
        )
        content = json.dumps({"output": res.output, "exit_code": res.code, "error": None})
        self.messages.append(
            {"role": "tool", "name": "terminal", "tool_call_id": call_id, "content": content}
        )
        return ""

    def end(self, s: Session, turn: Turn) -> None:
        final = "Done." if any(c.ok for c in turn.calls) else "I could not get it to work."
        self.messages.append({"role": "assistant", "content": final})
        p = self.provider
        try:
            p.sync_turn(s.ask, final, session_id=s.sid, messages=self.messages)
            p.queue_prefetch(s.ask, session_id=s.sid)
            p.on_session_end(self.messages)
            p.shutdown()
        finally:
            os.chdir(self._cwd)


class LangGraph(InProcess):
    """A real compiled LangGraph graph whose agent node is the simulated agent."""

    def __init__(self, root: Path, embedder: str) -> None:
        super().__init__(root, embedder)
        self._apps: dict[str, Any] = {}
        self._turn: Turn | None = None

    def _app(self, cwd: str) -> Any:
        if cwd in self._apps:
            return self._apps[cwd]
        from langchain_core.tools import ToolException, tool
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import END, START, MessagesState, StateGraph
        from langgraph.prebuilt import ToolNode

        from mimir_integrations.langgraph import MimirMemoryNode

        class State(MessagesState):
            mimir_lessons: str

        memory = MimirMemoryNode(self.mimir(cwd))

        @tool
        def terminal(command: str) -> str:
            """Run a shell command in the project."""
            assert self._turn is not None
            res = self._turn.run(command)
            if not res.ok:
                raise ToolException(f"exit code {res.code}\n{res.output}")
            return res.output

        terminal.handle_tool_error = True
        graph = StateGraph(State)
        graph.add_node("recall", memory.before)
        graph.add_node("agent", self._agent)
        graph.add_node("tools", ToolNode([terminal], wrap_tool_call=memory.wrap_tool_call))
        graph.add_node("record", memory.after)
        graph.add_edge(START, "recall").add_edge("recall", "agent")
        graph.add_conditional_edges("agent", _route, ["tools", "record"])
        graph.add_edge("tools", "agent").add_edge("record", END)
        self._apps[cwd] = graph.compile(checkpointer=InMemorySaver())
        return self._apps[cwd]

    def _agent(self, state: dict[str, Any]) -> dict[str, Any]:
        from langchain_core.messages import AIMessage, ToolMessage

        turn = self._turn
        assert turn is not None
        last = state["messages"][-1]
        if isinstance(last, ToolMessage):
            turn.shown(_text(last.content))
        else:
            turn.begin(str(state.get("mimir_lessons") or ""))
        cmd = turn.choose()
        if cmd is None:
            return {"messages": [AIMessage("Done.")]}
        n = len(turn.calls) - 1
        call = {"name": "terminal", "args": {"command": cmd}, "id": f"call_{turn.s.sid}_{n}"}
        return {"messages": [AIMessage("", tool_calls=[call])]}

    def play(self, s: Session, turn: Turn) -> None:
        from langchain_core.messages import HumanMessage

        self._turn = turn
        try:
            config = {"configurable": {"thread_id": s.sid}, "recursion_limit": 50}
            self._app(s.cwd).invoke({"messages": [HumanMessage(s.ask)]}, config)
        finally:
            self._turn = None


def _route(state: dict[str, Any]) -> str:
    return "tools" if getattr(state["messages"][-1], "tool_calls", None) else "record"


def _text(content: Any) -> str:
    """A tool message's content as the model reads it (its text parts joined)."""
    if isinstance(content, list):
        return "\n".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content)
    return str(content)


class Mcp(InProcess):
    """An MCP-only host: the ``mimir_context`` prompt at task start, and its agent records each
    outcome with ``record_experience`` / ``record_failure``."""

    def __init__(self, root: Path, embedder: str) -> None:
        super().__init__(root, embedder)
        import anyio.from_thread

        self._stack = contextlib.ExitStack()
        self.portal = self._stack.enter_context(anyio.from_thread.start_blocking_portal())
        self._servers: dict[str, Any] = {}

    def _server(self, cwd: str) -> Any:
        if cwd not in self._servers:
            from mimir_integrations.mcp_server import build_server

            self._servers[cwd] = build_server(self.mimir(cwd), background=False)
        return self._servers[cwd]

    def start(self, s: Session) -> str:
        from mcp import Client

        self._session = contextlib.ExitStack()
        cm = self.portal.wrap_async_context_manager(Client(self._server(s.cwd)))
        self.client = self._session.enter_context(cm)
        got = self.portal.call(self.client.get_prompt, "mimir_context", {"task": s.ask})
        return str(got.messages[0].content.text)

    def after(self, s: Session, cmd: str, n: int, res: Result) -> str:
        if res.ok:
            name, args = "record_experience", {"task": s.ask, "action": cmd, "outcome": "success"}
        else:
            name = "record_failure"
            args = {"task": s.ask, "action": cmd, "reason": f"exit code {res.code}: {res.output}"}
        out = self.portal.call(self.client.call_tool, name, args)
        return "\n".join(c.text for c in out.content if getattr(c, "type", "") == "text")

    def end(self, s: Session, turn: Turn) -> None:
        self._session.close()

    def close(self) -> None:
        try:
            self._stack.close()
        finally:
            super().close()


DRIVERS: dict[str, type[Driver]] = {
    "claude-code": ClaudeCode,
    "cline": Cline,
    "hermes": Hermes,
    "langgraph": LangGraph,
    "mcp": Mcp,
    "no-memory": Driver,
}


def make_driver(host: str, root: Path, embedder: str) -> Driver:
    return DRIVERS[host](root, embedder)
