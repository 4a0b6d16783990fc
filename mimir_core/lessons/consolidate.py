"""One consolidation run: new experiences → topics → candidates → gate → signed lessons.

* **One at a time.** A non-blocking lock (``<home>/locks/consolidate.lock``): a second process
  returns at once with ``ran=False`` and the reason.
* **Incremental.** A watermark in the store's meta (newest ``created_at`` seen and the row count)
  selects the new experiences; the run re-mines only the topics they fall into (their
  neighbourhood by task embedding). If rows appeared with older timestamps or disappeared (the
  count does not add up), the run rescans everything, so nothing is missed.
* **Duplicates merge.** A candidate for an action that already has a lesson on the same topic
  updates that lesson (evidence, gate, tallies) instead of adding another.
* **Contradictions supersede.** A candidate that says the opposite about the same action as an
  active lesson on the same topic (or that the LLM judge says contradicts it) supersedes it once
  it passes the gate: the old one stays on record with ``invalid_at`` set. "Same topic" is
  decided by the task-embedding clustering (never by shared words); a lesson is on a topic when
  most of its recorded topic members fall into it. Likewise a candidate narrowed to some
  projects (its action went the other way in another, see
  :func:`~mimir_core.lessons.mine.placements`) supersedes the same lesson served globally or in
  a contradicting project; it merges only with a lesson of its own scope.
* **Revisions.** For each active lesson, the evidence recorded *after* it was learned is mined
  on its own, so an action that used to work and now fails is caught without waiting for the
  all-time tally to flip.
* Active lessons on touched topics are reviewed by the circuit breaker.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..ingest.spool import ensure_private_dir, replace_file
from ..search.actions import command_signature
from ..store.core import EXPERIENCES, LESSONS, arrow_rows
from ..store.filters import LIVE, And, Range
from ..types import ConsolidationReport, GateResult, Lesson
from .evidence import (
    MAX_TOPIC_IDS,
    SAME_ACTION,
    Exp,
    apply_evidence,
    feedback_scores,
    load_exps,
    outcomes,
)
from .fade import ADMITTED_UNTIL, FADED_AT, MIN_FRESH, broken, made_again, may_return, stale
from .gate import breaker, offline_gate
from .lifecycle import Write, log_event, row_valid, write_batch
from .mine import Draft, average_linkage, mine, topics
from .review import review
from .storage import LESSON_COLUMNS

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..deps import Deps

    Vec = npt.NDArray[np.float32]

    from .judge import Judge

log = logging.getLogger("mimir.lessons")

WATERMARK = "lessons.watermark"
LAST_RUN = "lessons.last_run"
#: Neighbours of a new experience (task cosine) pulled into an incremental run.
NEIGHBOUR_FLOOR = 0.25
NEIGHBOURS = 200
#: Above this share of new experiences a run simply rescans everything.
FULL_SHARE = 0.3
#: A lesson without recorded topic members is on a group's topic when the group's closest task
#: has at least this cosine to its trigger (and the group on average :data:`SAME_TOPIC_MEAN`).
SAME_TOPIC = 0.85
SAME_TOPIC_MEAN = 0.6
#: Contradicting evidence must be this close to a lesson's own evidence, relative to how close
#: that evidence is to itself (its spread, capped at :data:`SPREAD_CAP`), to supersede it.
CONTRADICTION_MARGIN = 0.1
SPREAD_CAP = 0.9
#: With an LLM judge saying "contradicts", the triggers must still be at least this close.
SAME_TOPIC_LLM = 0.5
#: The side of the gate's comparison that holds the alternatives, averaged action by action
#: (:func:`~mimir_core.lessons.gate.offline_gate`): an ``avoid`` lesson's followers.
BALANCE = {"avoid": "followed"}


@dataclass
class Known:
    """An existing lesson as consolidation sees it."""

    lesson: Lesson
    valid: bool
    trigger_vec: Vec
    avec: Vec | None = None
    members: set[str] = field(default_factory=set)
    member_vecs: Vec | None = None


# -- locking -----------------------------------------------------------------------------------


class TryLock:
    """A non-blocking inter-process lock (``flock``); ``acquired`` says if we got it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.acquired = False

    def __enter__(self) -> TryLock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no cross-process exclusion
            self.acquired = True
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.acquired = True
            os.ftruncate(self.fd, 0)
            os.write(self.fd, str(os.getpid()).encode())
        except OSError:
            os.close(self.fd)
            self.fd = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            import fcntl

            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


