"""Episodes: tool calls grouped into attempts per session and task, written to the spool.

An experience is "task → what was tried → how it ended", not one row per ``ls``:

* a successful read-only call (reading, listing, searching) is noise and is skipped;
* a failed call is an attempt that ended in failure: it is spooled at once (so that recall sees
  it a moment later) with the task, the failed action, the error, and the steps that led to it;
* the steps that succeed after the last failure are the attempt that worked: when the turn
  ends (``Stop``, a new task, the session's end) they are spooled as one success whose action
  is that sequence of steps, with the number of failures it took.

State lives in small files under ``<spool>/sessions/<session>/`` (``meta.json``, an append-only
``steps.jsonl`` and ``seen/`` markers that make a hook invoked twice for one event a no-op), so
every hook process can stay stdlib-only and short. Idempotency keys derive from the host's ids,
so closing an episode twice (a crash, two hook directories) never stores it twice.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from ...ingest import spool
from ...redact.core import PatternLike, cap, sanitize
from .events import (
    MAX_ACTION,
    Event,
    after_steps,
    clip_tail,
    describe_action,
    is_noise,
    lesson_ids,
    sha256_hex,
    success_summary,
)

MAX_TASK = 1000
MAX_ERROR = 1200
#: An episode left open this long (a crashed host) is closed by the next drain.
STALE_AFTER = 6 * 3600.0
#: A session directory with nothing pending is removed after this long.
FORGET_AFTER = 7 * 86400.0
#: Two runs of a hook for one payload arrive within this many seconds of each other.
DUPLICATE_WINDOW = 30.0
STEPS = "steps.jsonl"
META = "meta.json"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


#: Text longer than this is cut at a line or word boundary before redaction (which then sees
#: every secret whole: a cut never runs through a token).
MAX_SCAN = 64 * 1024


def _bounded(text: str, *, tail: bool = False) -> str:
    if len(text) <= MAX_SCAN:
        return text
    if tail:  # errors say most at the end: keep the first line and the last part
        first = text.split("\n", 1)[0][:500]
        rest = text[-MAX_SCAN:]
        cut = max(rest.find("\n"), rest.find(" "))
        return first + "\n…\n" + (rest[cut + 1 :] if cut >= 0 else "")
    head = text[:MAX_SCAN]
    cut = max(head.rfind("\n"), head.rfind(" "))
    return head[:cut] if cut > 0 else ""


def _one_line(text: str, limit: int = MAX_ACTION) -> str:
    """Whitespace folded (after redaction, which needs the line ends), then capped."""
    return cap(" ".join(text.split()), limit)


def _clean(
    text: str, limit: int, *, tail: bool = False, extra: tuple[PatternLike, ...] = ()
) -> str:
    """Redacted (``<private>`` spans removed, secrets masked), then capped to ``limit``."""
    return sanitize(_bounded(text, tail=tail), limit=limit, extra_patterns=extra)


def _read_lines(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                try:
                    obj = json.loads(raw)
                except ValueError:
                    continue  # a torn line of a crashed hook: the step is lost, not the episode
                if isinstance(obj, dict):
                    out.append(obj)
    except FileNotFoundError:
        pass
    return out


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    """Replace ``path`` with ``obj`` atomically; on a short write (a full disk) the old file
    stays and :class:`~mimir_core.ingest.spool.SpoolError` says so (the hook logs it)."""
    data = json.dumps(obj, ensure_ascii=False).encode("utf-8")  # one write, not one per chunk
    try:
        spool.replace_file(path, data, durable=False)  # no fsync on a hook's every event
    except OSError as exc:
        raise spool.SpoolError(f"cannot write {path}: {exc}") from exc


def session_key(session_id: str) -> str:
    """A file-name-safe, collision-free directory name for a session id.

    Never ``.`` or ``..`` (which would resolve outside ``sessions/`` and let a session's end
    remove every other session's state) and never hidden: a leading dot becomes ``_``, and any
    id that changed gets a hash of the original."""
    safe = _SAFE.sub("_", session_id)[:80]
    if safe.startswith("."):
        safe = "_" + safe[1:]
    if safe != session_id:
        safe += "-" + sha256_hex(session_id.encode("utf-8"))[:10]
    return safe or "unknown"


class Capture:
    """Turns events into spooled experience records for one store's spool directory.

    ``scope`` overrides the project scope (else it is derived from the event's ``cwd``);
    ``redact_patterns`` are the user's own secret patterns (sources or compiled), applied with the
    built-in ones before anything reaches the spool.
    """

    def __init__(
        self,
        spool_dir: str | os.PathLike[str],
        *,
        scope: str | None = None,
        redact_patterns: tuple[PatternLike, ...] = (),
    ) -> None:
        self.spool = Path(spool_dir)
        self.sessions = self.spool / "sessions"
        self.claims = self.spool / "claims"
        self.scope = scope
        self.redact_patterns = redact_patterns
        #: The failure record :meth:`handle` spooled last (``None`` before any).
        self.last_failure: dict[str, Any] | None = None

    # -- session state ---------------------------------------------------------------------------

    def session_path(self, session_id: str) -> Path:
        """Where a session's state lives (maybe not created): the one place a session id
        becomes a path, always a direct child of ``sessions/``."""
        path = self.sessions / session_key(session_id)
        if path.parent != self.sessions or path.name in (".", ".."):  # session_key rules it out
            raise ValueError(f"session id {session_id[:80]!r} is not a safe directory name")
        return path

    def session_dir(self, session_id: str) -> Path:
        """The state directory of a session (created)."""
        path = self.session_path(session_id)
        if not path.is_dir():
            spool.ensure_private_dir(path)  # each missing parent 0700 too, whatever the umask
        return path

    def meta(self, session_id: str) -> dict[str, Any]:
        """The session's state: host, cwd, scope, current task, lessons injected."""
        return self.meta_at(self.session_dir(session_id))

    def _save_meta(self, session_id: str, meta: dict[str, Any]) -> None:
        _write_json(self.session_dir(session_id) / META, meta)

    def _session_meta(self, ev: Event) -> dict[str, Any]:
        meta = self.meta(ev.session_id)
        changed = False
        if not meta:
            meta = {"host": ev.host, "session_id": ev.session_id, "injected": []}
            changed = True
        if ev.cwd and meta.get("cwd") != ev.cwd:
            meta["cwd"] = ev.cwd
            meta["scope"] = self.scope_for(ev.cwd)
            changed = True
        if changed:
            self._save_meta(ev.session_id, meta)
        return meta

    def scope_for(self, cwd: str) -> str:
        """The project of a working directory (its repository root; the configured scope wins)."""
        if self.scope is not None:
            return self.scope
        from ...scope import scope_for

        try:
            return scope_for(cwd)
        except OSError:
            return cwd

    def claim(self, session_id: str, fingerprint: str, window: float = DUPLICATE_WINDOW) -> bool:
        """True unless the same payload was claimed in this session less than ``window`` seconds
        ago (hooks installed in two directories run twice for one event: only the first run
        captures and answers; the same prompt typed again later is a new event)."""
        # Claims live outside the session's state: the first run of an end event removes that
        # state, and its twin must still find the claim (else it handles the event again, and
        # under load trips over the removal half done).
        seen = self.claims / session_key(session_id)
        marker = seen / fingerprint[:40]
        try:
            spool.ensure_private_dir(seen)
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileNotFoundError:  # the drain pruned this session's claims just now
            spool.ensure_private_dir(seen)
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            try:
                if time.time() - marker.stat().st_mtime < window:
                    return False
                os.utime(marker)
            except OSError:
                return False
        return True

    def current_task(self, session_id: str) -> str:
        """The session's current task ("" when the host has not told it yet)."""
        return str(self.meta(session_id).get("task") or "")

    def offer_context(self, session_id: str, text: str) -> bool:
        """Whether to give the lessons block ``text`` to the agent: False if this session already
        got this very block (since its context was last reset). Either way the ids of the
        lessons it shows join those the current task's experiences carry as
        ``recalled_lesson_ids``: a block not repeated is still in the agent's context."""
        digest = sha256_hex(text.encode("utf-8"))[:16]
        meta = self.meta(session_id)
        given = list(meta.get("blocks") or [])
        fresh = digest not in given
        ids = list(dict.fromkeys([*meta.get("injected", []), *lesson_ids(text)]))[-50:]
        if not fresh and ids == meta.get("injected"):
            return False  # nothing to remember: no write on this hot path
        if fresh:
            meta["blocks"] = [*given, digest][-20:]
        meta["injected"] = ids
        self._save_meta(session_id, meta)
        return fresh

    def note_warned(self, session_id: str, event_id: str) -> None:
        """The repeat guard warned before the tool call ``event_id``: what its failure would
        say (it failed before, what worked instead) was just said."""
        meta = self.meta(session_id)
        meta["warned"] = [*list(meta.get("warned") or []), event_id][-20:]
        self._save_meta(session_id, meta)

    def was_warned(self, session_id: str, event_id: str) -> bool:
        """Whether :meth:`note_warned` was called for ``event_id`` in this session."""
        return event_id in (self.meta(session_id).get("warned") or [])

    def reset_context(self, session_id: str) -> None:
        """The host's context was reset (new, cleared or compacted): blocks may be given again."""
        meta = self.meta(session_id)
        if meta.get("blocks"):
            meta["blocks"] = []
            self._save_meta(session_id, meta)

    # -- events ----------------------------------------------------------------------------------

    def handle(self, ev: Event) -> None:
        """Capture one event: remember the task, spool failures, close episodes."""
        if ev.kind in ("ignore", "pretool", "compact"):
            return
        if ev.kind == "tool" and is_noise(ev):
            return
        meta = self._session_meta(ev)
        if ev.kind == "task":
            self.close(ev.session_id)
            meta = self.meta(ev.session_id) or meta
            meta["task"] = _clean(ev.text, MAX_TASK, extra=self.redact_patterns)
            meta["task_id"] = ev.event_id or f"{ev.ts:.6f}"
            meta["injected"] = []
            self._save_meta(ev.session_id, meta)
        elif ev.kind == "tool":
            self._tool(ev, meta)
        elif ev.kind in ("stop", "end"):
            self.close(ev.session_id)
            if ev.kind == "end":
                remove_tree(self.session_path(ev.session_id))

    def _tool(self, ev: Event, meta: dict[str, Any]) -> None:
        steps_path = self.session_dir(ev.session_id) / STEPS
        step_id = ev.event_id or sha256_hex(f"{ev.tool}{ev.ts}{ev.tool_input}".encode())[:16]
        step = {
            "k": "step" if ev.ok else "fail",
            "t": ev.ts,
            "id": step_id,
            "tool": ev.tool,
            "action": self.action_of(ev.tool, ev.tool_input),
        }
        if not ev.ok:
            error = _clean(ev.error, 8 * MAX_ERROR, tail=True, extra=self.redact_patterns)
            step["error"] = clip_tail(error, MAX_ERROR)
            step["interrupted"] = ev.interrupted
            before = _since_last_failure(_read_lines(steps_path))
            record = self._failure_record(ev, meta, step, before)
            spool.append(self.spool, record)
            self.last_failure = record
        spool.append_json(steps_path, step)

    def action_of(self, tool: str, tool_input: Any) -> str:
        """A tool call's action as records store it: described, redacted, on one line (the
        repeat guard looks a command up in this very form)."""
        described = describe_action(tool, tool_input, MAX_SCAN)
        return _one_line(_clean(described, MAX_SCAN, extra=self.redact_patterns))

    def _task_of(self, meta: dict[str, Any], tool_input: Any = None) -> str:
        task = str(meta.get("task") or "")
        if not task and isinstance(tool_input, dict):  # Claude Code's Bash says what it is for
            desc = tool_input.get("description")
            task = (
                _clean(desc, MAX_TASK, extra=self.redact_patterns) if isinstance(desc, str) else ""
            )
        if not task:
            project = os.path.basename(str(meta.get("cwd") or "").rstrip("/")) or "a project"
            task = f"work in {project}"
        return task

    def _base(self, meta: dict[str, Any], key: str, ts: float) -> dict[str, Any]:
        return {
            "scope": meta.get("scope") or self.scope or "",
            "source": meta.get("host") or "hook",
            "session_id": str(meta.get("session_id") or "")[:200] or None,
            "created_at": ts,
            "recalled_lesson_ids": list(meta.get("injected") or []),
            "idempotency_key": key[:200],
        }

    def _failure_record(
        self, ev: Event, meta: dict[str, Any], step: dict[str, Any], before: list[dict[str, Any]]
    ) -> dict[str, Any]:
        outcome = "partial" if ev.interrupted else "failure"
        context: dict[str, Any] = {"host": ev.host, "tool": ev.tool, "hook": ev.name}
        if before:
            context["after_steps"] = after_steps([str(s.get("action", "")) for s in before])
        return {
            "task": self._task_of(meta, ev.tool_input),
            "action": step["action"],
            "outcome": outcome,
            "reason": step.get("error") or "failed",
            "context": context,
            **self._base(meta, f"{ev.host}:{ev.session_id}:fail:{step['id']}", ev.ts),
        }

    # -- closing ---------------------------------------------------------------------------------

    def close(self, session_id: str) -> int:
        """Close the session's open episode: spool its final attempt. Returns records spooled."""
        path = self.session_path(session_id)
        if not path.is_dir():
            return 0
        spool.set_aside(path / STEPS, path / f"closing-{time.time_ns()}.jsonl")
        spooled = 0
        meta = self.meta(session_id)
        for closing in sorted(path.glob("closing-*.jsonl")):
            record = self._success_record(meta, _read_lines(closing))
            if record is not None:
                spool.append(self.spool, record)
                spooled += 1
            os.unlink(closing)
        return spooled

    def _success_record(
        self, meta: dict[str, Any], lines: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        failures = [s for s in lines if s.get("k") == "fail"]
        done = _since_last_failure(lines)
        if not done:
            return None  # nothing ran, or it ended in a failure that is spooled already
        action, reason, summary = success_summary(
            [str(s.get("action", "")) for s in done],
            [str(s.get("tool", "")) for s in done],
            len(failures),
            str(failures[-1].get("error", "")) if failures else "",
        )
        context: dict[str, Any] = {"host": meta.get("host") or "hook", **summary}
        key = f"{meta.get('host')}:{meta.get('session_id')}:ok:{done[0].get('id')}"
        return {
            "task": self._task_of(meta),
            "action": action,
            "outcome": "success",
            "reason": reason,
            "context": context,
            **self._base(meta, key, float(done[-1].get("t") or time.time())),
        }

    def close_stale(self, max_idle: float = STALE_AFTER, now: float | None = None) -> int:
        """Close episodes idle for ``max_idle`` seconds (a host that crashed); forget old sessions.

        Called by the drain, under its lock. Returns the number of records spooled."""
        now = time.time() if now is None else now
        spooled = 0
        for path in _subdirs(self.sessions):
            newest = _newest_file(path)
            if now - newest < max_idle:
                continue
            meta_sid = self.meta_at(path).get("session_id")
            if isinstance(meta_sid, str) and meta_sid:
                spooled += self.close(meta_sid)
            if now - newest >= FORGET_AFTER:
                remove_tree(path)
        for path in _subdirs(self.claims):  # a claim matters for DUPLICATE_WINDOW seconds
            if now - _newest_file(path) >= max(max_idle, DUPLICATE_WINDOW):
                remove_tree(path)
        return spooled

    @staticmethod
    def meta_at(path: Path) -> dict[str, Any]:
        try:
            with open(path / META, encoding="utf-8") as fh:
                data = json.load(fh)
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}


def scrub_sessions(spool_dir: str | os.PathLike[str], texts: list[str]) -> int:
    """Remove from every session's state the steps that a forgotten experience came from.

    A step goes when its action or error is part of one of ``texts`` (the experience's action and
    reason) or contains one of them, so a forgotten record's words do not wait in
    ``steps.jsonl`` until the session ends. Returns the number of step lines removed."""
    needles = [t for t in texts if t and len(t) >= 4]
    if not needles:
        return 0

    def keep(line: bytes) -> bool:
        try:
            step = json.loads(line)
        except ValueError:
            return True
        if not isinstance(step, dict):
            return True
        for field in ("action", "error"):
            value = step.get(field)
            if (
                isinstance(value, str)
                and len(value) >= 4
                and any(value in n or n in value for n in needles)
            ):
                return False
        return True

    removed = 0
    for path in sorted(Path(spool_dir, "sessions").glob("*/*.jsonl")):
        if path.name == STEPS or path.name.startswith("closing-"):
            removed += spool.rewrite(path, keep)
    return removed


def _subdirs(path: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(path) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _newest_file(path: Path) -> float:
    """The newest mtime of the files directly in ``path`` (0 when none); files a hook removes
    meanwhile are skipped."""
    newest = 0.0
    try:
        entries = list(os.scandir(path))
    except OSError:
        return newest
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False):
                newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
        except OSError:
            continue
    return newest


def remove_tree(path: Path) -> None:
    """Remove a session directory and what is in it (``shutil`` costs a hook ~4 ms to import)."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                remove_tree(Path(entry.path))
            else:
                os.unlink(entry.path)
        except OSError:
            pass
    try:
        os.rmdir(path)
    except OSError:
        pass


def _since_last_failure(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The successful steps after the last failure (deduplicated by step id)."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for line in lines:
        if line.get("k") == "fail":
            out, seen = [], set()
        elif line.get("k") == "step" and str(line.get("id")) not in seen:
            seen.add(str(line.get("id")))
            out.append(line)
    return out
