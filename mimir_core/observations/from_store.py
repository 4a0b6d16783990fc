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
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..ingest.spool import replace_file
from ..ingest.validate import ALL_SCOPES
from ..store.core import DOC, EXPERIENCES
from ..store.filters import LIVE, And, Eq, Filter, In, Not
from . import attempt_digest as ad
from .policy import Line, task_start_lines
from .tally import Tallies

if TYPE_CHECKING:
    from ..deps import Deps
    from ..types import Experience

log = logging.getLogger("mimir.observations")

#: Minimum task cosine for an experience to count as evidence on a task. With MiniLM, the
#: probability that two tasks at this cosine are the same kind of task is ~0.85
#: (:attr:`mimir_core.search.recommend.RecommendTuning.topic_logit`).
TOPIC_FLOOR = 0.5
#: Nearest experiences looked at per search...
CANDIDATES = 100
#: ...and, when all of them are on topic, searches again without the actions that already have
#: this many rows, at most this many times in all.
ENOUGH_ROWS = 8
ROUNDS = 3
#: Experiences a rebuilt digest starts from, the newest of its project.
REBUILD_ROWS = 5000
#: Centroid cosine from which a task joins a topic, chosen with the hooks' keyword floors on
#: the labelled set's tuning part (see :data:`attempt_digest.MATCH_FLOOR`).
TOPIC_JOIN = 0.6
#: Topics kept before the digest is rebuilt from the store (tasks pruned from the digest leave
#: their topics behind).
TOPICS_KEPT = 4 * ad.MAX_TASKS


def context_lines(
    deps: Deps, query: str, *, scope: str | None = None, skip: Collection[str] = ()
) -> list[Line]:
    """The observations for ``query`` (see the module doc). ``scope``: ``None`` tallies this
    instance's project as "here" and the others apart, ``"*"`` every project as "here", any
    other string that project only. ``skip``: normalised actions a lesson already covers."""
    from ..ingest.validate import scope_key

    where = LIVE
    here_scope: str | None = deps.scope
    if scope == ALL_SCOPES:
        here_scope = None
    elif scope is not None:
        here_scope = scope_key(scope, deps.redact_patterns)
        where = And(LIVE, Eq("scope", here_scope))
    if deps.store.count(EXPERIENCES) == 0:
        return []
    here, elsewhere = Tallies(), Tallies()
    for row in on_topic(deps, deps.embedder.embed_one(query), where):
        mine = here_scope is None or (row.get("scope") or "") == here_scope
        (here if mine else elsewhere).add_record(row)
    return task_start_lines(here, elsewhere, skip=skip)


def on_topic(deps: Deps, qvec: Any, where: Filter) -> list[dict[str, Any]]:
    """The experiences within :data:`TOPIC_FLOOR` of ``qvec``, as documents.

    One action repeated many times (a looping agent, or a source forging records) must not
    fill every candidate place and hide the other actions tried on the task: when the nearest
    :data:`CANDIDATES` are all on topic, the search runs again without the actions that already
    have :data:`ENOUGH_ROWS` rows, up to :data:`ROUNDS` times."""
    found: dict[str, dict[str, Any]] = {}
    per_action: dict[str, int] = {}
    skipped: list[str] = []
    for _round in range(ROUNDS):
        clause = where if not skipped else And(where, Not(In("action", skipped)))
        rows = deps.store.vector_search(
            EXPERIENCES, qvec, where=clause, limit=CANDIDATES, columns=["_rowid", DOC]
        )
        rows = deps.store.expand_docs(rows)
        near = [r for r in rows if 1.0 - float(r["_distance"]) >= TOPIC_FLOOR]
        for row in near:
            if row["id"] not in found:
                found[row["id"]] = row
                per_action[row["action"]] = per_action.get(row["action"], 0) + 1
        if len(rows) < CANDIDATES or len(near) < len(rows):
            break  # the store has no more on-topic rows than these
        more = [a for a, n in per_action.items() if n >= ENOUGH_ROWS and a not in skipped]
        if not more:
            break
        skipped += more
    return list(found.values())


def tool_lines(
    deps: Deps, action: str, *, task: str | None, scope: str | None, failed: bool
) -> list[Line]:
    """The repeat guard (``failed=False``: ``action`` is about to run) or the note right after
    it failed (``failed=True``; the failure is not stored yet), for an in-process host: this
    command's attempts in this project on tasks like ``task`` (every task without one), and
    what worked instead on them."""
    from ..search.actions import normalise_action
    from ..search.attempts import find_attempts
    from .policy import after_failure_lines, before_tool_lines

    akey = normalise_action(action)
    if not akey:
        return []
    by_scope = None
    here_scope = deps.scope if scope is None else (None if scope == ALL_SCOPES else scope)
    if here_scope is not None:
        from ..ingest.validate import scope_key

        by_scope = Eq("scope", scope_key(here_scope, deps.redact_patterns))
    where: Filter = LIVE if by_scope is None else And(LIVE, by_scope)
    qvec = deps.embedder.embed_one(task) if task else None
    own = find_attempts(
        deps.store,
        action,
        where=where,
        match="exact",
        qvec=qvec,
        min_similarity=TOPIC_FLOOR,
        k=100,
    )
    if not own and not failed:
        return []  # never tried here: nothing to say (and no second search)
    mine = Tallies()
    for hit in own:
        mine.add_record(_record(hit.experience))
    tasks = Tallies()
    if qvec is not None:
        for row in on_topic(deps, qvec, where):
            tasks.add_record(row)
    tally = mine.get(akey)
    if tally is not None:
        tasks.by_key[akey] = tally
    if failed:
        return after_failure_lines(tally, tasks, akey)
    return before_tool_lines(tally, tasks)


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