@contextlib.contextmanager
def _machines(deps: Deps, dry_run: bool) -> Iterator[bool]:
    """The store's lease when other machines may consolidate it too (:mod:`.lease`)."""
    from .lease import lease, shared

    if dry_run or not shared(deps):
        yield True
        return
    with lease(deps) as got:
        yield got


def _revalidate(deps: Deps) -> None:
    """Judge other authors' lessons on this installation's evidence (:mod:`.revalidate`);
    a failure is logged, never the run's."""
    from .revalidate import revalidate

    try:
        revalidate(deps)
    except Exception as exc:  # derived state: the next run tries again
        log.warning("revalidation failed: %s", exc)
        log_event(deps.home, "revalidation_failed", error=str(exc))


def lock_path(deps: Deps) -> Path:
    """The consolidation lock of this home."""
    return deps.home / "locks" / "consolidate.lock"


def state_path(home: Path) -> Path:
    """A tiny stdlib-readable note of the last run (for the auto-consolidation check)."""
    return home / "state" / "consolidate.json"


# -- the run -----------------------------------------------------------------------------------


def run(
    deps: Deps, *, dry_run: bool = False, judge: Judge | None = None, force: bool = False
) -> ConsolidationReport:
    """Consolidate; see the module docstring."""
    started = time.perf_counter()
    with TryLock(lock_path(deps)) as lock:
        if not lock.acquired:
            return ConsolidationReport(
                dry_run=dry_run,
                ran=False,
                reason="another consolidation of this store is running; it will cover these "
                "experiences",
            )
        with _machines(deps, dry_run) as got:
            if not got:
                return ConsolidationReport(
                    dry_run=dry_run,
                    ran=False,
                    reason="another machine is consolidating this store; it will cover these "
                    "experiences",
                )
            report = _run_locked(deps, dry_run=dry_run, judge=judge, force=force)
            if not dry_run:
                _revalidate(deps)
    if judge is not None:
        report.llm_calls, report.llm_tokens = judge.usage()
    report.seconds = round(time.perf_counter() - started, 3)
    if not dry_run:
        log_event(
            deps.home,
            "consolidated",
            examined=report.examined,
            admitted=report.admitted,
            merged=report.merged,
            superseded=report.superseded,
            quarantined=report.quarantined,
            pending=len(report.pending),
            llm_calls=report.llm_calls,
            seconds=report.seconds,
        )
    return report


def _select_new(deps: Deps, force: bool) -> tuple[list[Exp], list[Exp], bool, dict[str, Any]]:
    """(new experiences, working set, full rescan?, next watermark)."""
    store = deps.store
    live = LIVE
    total = store.count(EXPERIENCES, live)
    try:
        mark = json.loads(store.meta().get(WATERMARK, "") or "{}")
    except ValueError:
        mark = {}
    new: list[Exp] = []
    full = force or not mark
    if not full:
        new = load_exps(store, And(live, Range("created_at", gt=float(mark["ts"]))))
        full = total != int(mark["count"]) + len(new) or len(new) > FULL_SHARE * max(total, 1)
    if full:
        new = load_exps(store, live)
        working = new
    else:
        working = _neighbourhood(deps, new)
    ts = max([float(mark.get("ts", 0.0))] + [e.created_at for e in new])
    return new, working, full, {"ts": ts, "count": total}


def _neighbourhood(deps: Deps, new: Sequence[Exp]) -> list[Exp]:
    """The new experiences and their task neighbours (the topics a change can touch)."""
    from .evidence import EXP_COLUMNS

    found = {e.id: e for e in new}
    for e in new:
        rows = deps.store.vector_search(
            EXPERIENCES,
            e.vec,
            where=LIVE,
            limit=NEIGHBOURS,
            columns=EXP_COLUMNS,
        )
        for row in rows:
            if 1.0 - float(row["_distance"]) >= NEIGHBOUR_FLOOR and row["id"] not in found:
                found[row["id"]] = Exp.from_row(row)
    return sorted(found.values(), key=lambda x: (x.created_at, x.id))


