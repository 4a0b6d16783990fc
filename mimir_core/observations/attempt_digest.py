"""The attempts digest: this project's past attempts, small and signed, for hook processes
(stdlib only).

A hook runs once per tool call and cannot open LanceDB or load a model, yet the repeat guard
must know at once whether a command failed here before. So every process that writes
experiences (the spool's drain, ``Mimir.record``) also folds them into a per-project digest,
``<spool>/attempts/<project>.json``: the project's recent distinct tasks, each with its keywords
and a tally of every action tried on it (:class:`~mimir_core.observations.tally.ActionTally`).
It is signed with the lessons' HMAC key and never used when its signature fails.

Beside it, ``<project>.idx`` lists the digest's actions, one normalised action per line, so a
command with no history costs the guard one small read and a substring test, not a JSON parse.

Records captured a moment ago are still in the spool (``pending.jsonl``, or a batch a drain is
storing): :func:`spool_records` reads its tail, and the digest's list of records already folded
in keeps a record from being counted twice while a drain is half done.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..ingest.spool import BATCH_PREFIX, PENDING, ensure_private_dir, replace_file
from ..lessons.sign import canonical, sha256_hex, sign, verify
from ..search.actions import normalise_action
from ..text import query_terms
from ..tools.digest import keywords, verify_written
from .tally import ActionTally, Tallies

VERSION = 1
#: Distinct tasks kept per project (the most recently tried).
MAX_TASKS = 400
#: Actions kept per task (the most recently tried).
MAX_ACTIONS = 16
#: Folded-in records remembered (by a digest of their idempotency key) against double counting.
MAX_KEYS = 4000
TASK_CHARS = 300
#: The spool read by a hook: the last this many bytes of each file.
TAIL_BYTES = 512 * 1024
#: A past task is "like" the current one when their keywords' weighted overlap (Dice, by
#: inverse task frequency) reaches this; at most this many of the best are pooled; without any,
#: the best one from the looser floor is taken. Their topics then bring their paraphrases
#: (:meth:`AttemptDigest.pool`). Chosen on the labelled set's tuning part (leave one task out:
#: a task of the same family pooled for 82% of tasks, 8% of what is pooled from other
#: families; on the test part 83% and 8%; keywords alone from 0.5: 31% and 30%):
#: ``python -m bench.quality`` reports it.
MATCH_FLOOR = 0.4
MATCH_LIMIT = 12
LOOSE_FLOOR = 0.2
DIRNAME = "attempts"


def normalise_task(task: str) -> str:
    """A task as the digest keys it: case and spacing folded, clipped."""
    return " ".join(task.lower().split())[:TASK_CHARS]


def record_key(record: Mapping[str, Any]) -> str:
    """What makes a record the same record (its idempotency key, else its id), as a short
    digest; ``""`` when it has neither."""
    raw = record.get("idempotency_key") or record.get("idem_key") or record.get("id")
    return sha256_hex(str(raw).encode("utf-8"))[:12] if raw else ""


def digest_dir(spool_dir: str | os.PathLike[str]) -> Path:
    return Path(spool_dir) / DIRNAME


def scope_name(scope: str) -> str:
    """The file name stem of a project's digest."""
    return sha256_hex(scope.encode("utf-8"))[:16]


