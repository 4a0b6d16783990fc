"""The learning benchmark's three simulated agents (public API of ``mimir_core`` only).

* COLD: no memory; picks uniformly among the family's plausible actions.
* NAIVE: recall of raw past attempts only: the action of the most similar past success, else
  uniformly among the plausible actions not seen failing in what was recalled.
* WARM: the full Mimir loop: served lessons (``avoid`` lessons exclude their action, a
  ``prefer`` lesson is followed), ``recommend(explore=True)`` (Thompson over recorded actions;
  an untried plausible action gets a fair Beta(0.5, 0.5) draw against the recommended one, since
  recommend only knows recorded actions), this repo's raw attempts from ``recall`` and, per
  plausible action, ``attempts`` (its own past attempts here on loosely related tasks, which
  catches failures on paraphrases too far from the task for recall and recommend): an action
  that only ever failed here is not retried (when every plausible action did, the least and
  least recently failed one is), every outcome recorded with the served lesson ids,
  ``consolidate()`` every N tasks.

NAIVE and WARM work through one handle per repo on one shared store (``scope`` = the repo, as
each project's agent would), so evidence from the same repo counts most.

Two more arms measure what a user gets, and what the best one could get:

* GENERIC: the policy most users write, the one mimir-learn documents ("reuse the strategy when
  confidence is high, explore when it is low"): ``recommend(task, explore=True)``; its action is
  run when its confidence is at least :data:`GENERIC_THRESHOLD` and it is among the plausible
  actions, else an untried plausible action (:func:`generic_choice`); every outcome recorded. No
  lessons, no recall, no attempts. The same policy drives mimir-learn 0.1.5 (``generic_learn``,
  :mod:`bench.learning_mimir_learn`), so the two differ only in the library's ``recommend``.
* CEILING: told each task's family (which no other agent is), Thompson sampling with Beta(1, 1)
  priors over that family's actions, with counts per (family, context tag): the hidden rates
  depend on the repo (dev stream) or the environment (ops stream), so one count per family would
  average incompatible contexts. The reference of the issue's gate ("Mimir >= 0.9 x the
  per-family Thompson ceiling in the second half"). Plain counts, no discounting: under drift it
  adapts as slowly as any stationary bandit.

Every agent is told the task text, its repo (the scope it works in; the environment in the ops
stream) and the plausible actions (what an LLM agent would come up with by itself); never the
family (CEILING excepted) or the hidden rates.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from mimir_core import Mimir

from .learning_env import REPOS, Task

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
"""When the stream's first task is recorded (task ``t`` at ``T0 + t`` minutes). Every record
carries this time and an idempotency key, so experience ids (and the lesson gate's cross-fitting
folds, which hash them) and with them a whole run depend on the seeds only, never on the clock
or on uuid4."""


@dataclass
class Choice:
    """What an agent chose, and what it knew when it chose."""

    action: str
    source: str
    confidence: float | None = None
    lesson_ids: list[str] = field(default_factory=list)
    posterior_mean: float | None = None
    """For a recommended action: recommend's calibrated ``expected_success``."""
    recommended: tuple[str, float, float] | None = None
    """What recommend said, whether followed or not: (action, expected_success, confidence).
    The environment's common random numbers tell what that action would have done on this
    task, so calibration is measured on every recommendation, not only the followed ones."""
    asked: bool = False
    """The generic arms: recommend was asked (``rec`` then says what it returned)."""
    rec: tuple[str, float] | None = None
    """The generic arms: what recommend returned, (action, confidence), ``None`` for nothing."""


class Cold:
    name = "cold"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def choose(self, task: Task) -> Choice:
        return Choice(self.rng.choice(task.family.commands), "prior")

    def learn(self, task: Task, choice: Choice, success: bool) -> None:
        return None


def _handles(home: Path, embedder: Any, contexts: Sequence[str] = REPOS) -> dict[str, Mimir]:
    """One handle per repo on one shared store, as each repo's agent would have (its project is
    its scope: recall, recommend and lessons prefer that repo's evidence, others' counts less).
    ``contexts``: the stream's context tags (the ops stream's environments)."""
    first = Mimir(home, embedder=embedder, scope=contexts[0], auto_consolidate=False)
    out = {contexts[0]: first}
    for repo in contexts[1:]:  # share the loaded embedding model
        out[repo] = Mimir(home, embedder=first.embedder, scope=repo, auto_consolidate=False)
    return out