def _known(deps: Deps) -> list[Known]:
    """Every stored lesson (any status) with its trigger embedding."""
    import numpy as np

    rows = arrow_rows(deps.store.column(LESSONS, LESSON_COLUMNS))
    out = []
    for row in rows:
        lesson, ok = row_valid(deps, row)
        out.append(
            Known(
                lesson=lesson,
                valid=ok,
                trigger_vec=np.asarray(row["vector"], dtype=np.float32),
                members={str(i) for i in lesson.provenance.get("topic_ids") or []},
            )
        )
    out.sort(key=lambda k: k.lesson.id)
    return out


def _assign(known: Sequence[Known], group: Sequence[Exp], working_ids: set[str]) -> list[Known]:
    """The lessons on this group's topic (by recorded members, else by trigger similarity)."""
    import numpy as np

    ids = {e.id for e in group}
    vecs = np.stack([e.vec for e in group])
    out = []
    for k in known:
        present = k.members & working_ids
        if present:
            if len(present & ids) * 2 > len(present):
                out.append(k)
        elif not k.members:
            sims = vecs @ k.trigger_vec
            if float(sims.max()) >= SAME_TOPIC and float(sims.mean()) >= SAME_TOPIC_MEAN:
                out.append(k)
    return out


def _same_action(d: Draft, k: Known) -> bool:
    key = str(k.lesson.provenance.get("action_key") or "")
    if key and key == d.key:
        return True
    if d.sig != command_signature(k.lesson.action or ""):
        return False
    return k.avec is not None and float(d.avec @ k.avec) >= SAME_ACTION


def _contradiction_on_topic(deps: Deps, d: Draft, k: Known) -> bool:
    """Whether the draft's contradicting evidence lies on the lesson's own topic.

    The experiences where the action went the other way must be as close to the lesson's own
    evidence (its recorded topic members) as that evidence is to itself, less a margin; a lesson
    without members needs them near its trigger (:data:`SAME_TOPIC`). Sentence embeddings put
    "X runs out of memory" and "Y runs out of memory" close together; measuring against the
    lesson's own spread keeps a verdict about Y from overturning a lesson about X.
    """
    import numpy as np

    from .evidence import load_by_ids, same_action

    claim_works = k.lesson.kind != "avoid"
    against = [
        e
        for e in d.topic
        if same_action(d.key, d.sig, d.avec, e) and (e.score < 0.5) == claim_works
    ]
    if not against:
        return False
    vecs = np.stack([e.vec for e in against])
    if k.member_vecs is None and k.members:
        found = load_by_ids(deps.store, sorted(k.members))
        k.member_vecs = np.stack([e.vec for e in found]) if found else None
    if k.member_vecs is None or len(k.member_vecs) == 0:
        return float((vecs @ k.trigger_vec).mean()) >= SAME_TOPIC
    mem = k.member_vecs
    n = len(mem)
    if n >= 2:
        sims = mem @ mem.T
        spread = float((sims.sum() - np.trace(sims)) / (n * (n - 1)))
    else:
        spread = 1.0
    closeness = float((vecs @ mem.T).mean())
    return closeness >= min(spread, SPREAD_CAP) - CONTRADICTION_MARGIN


def _polarity(kind: str) -> int:
    return -1 if kind == "avoid" else 1


def _revisions(group: Sequence[Exp], lessons: Sequence[Known]) -> list[Draft]:
    """Candidates mined from the evidence recorded after each active lesson was learned."""
    out: list[Draft] = []
    for k in lessons:
        if k.lesson.status != "active" or not k.valid:
            continue
        until = float(k.lesson.provenance.get("evidence_until") or 0.0)
        fresh = [e for e in group if e.created_at > until]
        for d in mine(fresh):
            if _polarity(d.kind) != _polarity(k.lesson.kind) and _same_action(d, k):
                d.revises = k.lesson.id
                out.append(d)
    return out


