"""The normalised capture event and the rules that turn a tool call into an action (stdlib only).

Every host payload (Claude Code, Cline, a declarative mapping) becomes an :class:`Event`; the
episode builder (:mod:`mimir_core.ingest.capture.episodes`) only ever sees events.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

#: Event kinds: a session starts, the user gives a task, a tool is about to run (``pretool``:
#: a moment to inject, nothing to record), a tool ran, the agent stopped (end of a turn), the
#: session ended, the context is about to be compacted; ``ignore`` for the rest.
KINDS = ("start", "task", "pretool", "tool", "stop", "end", "compact", "ignore")


class Event:
    """One host event, normalised.

    ``name`` is the host's own event name (``PostToolUseFailure``, ``tool_result``...); ``text``
    the task of a ``task`` event; ``inject`` says whether the host takes context back from this
    event. (A plain class: ``dataclasses`` would cost a hook process ~5 ms of imports.)
    """

    __slots__ = (
        "cwd",
        "error",
        "event_id",
        "host",
        "inject",
        "interrupted",
        "kind",
        "name",
        "ok",
        "session_id",
        "text",
        "tool",
        "tool_input",
        "ts",
    )

    def __init__(
        self,
        host: str,
        kind: str,
        session_id: str,
        name: str = "",
        cwd: str = "",
        text: str = "",
        tool: str = "",
        tool_input: Any = None,
        ok: bool = True,
        interrupted: bool = False,
        error: str = "",
        event_id: str = "",
        ts: float | None = None,
        inject: bool = False,
    ) -> None:
        self.host = host
        self.kind = kind
        self.session_id = session_id
        self.name = name
        self.cwd = cwd
        self.text = text
        self.tool = tool
        self.tool_input = tool_input
        self.ok = ok
        self.interrupted = interrupted
        self.error = error
        self.event_id = event_id
        self.ts = time.time() if ts is None else ts
        self.inject = inject

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"Event({fields})"


def sha256_hex(data: bytes) -> str:
    """SHA-256 hex digest without loading OpenSSL (the lessons' builtin hash)."""
    from ...lessons.sign import sha256_hex as builtin_sha256_hex

    return builtin_sha256_hex(data)


# -- noise: what a successful call of these tools tells is too little to keep -----------------

READ_ONLY_TOOLS = frozenset(
    {
        # Claude Code
        "read",
        "glob",
        "grep",
        "ls",
        "webfetch",
        "websearch",
        "todowrite",
        "todoread",
        "notebookread",
        "bashoutput",
        "exitplanmode",
        "listmcpresourcestool",
        "readmcpresourcetool",
        "toolsearch",
        # Cline (extension and CLI)
        "read_file",
        "read_files",
        "list_files",
        "search_files",
        "search_codebase",
        "list_code_definition_names",
        "ask_question",
        "ask_followup_question",
        "attempt_completion",
        "plan_mode_respond",
        "fetch_web_content",
        "web_fetch",
        "access_mcp_resource",
        "load_mcp_documentation",
        "focus_chain",
        # Gemini CLI
        "list_directory",
        "grep_search",
        "search_file_content",
        "read_many_files",
        "google_web_search",
        "write_todos",
        "update_topic",
        "list_background_processes",
        "read_background_output",
        "enter_plan_mode",
        "exit_plan_mode",
        "activate_skill",
        # GitHub Copilot CLI
        "view",
        "read_bash",
        "list_bash",
        "rg",
        "report_intent",
        "fetch_copilot_cli_documentation",
        "read_agent",
        "list_agents",
        # OpenAI-format hosts (Hermes Agent)
        "web_search",
        "web_extract",
        "session_search",
        "skills_list",
        "skill_view",
        "todo",
        "memory",
        "clarify",
        "browser_snapshot",
        "browser_get_images",
        "vision_analyze",
        "read_terminal",
    }
)
#: Tools whose ``command`` (or ``commands``) argument is the whole action.
SHELL_TOOLS = frozenset(
    {
        "bash",
        "execute_command",
        "run_commands",
        "run_command",
        "shell",
        "terminal",
        "run_shell_command",
        "exec_command",
        "run_terminal_cmd",
    }
)
#: Tools that write a file: recorded as ``edit <path>``.
EDIT_TOOLS = frozenset(
    {
        "edit",
        "multiedit",
        "write",
        "notebookedit",
        "write_to_file",
        "replace_in_file",
        "editor",
        "write_file",
        "patch",
        "edit_file",
        "str_replace_editor",
        "apply_patch",
        "replace",
    }
)
_READ_ONLY_COMMANDS = frozenset(
    [
        "ls",
        "cat",
        "pwd",
        "echo",
        "head",
        "tail",
        "less",
        "more",
        "wc",
        "which",
        "whoami",
        "env",
        "printenv",
        "date",
        "find",
        "grep",
        "rg",
        "fd",
        "tree",
        "file",
        "stat",
        "du",
        "df",
        "type",
        "realpath",
        "dirname",
        "basename",
        "id",
        "uname",
        "hostname",
        "nl",
        "sort",
        "uniq",
    ]
)
_READ_ONLY_GIT = frozenset(
    ["status", "log", "diff", "show", "branch", "remote", "rev-parse", "ls-files", "blame"]
)
_SPLIT = re.compile(r"&&|\|\||;|\||\n")


def is_mimir_tool(tool: str) -> bool:
    """Mimir's own tools (recall, lessons...): calling them is not an experience to keep."""
    return "mimir" in tool.lower()


def is_read_only_command(command: str) -> bool:
    """A shell command that only reads (``ls``, ``git status``, ``cat x | head``)."""
    if ">" in command or "`" in command or "$(" in command:
        return False
    parts = [p.strip() for p in _SPLIT.split(command) if p.strip()]
    if not parts:
        return True
    for part in parts:
        words = part.split()
        while words and "=" in words[0] and not words[0].startswith("-"):  # FOO=1 cmd
            words = words[1:]
        if not words:
            continue
        head = words[0].rsplit("/", 1)[-1]
        if head == "git" and len(words) > 1 and words[1] in _READ_ONLY_GIT:
            continue
        if head not in _READ_ONLY_COMMANDS:
            return False
    return True


def is_noise_call(tool: str, tool_input: Any) -> bool:
    """Whether a call of ``tool`` with ``tool_input`` that *succeeded* tells too little to keep:
    reading, listing, searching, a read-only shell command, Mimir's own tools."""
    low = tool.lower()
    if low in READ_ONLY_TOOLS or is_mimir_tool(low):
        return True
    if low in SHELL_TOOLS:
        return is_read_only_command(shell_command(tool_input))
    return False


def is_noise(event: Event) -> bool:
    """A successful read-only call (reading, listing, searching, our own recall): skip it."""
    if event.kind != "tool" or not event.ok or event.interrupted:
        return False
    return is_noise_call(event.tool, event.tool_input)


# -- actions: what was tried, in words a later recall can match --------------------------------


def shell_command(tool_input: Any) -> str:
    """The command line of a shell tool's input (``command``, or Cline's ``commands`` list)."""
    if isinstance(tool_input, str):
        return tool_input
    if not isinstance(tool_input, dict):
        return ""
    cmd = tool_input.get("command")
    if isinstance(cmd, str):
        return cmd
    cmds = tool_input.get("commands")
    if isinstance(cmds, str):  # the extension's map<string,string> carries lists as JSON text
        try:
            cmds = json.loads(cmds)
        except ValueError:
            return cmds
    if isinstance(cmds, list):
        return " && ".join(str(c) for c in cmds)
    return ""


def _edited_path(tool_input: Any) -> str:
    if not isinstance(tool_input, dict):
        return ""
    for key in ("file_path", "path", "notebook_path", "filePath", "target_file"):
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def describe_action(tool: str, tool_input: Any, limit: int = 600) -> str:
    """What a tool call tried: the command, ``edit <path>``, or the tool and its arguments."""
    low = tool.lower()
    if low in SHELL_TOOLS:
        text = shell_command(tool_input)
    elif low in EDIT_TOOLS:
        path = _edited_path(tool_input)
        text = f"edit {path}" if path else f"{tool} (edit)"
    else:
        try:
            args = json.dumps(tool_input, ensure_ascii=False, sort_keys=True, default=str)
        except (TypeError, ValueError):
            args = str(tool_input)
        text = tool if tool_input in (None, {}, "") else f"{tool} {args}"
    text = text.strip() or tool or "tool call"  # whitespace kept: redaction reads line ends
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip_tail(text: str, limit: int) -> str:
    """``text`` shortened to its first line and its end (errors say most at the end)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    first, _, _rest = text.partition("\n")
    first = first[: limit // 3]
    tail = text[-(limit - len(first) - 5) :]
    return f"{first}\n…\n{tail}"


# -- episodes: the shape of the records every host's capture writes ----------------------------

#: Longest action, and longest step of a success's sequence of steps.
MAX_ACTION = 600
MAX_STEP = 200
MAX_STEPS_LISTED = 8


def collapse(actions: list[str]) -> list[str]:
    """Consecutive repeats folded: ``pytest ×3``."""
    out: list[str] = []
    counts: list[int] = []
    for action in actions:
        if out and out[-1] == action:
            counts[-1] += 1
        else:
            out.append(action)
            counts.append(1)
    return [a if n == 1 else f"{a} ×{n}" for a, n in zip(out, counts, strict=True)]


def after_steps(actions: list[str]) -> list[str]:
    """The ``after_steps`` context of a failure: the last steps that led to it."""
    return [a[:MAX_STEP] for a in actions][-5:]


def success_summary(
    actions: list[str], tools: list[str], failures: int, last_error: str
) -> tuple[str, str, dict[str, Any]]:
    """(action, reason, context) of the success that closes an episode.

    ``actions`` are the steps that succeeded after the episode's last failure; the action is
    that sequence (repeats folded, long ones elided), the reason says how many failed attempts
    it took and the last error."""
    steps = collapse([a[:MAX_STEP] for a in actions])
    if len(steps) > MAX_STEPS_LISTED:
        steps = [*steps[:3], f"… {len(steps) - 7} more …", *steps[-4:]]
    action = " → ".join(steps)
    if len(action) > MAX_ACTION:
        action = action[: MAX_ACTION - 1] + "…"
    context: dict[str, Any] = {"steps": len(actions), "tools": sorted(set(tools))}
    reason = ""
    if failures:
        context["failed_attempts"] = failures
        reason = f"worked after {failures} failed attempt(s); last error: {last_error[:400]}"
    return action, reason, context


_LESSON_LINE = re.compile(r"^- \[([^\]\s]+)\]", re.MULTILINE)


def lesson_ids(block: str) -> list[str]:
    """The ids of the lessons a rendered lessons block shows, in order (its lesson lines start
    ``- [<id>]``, see :func:`mimir_core.tools.digest.render_line`)."""
    return list(dict.fromkeys(_LESSON_LINE.findall(block)))