def _record(m: Mimir, key: str, task: Task, choice: Choice, success: bool) -> str:
    reason = next(a.reason for a in task.family.actions if a.command == choice.action)
    exp = m.record(
        task.text,
        choice.action,
        "success" if success else "failure",
        reason=None if success else reason,
        context={task.context_key: task.repo},
        recalled_lesson_ids=choice.lesson_ids or None,
        created_at=T0 + timedelta(minutes=task.index),
        idempotency_key=f"learn-{key}-{task.index}",
    )
    return exp.id


class Naive:
    name = "naive"

    def __init__(
        self, seed: int, home: Path, embedder: Any, contexts: Sequence[str] = REPOS
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.handles = _handles(home, embedder, contexts)
        self.exp_ids: dict[str, Task] = {}

    def choose(self, task: Task) -> Choice:
        cands = task.family.commands
        hits = self.handles[task.repo].recall(task.text, k=10)
        failed = set()
        for h in hits:
            act = h.experience.action
            if act not in cands:
                continue
            if h.experience.outcome == "success":
                return Choice(act, "recall")
            failed.add(act)
        return Choice(self.rng.choice([c for c in cands if c not in failed] or cands), "prior")

    def learn(self, task: Task, choice: Choice, success: bool) -> None:
        key = f"{self.name}-{self.seed}"
        self.exp_ids[_record(self.handles[task.repo], key, task, choice, success)] = task


@dataclass
class Admitted:
    """A lesson admitted during the run and the task index at which it was admitted."""

    lesson_id: str
    at: int


class Warm:
    name = "warm"

    def __init__(
        self,
        seed: int,
        home: Path,
        embedder: Any,
        consolidate_every: int,
        contexts: Sequence[str] = REPOS,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.handles = _handles(home, embedder, contexts)
        self.m = self.handles[contexts[0]]
        self.every = consolidate_every
        self.exp_ids: dict[str, Task] = {}
        self.admitted: list[Admitted] = []
        self.seen = 0
        self.consolidate_seconds = 0.0
        self.consolidations = 0

    def choose(self, task: Task) -> Choice:
        m = self.handles[task.repo]
        cands = task.family.commands
        # This project's lessons and global ones (a lesson scoped to another repo is about that
        # repo: the evidence behind it differs by repo).
        lessons = m.lessons(task.text, k=5, scope=task.repo)
        served = [le.id for le in lessons]
        avoid = {le.action for le in lessons if le.kind == "avoid" and le.action in cands}
        prefer = [
            le.action
            for le in lessons
            if le.kind != "avoid" and le.action in cands and le.action not in avoid
        ]
        rec = m.recommend(task.text, explore=True, seed=self.rng.randrange(2**31))
        known: dict[str, tuple[float, float]] = {}
        said = None
        if rec is not None and rec.expected_success is not None:
            said = (rec.action, rec.expected_success, rec.confidence)
        if rec is not None:
            opts = [(rec.variants, rec.successes, rec.failures)]
            opts += [(a.variants, a.successes, a.failures) for a in rec.alternatives]
            for variants, succ, fail in opts:
                for v in variants:
                    if v in cands:
                        known[v] = (succ, fail)
        # This repo's history of each candidate: recall's raw hits, and the action's own past
        # attempts on loosely related tasks (``Mimir.attempts``: paraphrases too far from this
        # task for recall and recommend still count). An action that only ever failed here is
        # not retried (recommend pools other repos' evidence; the same fix may not work here).
        past: dict[str, tuple[str, float, bool]] = {}
        for h in m.recall(task.text, k=10, scope=task.repo):
            e = h.experience
            if e.action in cands:
                past[e.id] = (e.action, e.created_at.timestamp(), e.outcome == "success")
        for act in cands:
            for h in m.attempts(act, task=task.text):
                e = h.experience
                past[e.id] = (act, e.created_at.timestamp(), e.outcome == "success")
        here: dict[str, list[tuple[float, bool]]] = {}
        for act, ts, ok in past.values():
            here.setdefault(act, []).append((ts, ok))
        for act, outs in here.items():
            wins = float(sum(ok for _ts, ok in outs))
            if wins:
                known.setdefault(act, (wins, len(outs) - wins))
            else:
                known[act] = (0.0, float(len(outs)))
        allowed = [c for c in cands if c not in avoid and not (c in known and known[c][0] <= 0)]
        if not allowed:  # everything plausible failed here: the least (and least recently) failed
            pool = [c for c in cands if c not in avoid] or cands
            allowed = [
                min(pool, key=lambda c: (len(here.get(c, [])), max(here.get(c, [(0.0, 0)]))))
            ]
        untried = [c for c in allowed if c not in known]
        prefer = [a for a in prefer if a in allowed]
        if prefer:
            return Choice(prefer[0], "lesson", None, served, recommended=said)
        if rec is not None and rec.action in allowed:
            draw = self.rng.betavariate(0.5 + rec.successes, 0.5 + rec.failures)
            if untried and max(self.rng.betavariate(0.5, 0.5) for _ in untried) > draw:
                return Choice(self.rng.choice(untried), "explore", None, served, recommended=said)
            return Choice(
                rec.action, "recommend", rec.confidence, served, rec.expected_success, said
            )
        return Choice(
            self.rng.choice(untried or allowed), "explore", None, served, recommended=said
        )

    def learn(self, task: Task, choice: Choice, success: bool) -> None:
        import time

        key = f"{self.name}-{self.seed}"
        self.exp_ids[_record(self.handles[task.repo], key, task, choice, success)] = task
        self.seen += 1
        if self.seen % self.every == 0:
            started = time.perf_counter()
            report = self.m.consolidate()
            self.consolidate_seconds += time.perf_counter() - started
            self.consolidations += 1
            self.admitted += [Admitted(i, task.index) for i in report.admitted]


# -- what users write, and the best one could do -------------------------------------------------

GENERIC_THRESHOLD = 0.3
"""The confidence at which the generic policy trusts a recommendation (mimir-learn's README:
"a conservative success rate you can threshold on")."""


def generic_choice(
    rng: random.Random,
    task: Task,
    tried: dict[str, set[str]],
    rec: tuple[str, float] | None,
    expected: float | None = None,
) -> Choice:
    """The generic policy, shared by the Mimir and mimir-learn arms so that only ``recommend``
    differs: run the recommended action when its confidence is at least
    :data:`GENERIC_THRESHOLD` and it is plausible; otherwise an untried plausible action,
    uniformly.

    "Untried" is the simplest reading a user's loop can implement without asking memory: the
    plausible actions this agent has not run on a task with exactly this text (``tried``: its
    own log, text -> actions run; a text recurs, a family is unknown to it). When every
    plausible action was run on this text, uniformly among all of them. A low-confidence
    recommendation is treated like none (its action may still be drawn as any other).
    ``expected``: the library's point estimate, kept for calibration (``Choice.recommended``)."""
    cands = task.family.commands
    said = None if rec is None else (rec[0], expected if expected is not None else rec[1], rec[1])
    if rec is not None and rec[1] >= GENERIC_THRESHOLD and rec[0] in cands:
        return Choice(rec[0], "recommend", rec[1], [], expected, said, asked=True, rec=rec)
    done = tried.get(task.text, set())
    untried = [c for c in cands if c not in done]
    return Choice(rng.choice(untried or cands), "explore", None, [], None, said, True, rec)


class Generic:
    """The GENERIC arm on Mimir: :func:`generic_choice` over ``Mimir.recommend``, one handle
    per context tag (scope = the repo or environment, as WARM's), every outcome recorded with an
    idempotency key and a time from the task index."""

    name = "generic"

    def __init__(
        self, seed: int, home: Path, embedder: Any, contexts: Sequence[str] = REPOS
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.handles = _handles(home, embedder, contexts)
        self.tried: dict[str, set[str]] = {}

    def choose(self, task: Task) -> Choice:
        m = self.handles[task.repo]
        rec = m.recommend(task.text, explore=True, seed=self.rng.randrange(2**31))
        if rec is None:
            return generic_choice(self.rng, task, self.tried, None)
        return generic_choice(
            self.rng, task, self.tried, (rec.action, rec.confidence), rec.expected_success
        )

    def learn(self, task: Task, choice: Choice, success: bool) -> None:
        self.tried.setdefault(task.text, set()).add(choice.action)
        _record(self.handles[task.repo], f"{self.name}-{self.seed}", task, choice, success)


class Ceiling:
    """The CEILING arm: knows each task's family; Thompson sampling, Beta(1, 1) priors, one
    count per (family, context tag, action). No memory library involved."""

    name = "ceiling"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.counts: dict[tuple[str, str, str], list[int]] = {}

    def choose(self, task: Task) -> Choice:
        best, top = task.family.commands[0], -1.0
        for c in task.family.commands:  # in the family's order: ties go to the first
            s, f = self.counts.get((task.family.name, task.repo, c), (0, 0))
            draw = self.rng.betavariate(1 + s, 1 + f)
            if draw > top:
                best, top = c, draw
        return Choice(best, "thompson")

    def learn(self, task: Task, choice: Choice, success: bool) -> None:
        n = self.counts.setdefault((task.family.name, task.repo, choice.action), [0, 0])
        n[0 if success else 1] += 1