def _provenance(d: Draft, run_id: str) -> dict[str, Any]:
    ids = [e.id for e in d.topic]
    return {
        "consolidator": d.consolidator,
        "model": d.model,
        "run": run_id,
        "action_key": d.key,
        "topic_ids": ids[-MAX_TOPIC_IDS:],
        "topic_size": len(ids),
        "quoted_ids": d.quoted_ids,
        "evidence_until": max(e.created_at for e in d.topic),
        "scores": d.scores,
        "revises": d.revises,
    }


@dataclass
class Plan:
    """What a run will write: lesson writes (batched) and the ids it already decided."""

    writes: list[Write] = field(default_factory=list)
    decided: set[str] = field(default_factory=set)
    taken: set[str] = field(default_factory=set)


def _run_locked(
    deps: Deps, *, dry_run: bool, judge: Judge | None, force: bool
) -> ConsolidationReport:
    report = ConsolidationReport(dry_run=dry_run)
    if not dry_run:  # the key checked, old rows bound, crash leftovers audited, deletions told
        from .reconcile import maintain

        maintain(deps)
    new, working, full, mark = _select_new(deps, force)
    report.examined = len(new)
    run_id = f"{deps.now():%Y%m%dT%H%M%S}-{os.getpid()}"
    if not new:
        report.reason = "nothing new since the last run"
        if not dry_run:
            _finish(deps, mark)
        return report
    new_ids = {e.id for e in new}
    working_ids = {e.id for e in working}
    groups = [g for g in topics(working) if full or any(e.id in new_ids for e in g)]
    report.clusters = len(groups)
    known = _known(deps)
    plan = Plan(taken={k.lesson.id for k in known})
    touched: dict[str, tuple[Known, list[Exp]]] = {}
    for group in groups:
        lessons = _assign(known, group, working_ids)
        _action_vectors(deps, lessons)
        drafts = mine(group)
        if judge is not None and drafts:
            judged = judge.refine(group, drafts, [k.lesson for k in lessons], report)
            drafts = judged if judged is not None else drafts
        drafts += _revisions(group, lessons)
        for k in lessons:
            touched.setdefault(k.lesson.id, (k, group))
        for d in drafts:
            _decide(deps, d, lessons, report, plan, run_id=run_id)
    _breaker(deps, touched, plan, report, run_id=run_id, dry_run=dry_run)
    _fade(touched, plan, report, run_id=run_id)
    if not dry_run:
        write_batch(deps, plan.writes, actor="consolidate")
    # Lessons named by new experiences off the working topics: reviewed one by one.
    named = {i for e in new for i in e.recalled} - set(touched)
    for k in known:
        if k.lesson.id in named and k.valid and k.lesson.status == "active" and not dry_run:
            _saved, quarantined = review(deps, k.lesson, actor="consolidate", cause=f"run {run_id}")
            if quarantined:
                report.quarantined.append(k.lesson.id)
    if not dry_run:
        _finish(deps, mark)
    return report


def _fade(
    touched: dict[str, tuple[Known, list[Exp]]],
    plan: Plan,
    report: ConsolidationReport,
    *,
    run_id: str,
) -> None:
    """Send active lessons whose action stopped behaving as they say back to candidate
    (:mod:`.fade`). After the breaker: a lesson that credibly hurts is quarantined instead."""
    pending = {w.lesson.id: w for w in plan.writes}
    for lid, (k, group) in sorted(touched.items()):
        write = pending.get(lid)
        lesson = write.lesson if write is not None else k.lesson
        if not k.valid or k.avec is None:
            continue
        reason = stale(lesson, k.avec, group)  # None unless active and not pinned
        if reason is None:
            continue
        report.faded.append(lid)
        detail = {"reason": f"faded: {reason}", "was": "active", "run": run_id}
        faded_at = {FADED_AT: max(e.created_at for e in group)}
        if write is None:
            write = Write(
                k.lesson.model_copy(deep=True),
                "faded",
                detail,
                vector=list(k.trigger_vec),
                was_active=True,
                expect=k.lesson.signature,
            )
            plan.writes.append(write)
        else:
            write.event = "faded"
            write.detail = dict(write.detail, **detail)
            write.was_active = True
        write.lesson.status = "candidate"
        write.lesson.provenance = dict(write.lesson.provenance, **faded_at)


