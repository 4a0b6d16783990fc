"""The shared, fail-open hook runner behind ``mimir hook <host> [--home DIR] [--config FILE]``.

A host runs the hook once per event with a JSON payload on stdin. The runner reads it, lets the
host module turn it into a capture and maybe an answer, prints the answer as one JSON object
on stdout, and always exits 0. Any error (bad JSON, an unknown event, a full disk) is logged to
``<home>/logs/hooks.log`` and the hook prints nothing, which every host reads as "carry on".

This module is on the hot path of every tool call: it imports the standard library and
Mimir's stdlib-only modules, never LanceDB, numpy, pydantic or a model.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from mimir_core.ingest import spool
from mimir_core.ingest.capture import Capture, Event
from mimir_core.ingest.capture.events import sha256_hex

from . import hosts

if TYPE_CHECKING:
    import re

    from mimir_core.ingest.capture import HookMapping
    from mimir_core.observations.policy import Line

#: ``mimir hook <name>`` → the module with ``handle(payload, ctx) -> dict | None`` (from
#: :data:`mimir_integrations.hosts.HOSTS`).
HOST_MODULES: dict[str, str] = hosts.hook_modules()
MAX_STDIN = 64 * 1024 * 1024
LOG_MAX_BYTES = 2 * 1024 * 1024
#: A background ``mimir ingest --consolidate`` at most this often (seconds).
BACKGROUND_EVERY = 120.0
USAGE = hosts.hook_usage()

Handler = Callable[[dict[str, Any], "HookContext"], "dict[str, Any] | None"]
#: The longest block a hook injects (characters).
BUDGET_CHARS = 2000


class Answer(NamedTuple):
    """A hook's answer to the agent: the fenced block (``""``: none), and, when the repeat
    guard is set to ask (``MIMIR_GUARD_ASK_AFTER``), why the user should confirm first."""

    text: str
    ask: str


def _ask_after() -> int:
    """``MIMIR_GUARD_ASK_AFTER``: ask before a command that failed this many times here and
    never worked (0, the default: never ask)."""
    raw = os.environ.get("MIMIR_GUARD_ASK_AFTER") or "0"
    try:
        return max(0, int(raw.strip()))
    except ValueError:
        return 0


def _env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")


def _user_patterns(home: Path) -> tuple[re.Pattern[str], ...]:
    """``MIMIR_REDACT_PATTERNS`` (a JSON list of regexes), compiled, so a user's own secrets are
    redacted before they reach the spool. Each bad entry is logged and skipped, the others kept
    (one typo must not let every secret through); the hook never fails. What the regex compiler
    warns about goes to the log too: a hook's stderr stays silent (hosts may show it)."""
    raw = os.environ.get("MIMIR_REDACT_PATTERNS")
    if not raw or not raw.strip():
        return ()
    import re  # only when the user set patterns: the hook's hot path stays lean
    import warnings

    try:
        patterns = json.loads(raw)
    except ValueError as exc:
        log(home, f"ignoring MIMIR_REDACT_PATTERNS={raw[:80]!r}: {exc}")
        return ()
    if not isinstance(patterns, list):
        log(home, f"ignoring MIMIR_REDACT_PATTERNS={raw[:80]!r}: expected a JSON list of strings")
        return ()
    compiled: list[re.Pattern[str]] = []
    for p in patterns:
        if not isinstance(p, str):
            log(home, f"MIMIR_REDACT_PATTERNS: skipping {p!r:.80}: not a string")
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                compiled.append(re.compile(p))
            except re.error as exc:
                log(home, f"MIMIR_REDACT_PATTERNS: skipping {p[:80]!r}: {exc}")
        for w in caught:
            log(home, f"MIMIR_REDACT_PATTERNS: {p[:80]!r}: {w.category.__name__}: {w.message}")
    return tuple(compiled)


