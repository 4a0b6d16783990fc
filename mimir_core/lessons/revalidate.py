"""Revalidation: another author's lesson earns "confirmed here" on this installation's evidence.

A lesson whose ``provenance.author`` is another installation's key (it came through the shared
store, or ``mimir import``) is served only with the tag "from <author>, not yet confirmed here"
until this installation's own ε-gate (:func:`~.gate.offline_gate`) passes it on *local*
evidence: the experiences on its topic here, minus the ones the author cited (those are the
author's word, not evidence gathered here). When local evidence contradicts it (the gate's
upper bound below zero, or its action's newest tries here break its claim: :func:`.fade.broken`)
it is quarantined **here** (not served here, left as it is for the rest of the team). Each new
verdict is written to the shared audit log under the lesson, naming this installation: that is
how the author (and the team) hears of it.

Verdicts live in the private home (``<home>/team/revalidated.json``, per store), each bound to
the lesson version (its signature) it judged: a changed lesson is judged again.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..ingest.spool import ensure_private_dir, replace_file
from ..types import Lesson

if TYPE_CHECKING:
    from ..deps import Deps

log = logging.getLogger("mimir.lessons")

STATE_FILE = ("team", "revalidated.json")
CONFIRMED = "confirmed"
PENDING = "pending"
CONTRADICTED = "contradicted"


def _path(deps: Deps) -> Path:
    return deps.home.joinpath(*STATE_FILE)


def _all(deps: Deps) -> dict[str, Any]:
    try:
        data = json.loads(_path(deps).read_text("utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def verdicts(deps: Deps) -> dict[str, dict[str, Any]]:
    """Lesson id → this installation's verdict on it (for this store)."""
    got = _all(deps).get(str(deps.store_uri))
    return got if isinstance(got, dict) else {}


def _save(deps: Deps, mine: dict[str, dict[str, Any]]) -> None:
    data = _all(deps)
    data[str(deps.store_uri)] = mine
    path = _path(deps)
    ensure_private_dir(path.parent)
    replace_file(path, json.dumps(data, indent=1, sort_keys=True).encode("utf-8"))


def author_of(lesson: Lesson) -> str | None:
    got = lesson.provenance.get("author")
    return got if isinstance(got, str) and got else None


def author_name(deps: Deps, lesson: Lesson) -> str:
    """The author's name: the trust list's (signed by the admin), else the one it gave."""
    from . import trust

    kid = author_of(lesson) or ""
    tv = trust.view(deps)
    if tv is not None and tv.entry(kid) is not None:
        return tv.name(kid)
    return str(lesson.provenance.get("author_name") or kid[:12])


def foreign(deps: Deps, lesson: Lesson) -> bool:
    """Whether another installation wrote the lesson (one naming no author is this one's)."""
    from .lifecycle import author_key

    kid = author_of(lesson)
    return kid is not None and kid != author_key(deps).key_id


def here(
    deps: Deps, lesson: Lesson, known: dict[str, dict[str, Any]] | None = None
) -> tuple[str, str]:
    """(verdict here, provenance tag for the prompt): ``own`` with no tag, ``confirmed``,
    ``pending`` (not yet confirmed here) or ``contradicted`` (not served here)."""
    if not foreign(deps, lesson):
        return "own", ""
    got = (known if known is not None else verdicts(deps)).get(lesson.id) or {}
    verdict = str(got.get("verdict") or PENDING)
    if got.get("sig") != lesson.signature and verdict != CONTRADICTED:
        verdict = PENDING  # a changed lesson is judged again
    who = author_name(deps, lesson)
    if verdict == CONFIRMED:
        return verdict, f"from {who}, confirmed here"
    return verdict, f"from {who}, not yet confirmed here"


def judge(deps: Deps, lesson: Lesson) -> tuple[str, str]:
    """(verdict, detail) of the ε-gate on local evidence for one lesson."""
    from ..search.actions import command_signature, normalise_action
    from .consolidate import BALANCE
    from .evidence import outcomes, topic_of
    from .fade import broken
    from .gate import MIN_GROUP, offline_gate

    if not lesson.action:
        return PENDING, "nothing to test here: the lesson names no action"
    key = str(lesson.provenance.get("action_key") or normalise_action(lesson.action))
    sig = command_signature(lesson.action)
    tvec, avec = deps.embedder.embed([lesson.trigger, lesson.action])
    _cen, topic = topic_of(deps.store, lesson, tvec)
    cited = {
        *lesson.supporting_ids,
        *lesson.contradicting_ids,
        *[str(i) for i in (lesson.provenance.get("topic_ids") or [])],
    }
    local = [e for e in topic if e.id not in cited]
    if not local:
        return PENDING, "no local evidence on its topic yet"
    lately = broken(lesson.kind, key, sig, avec, local)
    if lately:
        return CONTRADICTED, f"local evidence: {lately}"
    res = offline_gate(
        outcomes(lesson.kind, key, sig, avec, local), balance=BALANCE.get(lesson.kind, "")
    )
    if res.passed:
        return CONFIRMED, res.detail
    crowded = res.n_with >= MIN_GROUP and res.n_without >= MIN_GROUP
    if crowded and res.lift + res.noise < 0.0:
        return CONTRADICTED, res.detail
    return PENDING, res.detail or f"{len(local)} local experience(s): not enough yet"


def revalidate(deps: Deps, *, force: bool = False) -> dict[str, str]:
    """Judge every active lesson of another author not yet judged in its current version;
    returns lesson id → new verdict. Each changed verdict is audited (the author's news)."""
    from ..store.filters import And, Eq, Like, Not
    from .lifecycle import author_key, load_many, log_event, refresh_digest

    me = author_key(deps)
    own = '%"author":"' + me.key_id + '"%'  # canonical JSON: no spaces
    where = And(Eq("status", "active"), Like("payload", '%"author":"%'), Not(Like("payload", own)))
    mine = verdicts(deps)
    changed: dict[str, str] = {}
    for lesson, ok in load_many(deps, where, refresh=False):
        if not ok or lesson.status != "active" or not foreign(deps, lesson):
            continue
        old = mine.get(lesson.id) or {}
        if not force and old.get("sig") == lesson.signature and old.get("verdict") != PENDING:
            continue
        verdict, detail = judge(deps, lesson)
        mine[lesson.id] = {
            "verdict": verdict,
            "sig": lesson.signature,
            "at": time.time(),
            "detail": detail[:300],
        }
        if verdict == PENDING or (
            verdict == old.get("verdict") and old.get("sig") == lesson.signature
        ):
            continue  # only news is audited: confirmed or contradicted here
        changed[lesson.id] = verdict
        deps.audit(
            "revalidate",
            lesson.id,
            f"revalidated_{verdict}",
            {
                "by": me.key_id,
                "by_name": me.name,
                "author": author_of(lesson),
                "detail": detail[:300],
            },
        )
        log_event(deps.home, "revalidated", lesson=lesson.id, verdict=verdict)
    if changed or mine != verdicts(deps):
        _save(deps, mine)
    if changed:
        refresh_digest(deps)
    return changed


def confirmed_by(deps: Deps, lesson_id: str) -> list[str]:
    """Names of the installations whose local evidence confirmed the lesson (audit log)."""
    names: list[str] = []
    from .api import audit_log

    for event in audit_log(deps.store, lesson_id, limit=200):
        if event.event == f"revalidated_{CONFIRMED}":
            name = str(event.detail.get("by_name") or event.detail.get("by") or "")
            if name and name not in names:
                names.append(name)
    return names