def _breaker(
    deps: Deps,
    touched: dict[str, tuple[Known, list[Exp]]],
    plan: Plan,
    report: ConsolidationReport,
    *,
    run_id: str,
    dry_run: bool,
) -> None:
    """The circuit breaker over every active lesson on a touched topic, in one pass.

    Outcomes with the lesson in context (experiences naming it, plus feedback) against the
    topic's outcomes without it; a lesson that credibly hurts is quarantined (unless pinned).
    """
    if not touched:
        return
    rows = deps.store.select(
        EXPERIENCES, "array_length(recalled_lesson_ids) > 0", ["id", "score", "recalled_lesson_ids"]
    )
    named: dict[str, list[tuple[str, float]]] = {}
    for r in rows:
        for lid in r.get("recalled_lesson_ids") or []:
            named.setdefault(lid, []).append((r["id"], float(r["score"])))
    pending = {w.lesson.id: w for w in plan.writes}
    for lid, (k, group) in sorted(touched.items()):
        write = pending.get(lid)
        lesson = write.lesson if write is not None else k.lesson
        if not k.valid or lesson.status != "active":
            continue
        with_ids = {i for i, _s in named.get(lid, [])}
        scores = [sc for _i, sc in named.get(lid, [])]
        scores += feedback_scores(lesson)
        if not scores:
            continue  # never in context, no feedback: nothing to attribute
        without = [e.score for e in group if e.id not in with_ids and lid not in e.recalled]
        trip, res = breaker(scores, without)
        if not trip:
            continue
        if lesson.pinned:
            if not dry_run:
                deps.audit(
                    "consolidate",
                    lid,
                    "breaker_ignored",
                    {"reason": "pinned", "measured": res.detail},
                )
            continue
        report.quarantined.append(lid)
        detail = {
            "reason": "circuit breaker: outcomes with this lesson in context are worse than "
            f"without it ({res.detail})",
            "lift": res.lift,
            "noise": res.noise,
            "was": "active",
            "run": run_id,
        }
        if write is not None:
            write.lesson.status = "quarantined"
            write.event = "quarantined"
            write.detail = dict(write.detail, **detail)
            write.was_active = True
            if lid in report.admitted:
                report.admitted.remove(lid)
        else:
            out = k.lesson.model_copy(deep=True)
            out.status = "quarantined"
            plan.writes.append(
                Write(
                    out,
                    "quarantined",
                    detail,
                    vector=list(k.trigger_vec),
                    was_active=True,
                    expect=k.lesson.signature,
                )
            )


def _action_vectors(deps: Deps, lessons: Sequence[Known]) -> None:
    """Embed the actions of these lessons (once; only for lessons on touched topics)."""
    todo = [k for k in lessons if k.avec is None]
    if todo:
        vecs = deps.embedder.embed([(k.lesson.action or k.lesson.rule) for k in todo])
        for k, v in zip(todo, vecs, strict=True):
            k.avec = v


def _unless_broken(gate: GateResult, d: Draft, evidence: Sequence[Exp]) -> GateResult:
    """The gate's verdict, failed when the action's newest tries already break the draft: a
    long good record would admit a lesson that would fade at the next run
    (:func:`~mimir_core.lessons.fade.broken`)."""
    lately = broken(d.kind, d.key, d.sig, d.avec, evidence) if gate.passed else None
    if not lately:
        return gate
    return gate.model_copy(update={"passed": False, "detail": f"{gate.detail}; {lately}"})


