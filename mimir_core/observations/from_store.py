"""Observations in process: what ``Mimir.context()`` shows, and the upkeep of the hooks'
attempts digests.

``Mimir.context()`` finds the experiences on topic for its query by their task vectors (a
cosine floor, never a margin below the closest hit: an exact match must not shut out its
paraphrases), tallies this project's and other projects' apart, and words them with
:func:`~mimir_core.observations.policy.task_start_lines`. The hooks see the same tallies through
the attempts digest, which every write folds new experiences into (:func:`fold`) and which is
rebuilt from the store when it is missing or something was forgotten (:func:`rebuild`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..store import DOC, EXPERIENCES, sql_str
from . import attempt_digest as ad
from .policy import Line, task_start_lines
from .tally import Tallies

if TYPE_CHECKING:
    from ..memory import Mimir
    from ..types import Experience

log = logging.getLogger("mimir.observations")

#: Minimum task cosine for an experience to count as evidence on a task. With MiniLM, the
#: probability that two tasks at this cosine are the same kind of task is ~0.85
#: (:attr:`mimir_core.recommend.RecommendTuning.topic_logit`).
TOPIC_FLOOR = 0.5
#: Nearest experiences looked at.
CANDIDATES = 100
#: Experiences a rebuilt digest starts from, the newest of its project.
REBUILD_ROWS = 5000
ALL_SCOPES = "*"


def context_lines(
    m: Mimir, query: str, *, scope: str | None = None, skip: Collection[str] = ()
) -> list[Line]:
    """The observations for ``query`` (see the module doc). ``scope``: ``None`` tallies this
    instance's project as "here" and the others apart, ``"*"`` every project as "here", any
    other string that project only. ``skip``: normalised actions a lesson already covers."""
    from ..validate import scope_key

    where = "superseded_by IS NULL"
    here_scope: str | None = m.scope
    if scope == ALL_SCOPES:
        here_scope = None
    elif scope is not None:
        here_scope = scope_key(scope, m.redact_patterns)
        where += f" AND scope = {sql_str(here_scope)}"
    store = m.store
    if store.count(EXPERIENCES) == 0:
        return []
    qvec = m.embedder.embed_one(query)
    rows = store.vector_search(
        EXPERIENCES, qvec, where=where, limit=CANDIDATES, columns=["_rowid", DOC]
    )
    here, elsewhere = Tallies(), Tallies()
    for row in store.expand_docs(rows):
        if 1.0 - float(row["_distance"]) < TOPIC_FLOOR:
            continue
        mine = here_scope is None or (row.get("scope") or "") == here_scope
        (here if mine else elsewhere).add_record(row)
    return task_start_lines(here, elsewhere, skip=skip)


# -- the hooks' digests --------------------------------------------------------------------------


def _record(exp: Experience) -> dict[str, Any]:
    return {
        "task": exp.task,
        "action": exp.action,
        "outcome": exp.outcome,
        "score": exp.score,
        "reason": exp.reason,
        "scope": exp.scope,
        "source": exp.source,
        "session_id": exp.session_id,
        "thread_id": exp.thread_id,
        "created_at": exp.created_at.timestamp(),
        "idempotency_key": exp.idempotency_key or exp.id,
    }


def fold(m: Mimir, experiences: Iterable[Experience], *, create: bool = False) -> None:
    """Fold newly stored experiences into their projects' digests. Only where hooks read
    digests (the directory exists, or ``create``: the spool's drain); a project without a
    digest yet gets one rebuilt from the store. Best effort: a failure is logged."""
    directory = ad.digest_dir(m.spool_dir)
    if not create and not directory.is_dir():
        return
    by_scope: dict[str, list[dict[str, Any]]] = {}
    for exp in experiences:
        by_scope.setdefault(exp.scope, []).append(_record(exp))
    if not by_scope:
        return
    try:
        from ..lessons.lifecycle import signing_key

        key = signing_key(m)
        for scope, records in by_scope.items():
            if ad.paths(m.spool_dir, scope)[0].exists():
                ad.update(m.spool_dir, scope, records, key)
            else:
                rebuild(m, [scope])
    except Exception as exc:  # the hooks' view lags; the store has every record
        log.warning("could not update the attempts digest: %s: %s", type(exc).__name__, exc)


def rebuild(m: Mimir, scopes: Sequence[str] | None = None) -> int:
    """Rebuild the digests of ``scopes`` (``None``: every project that has one) from the
    store's newest experiences; returns how many were written."""
    from ..lessons.lifecycle import signing_key

    if scopes is None:
        scopes = existing_scopes(m)
    key = signing_key(m)
    done = 0
    for scope in scopes:
        rows = m.store.select(
            EXPERIENCES,
            f"scope = {sql_str(scope)} AND superseded_by IS NULL",
            [DOC],
        )
        records = [doc for doc in (_document(r) for r in rows) if doc is not None]
        records.sort(key=lambda r: float(r.get("created_at") or 0.0))
        ad.update(m.spool_dir, scope, records[-REBUILD_ROWS:], key, rebuild=True)
        done += 1
    return done


def _document(row: Mapping[str, Any]) -> dict[str, Any] | None:
    import json

    try:
        doc = json.loads(row.get(DOC) or "")
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    doc["idempotency_key"] = doc.get("idem_key") or doc.get("id")
    return doc


def existing_scopes(m: Mimir) -> list[str]:
    """The projects that have a digest file (its signature is not checked: it is about to be
    rebuilt from the store either way)."""
    import json

    out: list[str] = []
    for path in sorted(ad.digest_dir(m.spool_dir).glob("*.json")):
        try:
            scope = json.loads(path.read_bytes()).get("scope")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(scope, str):
            out.append(scope)
    return out


__all__ = ["TOPIC_FLOOR", "context_lines", "existing_scopes", "fold", "rebuild"]