class TaskEntry:
    """One distinct task: its text, keywords, newest attempt and every action's tally (read
    from the file only when asked for: a hook looks at a few of the tasks it loads)."""

    __slots__ = ("_acts", "_raw", "at", "group", "kw", "text")

    def __init__(self, text: str, kw: list[str] | None = None, at: float = 0.0) -> None:
        self.text = text
        self.kw = keywords(text) if kw is None else kw
        self.at = at
        #: The topic (a cluster of task vectors, assigned where experiences are stored) this
        #: task belongs to; ``-1`` when not known (a task only seen in the spool so far).
        self.group = -1
        self._acts: dict[str, ActionTally] | None = {}
        self._raw: Mapping[str, Any] = {}

    @property
    def acts(self) -> dict[str, ActionTally]:
        """Every action's tally on this task, keyed by normalised action."""
        if self._acts is None:
            parsed = {}
            for key, data in self._raw.items():
                tally = ActionTally.from_json(str(key), data)
                if tally is not None:
                    parsed[str(key)] = tally
            self._acts, self._raw = parsed, {}
        return self._acts

    def tried(self) -> list[str]:
        """The normalised actions tried on this task (without reading their tallies)."""
        return list(self._raw) if self._acts is None else list(self._acts)

    def to_json(self) -> dict[str, Any]:
        if self._acts is None:
            return dict(self._raw)
        return {k: t.to_json() for k, t in self._acts.items()}

    @classmethod
    def from_json(
        cls, text: str, kw: list[str] | None, at: float, acts: object, group: object = -1
    ) -> TaskEntry:
        """An entry as the file has it; its tallies are read on first use."""
        entry = cls(text, kw, at)
        entry.group = group if isinstance(group, int) and not isinstance(group, bool) else -1
        entry._acts = None
        entry._raw = acts if isinstance(acts, dict) else {}
        return entry


class AttemptDigest:
    """A project's attempts digest (see the module doc)."""

    def __init__(self, scope: str) -> None:
        self.scope = scope
        self.tasks: dict[str, TaskEntry] = {}
        self.keys: dict[str, None] = {}  # an ordered set of folded-in record keys

    # -- folding records in ------------------------------------------------------------------

    def add_record(self, record: Mapping[str, Any]) -> bool:
        """Fold one record in (False when it was folded in before or is not an attempt)."""
        task, action = record.get("task"), record.get("action")
        if not isinstance(task, str) or not isinstance(action, str) or not action.strip():
            return False
        key = record_key(record)
        if key and key in self.keys:
            return False
        text = normalise_task(task)
        entry = self.tasks.get(text)
        if entry is None:
            entry = self.tasks[text] = TaskEntry(text)
        one = Tallies()
        one.add_record(record)
        for tally in one:
            have = entry.acts.get(tally.key)
            if have is None:
                entry.acts[tally.key] = tally
            else:
                have.merge(tally)
            entry.at = max(entry.at, tally.last_at)
        if key:
            self.keys[key] = None
        return True

    def prune(self) -> None:
        """Keep the newest :data:`MAX_TASKS` tasks, :data:`MAX_ACTIONS` actions each, and the
        newest :data:`MAX_KEYS` record keys."""
        if len(self.tasks) > MAX_TASKS:
            newest = sorted(self.tasks.items(), key=lambda kv: kv[1].at)[-MAX_TASKS:]
            self.tasks = dict(newest)
        for entry in self.tasks.values():
            if len(entry.tried()) > MAX_ACTIONS:
                acts = sorted(entry.acts.items(), key=lambda kv: kv[1].last_at)[-MAX_ACTIONS:]
                entry.acts.clear()
                entry.acts.update(acts)
        while len(self.keys) > MAX_KEYS:
            self.keys.pop(next(iter(self.keys)))

    # -- reading -----------------------------------------------------------------------------

    def pool(self, query: str) -> list[TaskEntry]:
        """The past tasks whose evidence counts for ``query``: those its keywords match
        (:meth:`match`; the single best one from a looser floor), and every task of their
        topics. Keywords find a task worded like this one; its topic brings the paraphrases
        that share few words with it (assigned by their embeddings when they were stored)."""
        found = self.match(query)
        if not found:
            found = self.match(query, floor=LOOSE_FLOOR, limit=1)
        groups = {e.group for e in found if e.group >= 0}
        if not groups:
            return found
        seen = {id(e) for e in found}
        return [
            *found,
            *(e for e in self.tasks.values() if e.group in groups and id(e) not in seen),
        ]

    def match(
        self, query: str, *, limit: int = MATCH_LIMIT, floor: float = MATCH_FLOOR
    ) -> list[TaskEntry]:
        """The past tasks like ``query``, best first: the same text, or keywords overlapping
        enough (Dice of the keywords' inverse-task-frequency weights; identifiers double)."""
        text = normalise_task(query)
        same = self.tasks.get(text)
        qterms = set(keywords(query))
        if not qterms:
            return [same] if same is not None else []
        idents = set(query_terms(query)[0])
        entries = list(self.tasks.values())
        df: dict[str, int] = {}
        for e in entries:
            for t in set(e.kw):
                df[t] = df.get(t, 0) + 1
        n = len(entries) + 1

        def w(term: str) -> float:
            base = math.log(1.0 + n / (df.get(term, 0) + 0.5))
            return base * (2.0 if term in idents else 1.0)

        qweight = sum(w(t) for t in qterms)
        scored: list[tuple[float, float, TaskEntry]] = []
        for e in entries:
            terms = set(e.kw)
            shared = qterms & terms
            if not shared and e is not same:
                continue
            both = sum(w(t) for t in shared)
            dice = 2.0 * both / (qweight + sum(w(t) for t in terms) or 1.0)
            if e is same:
                dice = 1.0
            if dice >= floor:
                scored.append((dice, e.at, e))
        scored.sort(key=lambda s: (-s[0], -s[1]))
        return [e for _d, _a, e in scored[:limit]]

    def tallies(self, entries: Iterable[TaskEntry]) -> Tallies:
        """Every action's attempts on ``entries``, pooled."""
        out = Tallies()
        for e in entries:
            for tally in e.acts.values():
                out.merge_tally(tally)
        return out

    def action_keys(self) -> set[str]:
        return {k for e in self.tasks.values() for k in e.tried()}

    # -- the file's form ---------------------------------------------------------------------

    def body(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "scope": self.scope,
            "generated_at": round(time.time(), 3),
            "tasks": [
                {
                    "t": e.text,
                    "kw": e.kw,
                    "at": round(e.at, 3),
                    "g": e.group,
                    "a": e.to_json(),
                }
                for e in self.tasks.values()
            ],
            "keys": list(self.keys),
        }

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> AttemptDigest | None:
        """The digest of a parsed file body (``None`` when it is not one)."""
        if body.get("version") != VERSION or not isinstance(body.get("scope"), str):
            return None
        out = cls(str(body["scope"]))
        tasks = body.get("tasks")
        if not isinstance(tasks, list):
            return None
        for item in tasks:
            if not isinstance(item, dict) or not isinstance(item.get("t"), str):
                continue
            kw = item.get("kw")
            words = [str(k) for k in kw] if isinstance(kw, list) else None
            at = item.get("at")
            when = float(at) if isinstance(at, (int, float)) else 0.0
            entry = TaskEntry.from_json(item["t"], words, when, item.get("a"), item.get("g"))
            out.tasks[entry.text] = entry
        keys = body.get("keys")
        out.keys = dict.fromkeys(str(k) for k in keys) if isinstance(keys, list) else {}
        return out