def _unless_faded_elsewhere(gate: GateResult, d: Draft, same: Sequence[Known]) -> GateResult:
    """The gate's verdict, failed while a lesson of the same action and polarity that faded
    (in any scope) has not been made again by fresh outcomes in this draft's scope: a faded
    global rule is otherwise narrowed at once to the projects whose old tallies still make it
    (:func:`~mimir_core.lessons.fade.made_again`)."""
    if not gate.passed:
        return gate
    faded = [
        float(k.lesson.provenance[FADED_AT])
        for k in same
        if k.lesson.status == "candidate" and k.lesson.provenance.get(FADED_AT) is not None
    ]
    if not faded or made_again(d.kind, d.key, d.sig, d.avec, d.topic, d.scope, max(faded)):
        return gate
    why = f"but its lesson faded lately: waits for {MIN_FRESH} fresh outcomes that make it again"
    return gate.model_copy(update={"passed": False, "detail": f"{gate.detail}; {why}"})


def _decide(
    deps: Deps,
    d: Draft,
    lessons: Sequence[Known],
    report: ConsolidationReport,
    plan: Plan,
    *,
    run_id: str,
) -> None:
    """Gate one candidate and plan to merge, supersede or add it."""
    # A lesson narrowed to some scopes is tested without the scopes that contradict it.
    evidence = [e for e in d.topic if e.scope not in d.against]
    gate = offline_gate(
        outcomes(d.kind, d.key, d.sig, d.avec, evidence, d.groups),
        balance=BALANCE.get(d.kind, ""),
    )
    same = [
        k
        for k in lessons
        if k.valid and _same_action(d, k) and _polarity(d.kind) == _polarity(k.lesson.kind)
    ]
    # A draft narrowed to one scope (its action went the other way in another) is not the same
    # lesson as one served elsewhere: it supersedes those (global, or in a contradicting scope).
    alike = [k for k in same if not d.against or k.lesson.scope == d.scope]
    narrowed = {k.lesson.id for k in same if d.against and k.lesson.scope in ("", *d.against)}
    twin = next((k for k in alike if k.lesson.status in ("candidate", "active")), None)
    if twin is None or twin.lesson.status != "active":  # admitting: not if it already turned
        # A lesson narrowed to some projects is checked against its action's newest tries in
        # every project of the topic: when a fix stops working everywhere (an upgrade), the
        # projects where it failed lately contradict it first, and the others' old successes
        # would otherwise admit it there, on evidence from before the change.
        gate = _unless_broken(gate, d, d.topic if d.against else evidence)
        gate = _unless_faded_elsewhere(gate, d, same)
    if twin is not None and d.revises is None:
        if twin.lesson.id not in plan.decided:
            _merge(deps, d, twin, gate, report, plan, run_id=run_id)
        return
    stopped = next((k for k in alike if k.lesson.status in ("quarantined", "retired")), None)
    if stopped is not None:  # a person or the breaker stopped this lesson: don't re-learn it
        report.dropped.append(
            f"{d.kind} {d.action[:80]!r}: like {stopped.lesson.status} lesson {stopped.lesson.id}"
        )
        return
    rivals = [
        k
        for k in lessons
        if k.valid
        and k.lesson.status == "active"
        and k.lesson.id not in plan.decided
        and (
            k.lesson.id in narrowed
            or (
                _same_action(d, k)
                and _polarity(d.kind) != _polarity(k.lesson.kind)
                and (not d.scope or not k.lesson.scope or d.scope == k.lesson.scope)
                and _contradiction_on_topic(deps, d, k)
            )
            or (
                k.lesson.id in d.contradicts
                and float(d.trigger_vec @ k.trigger_vec) >= SAME_TOPIC_LLM
            )
        )
    ]
    ident = d.ident()
    while ident in plan.taken:  # e.g. worded like a lesson superseded earlier: keep both
        ident = "les_" + hashlib.sha256(ident.encode("utf-8")).hexdigest()[:16]
    plan.taken.add(ident)
    lesson = Lesson(
        id=ident,
        rule=d.rule,
        trigger=d.trigger,
        scope=d.scope,
        kind=d.kind,  # type: ignore[arg-type]
        action=d.action,
        status="active" if gate.passed else "candidate",
        gate=gate,
        provenance=_provenance(d, run_id),
        valid_from=deps.now(),
    )
    if gate.passed:
        lesson.provenance[ADMITTED_UNTIL] = lesson.provenance["evidence_until"]
    apply_evidence(lesson, d.key, d.avec, d.topic)
    report.candidates.append(lesson)
    plan.decided.add(ident)
    detail = {"gate": gate.detail, "run": run_id, "consolidator": d.consolidator}
    # A trigger that is an experience's task already has its embedding (the task vector).
    vec = list(d.trigger_vec) if d.trigger_from_task else None
    if lesson.status != "active":
        report.pending.append(ident)
        plan.writes.append(Write(lesson, "candidate", detail, vector=vec))
        return
    report.admitted.append(ident)
    plan.writes.append(Write(lesson, "admitted", detail, vector=vec))
    now = deps.now()
    for k in rivals:
        old = k.lesson.model_copy(deep=True)
        old.status = "superseded"
        old.invalid_at = now
        old.superseded_by = ident
        why = f"contradicted by {ident}"  # no quote: forgetting {ident} must leave no copy
        plan.writes.append(
            Write(
                old,
                "superseded",
                {"reason": why, "by": ident, "was": "active", "run": run_id},
                vector=list(k.trigger_vec),
                was_active=True,
                expect=k.lesson.signature,
            )
        )
        plan.decided.add(old.id)
        report.superseded.append(old.id)