def fold(
    deps: Deps,
    experiences: Sequence[Experience],
    vectors: Sequence[Any] = (),
    *,
    create: bool = False,
) -> None:
    """Fold newly stored experiences (with their task ``vectors``, in order) into their
    projects' digests. Only where hooks read digests (the directory exists, or ``create``: the
    spool's drain); a project without a digest yet gets one rebuilt from the store. Best
    effort: a failure is logged."""
    directory = ad.digest_dir(deps.spool_dir)
    if not create and not directory.is_dir():
        return
    by_scope: dict[str, list[dict[str, Any]]] = {}
    task_vectors: dict[str, dict[str, Any]] = {}
    for i, exp in enumerate(experiences):
        by_scope.setdefault(exp.scope, []).append(_record(exp))
        if i < len(vectors):
            task_vectors.setdefault(exp.scope, {})[ad.normalise_task(exp.task)] = vectors[i]
    if not by_scope:
        return
    try:
        from ..lessons.lifecycle import signing_key

        key = signing_key(deps)
        for scope, records in by_scope.items():
            path = ad.paths(deps.spool_dir, scope)[0]
            topics = Topics(deps.spool_dir, scope)
            if path.exists() and len(topics) <= TOPICS_KEPT:
                assign = topics.assigner(task_vectors.get(scope, {}))
                ad.update(deps.spool_dir, scope, records, key, assign=assign)
            else:
                rebuild(deps, [scope])
    except Exception as exc:  # the hooks' view lags; the store has every record
        log.warning("could not update the attempts digest: %s: %s", type(exc).__name__, exc)


def rebuild(deps: Deps, scopes: Sequence[str] | None = None) -> int:
    """Rebuild the digests of ``scopes`` (``None``: every project that has one) from the
    store's newest experiences, their topics anew; returns how many were written."""
    import numpy as np

    from ..lessons.lifecycle import signing_key

    if scopes is None:
        scopes = existing_scopes(deps)
    key = signing_key(deps)
    done = 0
    for scope in scopes:
        rows = deps.store.select(
            EXPERIENCES,
            And(Eq("scope", scope), LIVE),
            [DOC, "vector"],
        )
        found = [(doc, row["vector"]) for row in rows if (doc := _document(row)) is not None]
        found.sort(key=lambda dv: float(dv[0].get("created_at") or 0.0))
        found = found[-REBUILD_ROWS:]
        vectors = {
            ad.normalise_task(str(doc.get("task") or "")): np.asarray(vec, dtype=np.float32)
            for doc, vec in found
        }
        topics = Topics(deps.spool_dir, scope, fresh=True)
        records = [doc for doc, _vec in found]
        ad.update(
            deps.spool_dir, scope, records, key, rebuild=True, assign=topics.assigner(vectors)
        )
        done += 1
    return done


class Topics:
    """A project's topics for the hooks' digest: incremental clusters of task vectors.

    Each topic keeps the running sum of its tasks' (unit) vectors in
    ``<spool>/attempts/<project>.topics.npy``, read only by processes that store experiences
    (hooks read the topic number each digest entry carries). A new task joins the topic whose
    centroid is closest, from a cosine of :data:`TOPIC_JOIN`, else founds one."""

    def __init__(self, spool_dir: Any, scope: str, *, fresh: bool = False) -> None:
        import numpy as np

        self.path = ad.paths(spool_dir, scope)[0].with_suffix(".topics.npy")
        self.sums: Any = None
        if not fresh:
            try:
                self.sums = np.load(self.path, allow_pickle=False)
            except (OSError, ValueError):
                self.sums = None

    def __len__(self) -> int:
        return 0 if self.sums is None else len(self.sums)

    def assign(self, vector: Any) -> int:
        """The topic of a task vector (joined, or founded)."""
        import numpy as np

        v = np.asarray(vector, dtype=np.float32)
        v = v / (float(np.linalg.norm(v)) or 1.0)
        if self.sums is not None and len(self.sums):
            norms = np.linalg.norm(self.sums, axis=1)
            sims = (self.sums @ v) / np.maximum(norms, 1e-9)
            best = int(np.argmax(sims))
            if float(sims[best]) >= TOPIC_JOIN:
                self.sums[best] += v
                return best
            self.sums = np.vstack([self.sums, v[None, :]])
        else:
            self.sums = v[None, :].copy()
        return len(self.sums) - 1

    def assigner(self, vectors: Mapping[str, Any]) -> Callable[[ad.AttemptDigest], None]:
        """What :func:`attempt_digest.update` calls: every task of the digest without a topic
        whose vector is known gets one, and the topics are saved."""

        def assign(digest: ad.AttemptDigest) -> None:
            import io

            import numpy as np

            changed = False
            for entry in digest.tasks.values():
                vec = vectors.get(entry.text)
                if entry.group < 0 and vec is not None:
                    entry.group = self.assign(vec)
                    changed = True
            if changed and self.sums is not None:
                buffer = io.BytesIO()
                np.save(buffer, self.sums, allow_pickle=False)
                replace_file(self.path, buffer.getvalue(), durable=False)

        return assign


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


def existing_scopes(deps: Deps) -> list[str]:
    """The projects that have a digest file (its signature is not checked: it is about to be
    rebuilt from the store either way)."""
    import json

    out: list[str] = []
    for path in sorted(ad.digest_dir(deps.spool_dir).glob("*.json")):
        try:
            scope = json.loads(path.read_bytes()).get("scope")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(scope, str):
            out.append(scope)
    return out


__all__ = [
    "TOPIC_FLOOR",
    "context_lines",
    "existing_scopes",
    "fold",
    "rebuild",
    "tool_lines",
]