# -- the files -----------------------------------------------------------------------------------


def paths(spool_dir: str | os.PathLike[str], scope: str) -> tuple[Path, Path]:
    """(the digest, its action index) of ``scope``."""
    stem = digest_dir(spool_dir) / scope_name(scope)
    return stem.with_suffix(".json"), stem.with_suffix(".idx")


def save(spool_dir: str | os.PathLike[str], digest: AttemptDigest, key: bytes) -> Path:
    """Write ``digest`` (pruned, signed with ``key``) and its action index, each atomically.
    The index goes second: a hook that finds an action in it finds the digest that has it."""
    digest.prune()
    body = digest.body()
    data = dict(body, signature=sign(key, body))
    path, index = paths(spool_dir, digest.scope)
    ensure_private_dir(path.parent)
    replace_file(path, canonical(data), durable=False)
    keys = sorted(digest.action_keys())
    replace_file(index, ("\n" + "\n".join(keys) + "\n").encode("utf-8"), durable=False)
    return path


def load(spool_dir: str | os.PathLike[str], scope: str, key: bytes | None) -> AttemptDigest | None:
    """The project's digest if it exists and its signature verifies with ``key``, else
    ``None`` (no key: nothing can be verified, so nothing is read)."""
    if key is None:
        return None
    path, _index = paths(spool_dir, scope)
    try:
        raw = path.read_bytes()
        data = json.loads(raw)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    signature = data.pop("signature", "")
    if not verify_written(key, raw, signature) and not verify(key, data, signature):
        return None
    found = AttemptDigest.from_body(data)
    return found if found is not None and found.scope == scope else None