def _merge(
    deps: Deps,
    d: Draft,
    twin: Known,
    gate: GateResult,
    report: ConsolidationReport,
    plan: Plan,
    *,
    run_id: str,
) -> None:
    """Fold a duplicate candidate's evidence into the existing lesson."""
    old = twin.lesson
    lesson = old.model_copy(deep=True)
    prov = dict(lesson.provenance)
    members = list(dict.fromkeys([*prov.get("topic_ids", []), *(e.id for e in d.topic)]))
    prov.update(
        topic_ids=members[-MAX_TOPIC_IDS:],
        topic_size=max(len(d.topic), int(prov.get("topic_size", 0) or 0)),
        evidence_until=max(e.created_at for e in d.topic),
        quoted_ids=list(dict.fromkeys([*prov.get("quoted_ids", []), *d.quoted_ids])),
        last_run=run_id,
    )
    lesson.provenance = prov
    lesson.gate = gate
    if d.consolidator == old.provenance.get("consolidator") or old.status == "candidate":
        lesson.rule = d.rule  # the tallies in the wording stay current
    apply_evidence(lesson, d.key, d.avec, d.topic)
    event = "merged"
    avec = twin.avec if twin.avec is not None else d.avec
    if old.status == "candidate" and gate.passed and may_return(old, avec, d.topic):
        lesson.status = "active"
        lesson.valid_from = deps.now()
        lesson.provenance.pop(FADED_AT, None)
        lesson.provenance[ADMITTED_UNTIL] = prov["evidence_until"]
        event = "admitted"
        report.admitted.append(lesson.id)
    elif lesson.status == "candidate":
        report.pending.append(lesson.id)
    report.merged.append(lesson.id)
    report.candidates.append(lesson)
    plan.decided.add(lesson.id)
    unchanged = (
        lesson.rule == old.rule
        and lesson.status == old.status
        and lesson.supporting_ids == old.supporting_ids
        and lesson.contradicting_ids == old.contradicting_ids
        and lesson.gate == old.gate
    )
    if not unchanged:
        plan.writes.append(
            Write(
                lesson,
                event,
                {"gate": gate.detail, "run": run_id, "topic_size": len(d.topic)},
                vector=list(twin.trigger_vec),
                was_active=old.status == "active",
                expect=old.signature,
            )
        )


def _finish(deps: Deps, mark: dict[str, Any]) -> None:
    now = deps.now()
    deps.store.set_meta({WATERMARK: json.dumps(mark), LAST_RUN: now.isoformat()})
    path = state_path(deps.home)
    try:
        ensure_private_dir(path.parent)
        replace_file(path, json.dumps({"last_run": now.timestamp()}).encode("utf-8"))
    except OSError as exc:
        log.warning("cannot write %s: %s", path, exc)


__all__ = ["average_linkage", "run"]