class HookContext:
    """What a host module needs: the capture, lessons for injection, logging, background jobs."""

    def __init__(self, home: Path, raw: bytes) -> None:
        self.home = home
        self.spool = spool.spool_dir(home, os.environ.get("MIMIR_STORE_URI") or None)
        self.scope = os.environ.get("MIMIR_SCOPE") or None
        self.capture = Capture(
            self.spool,
            scope=self.scope if self.scope != "*" else None,
            redact_patterns=_user_patterns(home),
        )
        self.fingerprint = sha256_hex(raw)

    def claim(self, ev: Event) -> bool:
        """False when this very payload was already handled (a hook installed twice)."""
        return self.capture.claim(ev.session_id, self.fingerprint)

    def scope_of(self, ev: Event) -> str | None:
        """The project whose lessons (and global ones) and past attempts are given; ``None``
        for every project (``MIMIR_SCOPE=*``)."""
        if self.scope == "*":
            return None
        found = str(self.capture.meta(ev.session_id).get("scope") or "") or self.scope
        if not found and ev.cwd:  # the session's first event: its state is not written yet
            found = self.capture.scope_for(ev.cwd)
        return found

    def key(self) -> bytes | None:
        """The signing key the digests are checked with (``MIMIR_SIGNING_KEY``, else the
        per-install key file; ``None`` before there is one)."""
        from mimir_core.tools.digest import resolve_key

        return resolve_key(self.home, os.environ.get("MIMIR_SIGNING_KEY") or None)

    def answer(self, ev: Event, *, lessons_before_tools: bool = False) -> Answer:
        """What the agent is told at this event, as one fenced block: at a task's start its
        lessons and what was observed on tasks like it; before a tool runs, the repeat guard
        (and, with ``lessons_before_tools``, the task's lessons: hosts that ignore a task-start
        answer); after a failure, the lessons about the error, whether this command failed here
        before and what worked instead. A block given in this session before is not given again.
        On any error: logged, and nothing said."""
        try:
            return self._answer(ev, lessons_before_tools)
        except Exception as exc:
            log(self.home, f"answer for {ev.host} {ev.name}: {type(exc).__name__}: {exc}")
            return Answer("", "")

    def _answer(self, ev: Event, lessons_before_tools: bool) -> Answer:
        from mimir_core.ingest.capture.events import READ_ONLY_TOOLS, describe_action, is_mimir_tool
        from mimir_core.observations import guard

        if not ev.inject:
            return Answer("", "")
        scope = self.scope_of(ev)
        key = self.key()
        task = self.capture.current_task(ev.session_id)
        lines: list[Line] = []
        query, ask = "", ""
        if ev.kind in ("task", "start"):
            query = ev.text if ev.kind == "task" else task
            if query and scope is not None:
                lines = guard.task_lines(self.spool, scope, query, key)
            if not query:  # a session starts: what the project is about, for its lessons
                query = os.path.basename(ev.cwd.rstrip("/"))
        elif ev.kind == "pretool":
            low = ev.tool.lower()
            if low in READ_ONLY_TOOLS or is_mimir_tool(low):
                return Answer("", "")
            action = self.capture.action_of(ev.tool, ev.tool_input)
            if scope is not None and action:
                found = guard.before_tool(
                    self.spool, scope, task, action, key, ask_after=_ask_after()
                )
                lines = found.lines
                if lines and ev.event_id:  # its failure, if it fails, need not repeat this
                    self.capture.note_warned(ev.session_id, ev.event_id)
                if found.ask:
                    ask = "Mimir: " + "; ".join(line.text for line in found.lines)
            if lessons_before_tools:
                query = f"{task}\n{describe_action(ev.tool, ev.tool_input)}".strip()
        elif ev.kind == "tool" and not ev.ok:
            failed = self.capture.last_failure
            warned = bool(ev.event_id) and self.capture.was_warned(ev.session_id, ev.event_id)
            if scope is not None and failed is not None and not warned:
                from mimir_core.observations.attempt_digest import record_key

                lines = guard.after_failure(
                    self.spool,
                    scope,
                    task,
                    str(failed.get("action") or ""),
                    key,
                    record_key=record_key(failed),
                )
            query = f"{describe_action(ev.tool, ev.tool_input)}\n{ev.error[-500:]}"
        return Answer(self._block(ev, query, lines, scope, key), ask)

    def _block(
        self, ev: Event, query: str, lines: list[Line], scope: str | None, key: bytes | None
    ) -> str:
        from mimir_core.search.actions import normalise_action
        from mimir_core.tools.digest import lessons_for, render_block

        items = lessons_for(self.home, query, scope=scope, key=key) if query.strip() else []
        covered = {normalise_action(str(i.get("action") or "")) for i in items}
        facts = [line.text for line in lines if line.key not in covered]
        text = render_block(items, BUDGET_CHARS, observations=facts)
        if not text or not self.capture.offer_context(ev.session_id, text):
            return ""
        return text

    def background(self, why: str) -> None:
        """Start ``mimir ingest --consolidate`` detached (throttled; off with
        ``MIMIR_AUTO_CONSOLIDATE=0``): drains the spool and keeps the lessons digest current."""
        if not _env_flag("MIMIR_AUTO_CONSOLIDATE", True):
            return
        stamp = self.spool / "background.stamp"
        try:
            if time.time() - stamp.stat().st_mtime < BACKGROUND_EVERY:
                return
        except OSError:
            pass
        import subprocess

        spool.ensure_private_dir(self.spool)
        stamp.touch(mode=0o600)
        cmd = [sys.executable, "-m", "mimir_integrations.cli", "ingest", "--consolidate"]
        # The ingest's stderr goes to the hooks log: opened 0600 (``open()`` would take the
        # umask's 0666), like every log line.
        err = os.open(_log_path(self.home), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            subprocess.Popen(
                [*cmd, "--home", str(self.home)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
                close_fds=True,
            )
        finally:
            os.close(err)
        log(self.home, f"started background ingest ({why})")


def _log_path(home: Path) -> Path:
    logs = home / "logs"
    if not logs.is_dir():
        spool.ensure_private_dir(logs)  # the home too, when this is its first-ever file: 0700
    return logs / "hooks.log"


def log(home: Path, message: str) -> None:
    """Append one line to ``<home>/logs/hooks.log`` (0600, rotated at 2 MB). Never raises."""
    try:
        from mimir_core.redact.core import redact

        path = _log_path(home)
        try:
            if path.stat().st_size > LOG_MAX_BYTES:
                os.replace(path, path.with_name("hooks.log.1"))
        except OSError:
            pass
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        line = f"{stamp} pid={os.getpid()} {redact(message)}".replace("\n", "\n    ") + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except Exception:  # the log is the last resort; stderr stays silent (hosts may show it)
        pass


def _parse_args(argv: list[str]) -> tuple[str | None, str | None, str | None]:
    """(host, home, config) from ``argv``; raises ValueError on anything else."""
    host = home = config = None
    it = iter(argv)
    for arg in it:
        if arg in ("--home", "--config"):
            value = next(it, None)
            if value is None:
                raise ValueError(f"{arg} needs a value")
            if arg == "--home":
                home = value
            else:
                config = value
        elif arg.startswith("--home="):
            home = arg.split("=", 1)[1]
        elif arg.startswith("--config="):
            config = arg.split("=", 1)[1]
        elif host is None and not arg.startswith("-"):
            host = arg
        else:
            raise ValueError(f"unexpected argument {arg!r}")
    return host, home, config


def mapping_handler(mapping: HookMapping) -> Handler:
    """The handler of a host described by a declarative mapping (``mimir hook --config FILE``,
    or a host shipped as a mapping file): capture, then the answer in the mapping's reply field.
    A session's start forgets what was said before; its end and a compaction start the
    background ingest, as for the hosts written in Python."""

    def handle(payload: dict[str, Any], ctx: HookContext) -> dict[str, Any] | None:
        ev = mapping.event(payload)
        if ev.kind == "ignore" or not ctx.claim(ev):
            return None
        ctx.capture.handle(ev)
        if ev.kind == "start":
            ctx.capture.reset_context(ev.session_id)
        elif ev.kind in ("end", "compact"):
            ctx.background(ev.name)
        if not ev.inject or (ev.kind == "tool" and ev.ok):
            return None
        return mapping.answer(ctx.answer(ev, lessons_before_tools=True).text)

    return handle


def _handler(host: str | None, config: str | None) -> Handler:
    if config:
        from mimir_core.ingest.capture import HookMapping

        return mapping_handler(HookMapping.load(config))
    if host not in HOST_MODULES:
        raise ValueError(f"unknown host {host!r}; expected one of {', '.join(HOST_MODULES)}")
    handle_fn: Handler = importlib.import_module(HOST_MODULES[host]).handle
    return handle_fn


def _reply(text: str) -> None:
    """Print the answer. If the host closed its end of stdout, stdout is pointed at /dev/null so
    the interpreter's final flush cannot fail too (exit 120 and a traceback on stderr); the
    BrokenPipeError is then logged like any error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, sys.stdout.fileno())
            finally:
                os.close(null)
        except (OSError, ValueError):  # no real file descriptor behind sys.stdout
            pass
        raise


def main(argv: list[str] | None = None) -> int:
    """Run one hook invocation; always returns 0 (fail open)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    home = Path(os.environ.get("MIMIR_HOME") or Path.home() / ".mimir").expanduser()
    where = "hook"
    try:
        host, home_arg, config = _parse_args(args)
        if home_arg:
            home = Path(home_arg).expanduser()
        where = f"hook {host or config}"
        handler = _handler(host, config)
        raw = sys.stdin.buffer.read(MAX_STDIN + 1)
        if len(raw) > MAX_STDIN:
            raise ValueError(f"payload larger than {MAX_STDIN} bytes: ignored")
        payload = json.loads(raw)
        if not isinstance(payload, dict):
            raise ValueError(f"payload is a JSON {type(payload).__name__}, not an object")
        answer = handler(payload, HookContext(home, raw))
        if answer:
            _reply(json.dumps(answer, ensure_ascii=False))
    except Exception as exc:
        import traceback

        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        if not isinstance(exc, (ValueError, spool.SpoolError)):
            detail += "\n" + "".join(traceback.format_tb(exc.__traceback__)[-3:])
        if isinstance(exc, (OSError, spool.SpoolError)):  # a write failed: the capture is lost
            from mimir_core.ingest import lost

            lost.note(spool.spool_dir(home, os.environ.get("MIMIR_STORE_URI") or None), exc)
        log(home, f"{where}: {detail}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