def has_action(spool_dir: str | os.PathLike[str], scope: str, action_key: str) -> bool:
    """Whether the project's digest holds ``action_key`` (one small read; a missing index
    says no)."""
    _path, index = paths(spool_dir, scope)
    try:
        data = index.read_bytes()
    except OSError:
        return False
    return ("\n" + action_key + "\n").encode("utf-8") in data


def update(
    spool_dir: str | os.PathLike[str],
    scope: str,
    records: Sequence[Mapping[str, Any]],
    key: bytes,
    *,
    rebuild: bool = False,
    assign: Callable[[AttemptDigest], object] | None = None,
    lock_timeout: float = 10.0,
) -> int:
    """Fold ``records`` (all of ``scope``) into the project's digest under its lock (a new
    digest when ``rebuild`` or when none verifies); returns how many were new to it.
    ``assign`` then gives the tasks without a topic theirs (it has the vectors: see
    :func:`mimir_core.observations.from_store.fold`)."""
    from ..store.locking import FileLock

    directory = digest_dir(spool_dir)
    ensure_private_dir(directory)
    with FileLock(directory / f"{scope_name(scope)}.lock", lock_timeout).hold():
        digest = None if rebuild else load(spool_dir, scope, key)
        if digest is None:
            digest = AttemptDigest(scope)
        added = sum(digest.add_record(r) for r in sorted(records, key=_created))
        if assign is not None:
            assign(digest)
        if added or rebuild or not paths(spool_dir, scope)[0].exists():
            save(spool_dir, digest, key)
        return added


def _created(record: Mapping[str, Any]) -> float:
    value = record.get("created_at")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


# -- the spool's tail ----------------------------------------------------------------------------


def spool_records(
    spool_dir: str | os.PathLike[str],
    scope: str,
    *,
    needle: bytes | None = None,
    skip: Mapping[str, None] | None = None,
) -> list[dict[str, Any]]:
    """The records of ``scope`` captured but not yet folded into the digest: the tails of
    ``pending.jsonl`` and of any batch a drain is storing. ``needle``: only lines holding these
    bytes, in lower case, are parsed (the guard's command); ``skip``: keys already folded in."""
    directory = Path(spool_dir)
    try:
        names = sorted(n for n in os.listdir(directory) if n.startswith(BATCH_PREFIX))
    except OSError:
        return []
    out: list[dict[str, Any]] = []
    for name in [*names, PENDING]:
        data = _tail(directory / name)
        if not data or (needle is not None and needle not in data.lower()):
            continue
        for raw in data.splitlines():
            if needle is not None and needle not in raw.lower():
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            record = line.get("record") if isinstance(line, dict) else None
            if not isinstance(record, dict) or (record.get("scope") or "") != scope:
                continue
            if skip is not None and record_key(record) in skip:
                continue
            out.append(record)
    return out


def _tail(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > TAIL_BYTES:
                fh.seek(size - TAIL_BYTES)
                data = fh.read()
                return data[data.find(b"\n") + 1 :]  # the first line is cut: drop it
            return fh.read()
    except OSError:
        return b""


def with_spool(
    spool_dir: str | os.PathLike[str],
    scope: str,
    key: bytes | None,
    *,
    needle: bytes | None = None,
) -> AttemptDigest:
    """The project's digest (empty when there is none) with the spool's tail folded in."""
    digest = load(spool_dir, scope, key) or AttemptDigest(scope)
    for record in spool_records(spool_dir, scope, needle=needle, skip=digest.keys):
        digest.add_record(record)
    return digest


def action_key(action: str) -> str:
    """The normalised form the digest and its index key actions by."""
    return normalise_action(action)


__all__ = [
    "AttemptDigest",
    "TaskEntry",
    "action_key",
    "has_action",
    "load",
    "normalise_task",
    "paths",
    "record_key",
    "save",
    "spool_records",
    "update",
    "with_spool",
]
