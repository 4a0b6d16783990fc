"""Deterministic mining: from experiences to candidate lessons, without any LLM.

1. **Topics.** Experiences are grouped by task similarity with average-linkage clustering of
   their task embeddings (two groups merge while their mean pairwise cosine is at least
   :data:`~mimir_core.lessons.evidence.TOPIC_LINK`). On the labelled set (24 task families)
   this keeps 98% of same-topic pairs pure at 87% recall; single-threshold "leader" clustering
   cannot do both. Large stores are first cut into coarse blocks so the cost stays near-linear.
2. **Actions.** Within a topic, equivalent phrasings of an action are pooled with
   :func:`mimir_core.search.action_clusters.cluster_actions` (the recommender's own clustering).
3. **Candidates.** An action that failed at least three times (:data:`AVOID_MIN_FAILURES`) and
   worked at most a quarter of the time gives an ``avoid`` lesson; one that worked at least twice
   and at least three quarters of the time gives a ``prefer`` lesson. The rule is worded from
   the experiences themselves: the action as recorded, the topic's most central task as
   trigger, a recorded reason, the tally, and the best alternative (what worked instead, or
   what failed).
4. **Scope.** A lesson is global only when no project (experience scope) contradicts it: the
   action did not go the other way, more often than not, in any project where it was tried.
   Otherwise it is emitted once per project whose own tally makes it, scoped there, worded
   with that project's tally, and tested without the contradicting projects' experiences
   (:func:`placements`): the same fix can work in one repository and fail in another. A
   ``prefer`` lesson is also global only once its action was tried at least
   :data:`GLOBAL_TRIES` times in every project its topic came up in; until then it is served
   only in the projects whose own tally earns it (a fix that worked in two repositories is
   not yet known to work in the third, where the task is met too).

Everything is ordered by (created_at, id), so a store always mines to the same candidates.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..observations.tally import LESSON_SOURCES, independent_sources
from ..search.action_clusters import ActionCluster, cluster_actions
from ..search.actions import command_signature, destructive_reason, looks_like_command
from .evidence import SAME_ACTION, TOPIC_LINK, Exp, lower_bound

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vec = npt.NDArray[np.float32]

CONSOLIDATOR = "deterministic-v1"
MIN_REPEATS = 2
#: Tries of an action in one scope (project) before its tally there can contradict a lesson.
MIN_SCOPE_TRIES = 1
#: Tries of a ``prefer`` action in every project of its topic before it is served globally.
GLOBAL_TRIES = 2
AVOID_MAX_RATE = 0.25
#: Failures of an action before it can make an ``avoid`` lesson. Two failures say little: an
#: action that works 40% of the time fails twice running 36% of the time, and an agent stops
#: trying what failed, so such a streak is never corrected. The host already hears of every
#: failure from the first repeat on (the attempts evidence in context, the repeat guard); a
#: lesson is the durable claim and waits for the third. On the learning benchmark's seeds
#: 4-11 this withheld 8 ``avoid`` lessons, 3 of them about actions that work 40-45% of the
#: time (lesson precision 0.84 -> 0.87 there; on the CI seeds 0-3, not looked at while
#: choosing, 0.95).
AVOID_MIN_FAILURES = 3
PREFER_MIN_RATE = 0.75
#: Above this many experiences, cluster within coarse blocks (bounded O(n²) memory).
BLOCK = 2500
_BLOCK_LINK = 0.2


@dataclass
class Draft:
    """A candidate lesson before the gate: what it says and the evidence it comes from."""

    kind: str
    action: str
    key: str
    sig: str | None
    avec: Vec
    trigger: str
    trigger_vec: Vec
    scope: str
    topic: list[Exp]
    rule: str
    quoted_ids: list[str] = field(default_factory=list)
    consolidator: str = CONSOLIDATOR
    scores: dict[str, float] = field(default_factory=dict)
    contradicts: list[str] = field(default_factory=list)
    revises: str | None = None
    model: str | None = None
    trigger_from_task: bool = True
    """The trigger is an experience's task verbatim (so ``trigger_vec`` is its embedding)."""
    groups: dict[str, str] = field(default_factory=dict)
    """Experience id → its action cluster in the topic (what the gate balances over)."""
    against: list[str] = field(default_factory=list)
    """Scopes whose evidence contradicts the rule (the draft is then scoped to another)."""

    def ident(self) -> str:
        """A stable id: the same topic and action always give the same lesson id."""
        first = min(e.id for e in self.topic)
        raw = f"{self.kind}|{self.key}|{self.scope}|{first}|{self.revises or ''}"
        return "les_" + hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]


# -- topics ------------------------------------------------------------------------------------


def average_linkage(vectors: Vec, threshold: float) -> list[int]:
    """Cluster labels by average linkage on cosine similarity (unit vectors), O(n²) memory."""
    import numpy as np

    n = len(vectors)
    if n == 0:
        return []
    sim = (vectors @ vectors.T).astype(np.float64)
    np.fill_diagonal(sim, -np.inf)
    size = np.ones(n)
    best_idx = np.argmax(sim, axis=1)
    best_val = sim[np.arange(n), best_idx]
    parent = list(range(n))
    alive = np.ones(n, dtype=bool)
    while True:
        r = int(np.argmax(np.where(alive, best_val, -np.inf)))
        if not alive[r] or best_val[r] < threshold:
            break
        c = int(best_idx[r])
        # Lance–Williams update for average linkage: merge c into r.
        merged = (sim[r] * size[r] + sim[c] * size[c]) / (size[r] + size[c])
        sim[r, :] = merged
        sim[:, r] = merged
        sim[r, r] = -np.inf
        sim[c, :] = -np.inf
        sim[:, c] = -np.inf
        size[r] += size[c]
        alive[c] = False
        best_val[c] = -np.inf
        parent[c] = r
        stale = np.where(alive & ((best_idx == r) | (best_idx == c)))[0]
        for k in stale:
            best_idx[k] = int(np.argmax(sim[k]))
            best_val[k] = sim[k, best_idx[k]]
        better = alive & (sim[:, r] > best_val)
        best_idx[better] = r
        best_val[better] = sim[better, r]
    labels = []
    for i in range(n):
        j = i
        while parent[j] != j:
            j = parent[j]
        labels.append(j)
    return labels


def _blocks(exps: Sequence[Exp]) -> list[list[Exp]]:
    """Coarse blocks (leader clustering on a low threshold) so each block fits in memory."""
    import numpy as np

    if len(exps) <= BLOCK:
        return [list(exps)]
    leaders: list[Vec] = []
    members: list[list[Exp]] = []
    for e in exps:
        if leaders:
            sims = np.stack(leaders) @ e.vec
            k = int(np.argmax(sims))
            if sims[k] >= _BLOCK_LINK and len(members[k]) < BLOCK:
                members[k].append(e)
                continue
        leaders.append(e.vec)
        members.append([e])
    return members


def topics(exps: Sequence[Exp], threshold: float = TOPIC_LINK) -> list[list[Exp]]:
    """Experiences grouped into topics, each group oldest first, groups by their first member."""
    import numpy as np

    groups: list[list[Exp]] = []
    for block in _blocks(exps):
        labels = average_linkage(np.stack([e.vec for e in block]), threshold)
        by_label: dict[int, list[Exp]] = {}
        for e, lab in zip(block, labels, strict=True):
            by_label.setdefault(lab, []).append(e)
        groups.extend(by_label.values())
    for g in groups:
        g.sort(key=lambda e: (e.created_at, e.id))
    groups.sort(key=lambda g: (g[0].created_at, g[0].id))
    return groups


def medoid(topic: Sequence[Exp]) -> Exp:
    """The experience whose task is most similar to the rest of the topic."""
    import numpy as np

    if len(topic) <= 2:
        return topic[0]
    mat = np.stack([e.vec for e in topic])
    scores = (mat @ mat.T).sum(axis=1)
    best = max(range(len(topic)), key=lambda i: (round(float(scores[i]), 6), -i))
    return topic[best]


# -- wording -----------------------------------------------------------------------------------


def as_code(action: str) -> str:
    """An action for a rule: a shell command in backticks, prose as it was written."""
    text = " ".join(action.split())
    if len(text) > 160:
        text = text[:159].rstrip() + "…"
    if "`" in text:
        return text
    return f"`{text}`" if looks_like_command(text) else f"“{text}”"


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _of(cl: ActionCluster, successes: bool) -> str:
    """``"2 of 3"``: how often an action worked (or failed) out of how many tries."""
    s, f = cl.counts(weighted=False)
    return f"{s if successes else f:g} of {s + f:g}"


def _reason(rows: Sequence[dict[str, Any]], want_success: bool) -> tuple[str, str | None]:
    """The newest recorded reason of a success (or failure) in a cluster, with its id."""
    for row in sorted(rows, key=lambda r: (r["created_at"], r["id"]), reverse=True):
        exp: Exp = row["exp"]
        if exp.reason and (exp.score >= 0.5) == want_success:
            return _clip(exp.reason, 120), exp.id
    return "", None


def word_rule(
    kind: str, cl: ActionCluster, trigger: str, alt: ActionCluster | None
) -> tuple[str, list[str]]:
    """The rule text of a candidate and the ids of the experiences it quotes."""
    quoted: list[str] = []
    avoid = kind == "avoid"
    where = f"For tasks like “{_clip(trigger, 110)}”"
    reason, rid = _reason(cl.rows, want_success=not avoid)
    if avoid:
        text = f"{where}: avoid {as_code(cl.label())} — it failed {_of(cl, False)} times"
    else:
        text = f"{where}: {as_code(cl.label())} — it worked {_of(cl, True)} times"
    text += f" (“{reason}”)" if reason else ""
    if alt is not None and avoid:
        text += f". What worked instead: {as_code(alt.label())} ({_of(alt, True)})"
    elif alt is not None:
        text += f"; {as_code(alt.label())} failed {_of(alt, False)}"
    if rid:
        quoted.append(rid)
    return text + ".", quoted


# -- candidates --------------------------------------------------------------------------------


def _scope(exps: Sequence[Exp]) -> str:
    scopes = Counter(e.scope for e in exps)
    return next(iter(scopes)) if len(scopes) == 1 else ""


def _tally(exps: Sequence[Exp]) -> tuple[float, float]:
    s = sum(e.score for e in exps)
    return s, len(exps) - s


def placements(
    cl: ActionCluster, topic_scopes: Collection[str] = ()
) -> list[tuple[str, str, list[str]]]:
    """Where an action's lesson is served: ``(kind, scope, contradicting or unproven scopes)``.

    A scope (project) **contradicts** the lesson the action's whole tally makes when, with at
    least :data:`MIN_SCOPE_TRIES` tries there, the action went the other way more often than not
    (a ``prefer`` action that mostly failed there, an ``avoid`` one that mostly worked). With no
    contradiction the lesson is global (``""``), or scoped to the one scope the action was tried
    in. With one, the same fix works in one project and fails in another: the lesson is emitted
    once for each scope whose own tally makes it, and never globally (possibly not at all).
    A scope's own tally never makes a lesson the whole tally does not: one project's streak
    inside an unremarkable whole is more often luck than context (on the learning benchmark,
    allowing it added lessons such as 3 of 3 for an action that works 35% of the time).

    ``topic_scopes`` are the projects the topic came up in. A ``prefer`` action tried in more
    than one of them, contradicted in none, is global only when it was tried at least
    :data:`GLOBAL_TRIES` times in each; otherwise the projects where it was tried fewer times
    count as unproven (listed like contradicting ones: its gate leaves their evidence out) and
    the lesson is served in each project whose own tally earns it. On the learning benchmark
    (6 seeds x 300 tasks) precision 0.80 -> 0.90: most wrong lessons were global ``prefer``
    rules for a fix that works in some repositories only, admitted before it was tried in the
    one where it fails."""
    members: list[Exp] = [r["exp"] for r in cl.rows]
    kind = kind_of(cl)
    if kind is None:
        return []
    by: dict[str, list[Exp]] = {}
    for e in members:
        by.setdefault(e.scope, []).append(e)
    tallies = {sc: _tally(exps) for sc, exps in sorted(by.items())}
    against = [
        sc
        for sc, (s, f) in tallies.items()
        if s + f >= MIN_SCOPE_TRIES and (s > f if kind == "avoid" else f > s)
    ]
    if not against:
        scope = _scope(members)
        thin = [
            sc for sc in sorted(set(topic_scopes)) if sum(tallies.get(sc, (0, 0))) < GLOBAL_TRIES
        ]
        if scope or kind != "prefer" or not thin:
            return [(kind, scope, [])]
        return [
            (kind, sc, thin)
            for sc, t in tallies.items()
            if sc not in thin and tally_kind(*t) == kind
        ]
    return [
        (kind, sc, against)
        for sc, t in tallies.items()
        if sc not in against and tally_kind(*t) == kind
    ]


def _in_scope(cl: ActionCluster, scope: str) -> ActionCluster:
    """The part of an action cluster recorded in one scope (to word a scoped rule)."""
    keep = [i for i, r in enumerate(cl.rows) if r["exp"].scope == scope]
    return dataclasses.replace(
        cl, rows=[cl.rows[i] for i in keep], weights=[cl.weights[i] for i in keep]
    )


def action_clusters(topic: Sequence[Exp]) -> list[ActionCluster]:
    """The topic's actions, equivalent phrasings pooled by recommend's clustering, within each
    command signature (so ``npm install`` and ``npm install --force`` stay apart).

    Stricter than the recommender, which lets prose pool with a command: a lesson names one
    exact action, and :func:`~mimir_core.lessons.evidence.same_action` counts only that."""
    buckets: dict[str | None, list[dict[str, Any]]] = {}
    for e in topic:
        buckets.setdefault(e.sig, []).append(e.as_row())
    out: list[ActionCluster] = []
    for rows in buckets.values():
        # First-phrasing linkage: single linkage chains phrasings, and a lesson names one action.
        out.extend(cluster_actions(rows, [1.0] * len(rows), SAME_ACTION, single_linkage=False))
    out.sort(key=lambda c: (c.rows[0]["created_at"], c.rows[0]["id"]))
    return out


def kind_of(cl: ActionCluster) -> str | None:
    """``avoid``, ``prefer`` or ``None`` for an action cluster's tally."""
    return tally_kind(*cl.counts(weighted=False))


def tally_kind(s: float, f: float) -> str | None:
    """``avoid``, ``prefer`` or ``None`` for an action's (successes, failures)."""
    n = s + f
    if n <= 0:
        return None
    if f >= AVOID_MIN_FAILURES and s / n <= AVOID_MAX_RATE:
        return "avoid"
    if s >= MIN_REPEATS and s / n >= PREFER_MIN_RATE:
        return "prefer"
    return None


def _independently_supported(cl: ActionCluster, kind: str) -> bool:
    """Whether the records that make a lesson's claim (successes for ``prefer``, failures for
    ``avoid``) come from at least :data:`~mimir_core.observations.tally.LESSON_SOURCES`
    independent sources: one session, however many records it made, never makes a lesson."""
    claim = [r["exp"].origin for r in cl.rows if (float(r["score"]) >= 0.5) == (kind != "avoid")]
    return independent_sources(claim) >= LESSON_SOURCES


def mine(topic: Sequence[Exp], *, trigger_exps: Sequence[Exp] | None = None) -> list[Draft]:
    """The candidate lessons of one topic (possibly none)."""
    if len(topic) < MIN_REPEATS:
        return []
    clusters = action_clusters(topic)
    scopes = {e.scope for e in topic}
    places = [(cl, placements(cl, scopes)) for cl in clusters]
    if not any(p for _cl, p in places):
        return []
    center = medoid(trigger_exps or topic)
    groups = {r["id"]: str(i) for i, cl in enumerate(clusters) for r in cl.rows}

    winners = [cl for cl in clusters if cl.counts(weighted=False)[0] > 0]
    strength = {id(c): lower_bound(*c.counts(weighted=False)) for c in winners}
    best = max(winners, key=lambda c: (strength[id(c)], -c.rows[0]["created_at"]), default=None)
    losers = [cl for cl in clusters if cl.counts(weighted=False)[1] > 0]
    worst = max(
        losers,
        key=lambda c: c.counts(weighted=False)[1] - c.counts(weighted=False)[0],
        default=None,
    )
    drafts: list[Draft] = []
    for cl, where in places:
        for kind, scope, against in where:
            if kind == "prefer" and destructive_reason(cl.label()) is not None:
                continue  # evidence never teaches `curl … | sh` or `--insecure`; a person may pin
            alt = best if kind == "avoid" else worst
            if alt is cl or (alt is not None and kind_of(alt) == kind):
                alt = None
            if alt is not None and kind == "avoid" and destructive_reason(alt.label()):
                alt = None  # "avoid X; Y worked" must not advertise a destructive Y
            said = _in_scope(cl, scope) if against else cl
            if not _independently_supported(said, kind):
                continue
            rule, quoted = word_rule(kind, said, center.task, alt)
            drafts.append(
                Draft(
                    kind=kind,
                    action=cl.label(),
                    key=cl.key,
                    sig=command_signature(cl.label()),
                    avec=cl.vector,
                    trigger=center.task,
                    trigger_vec=center.vec,
                    scope=scope,
                    topic=list(topic),
                    rule=rule,
                    quoted_ids=quoted,
                    groups=groups,
                    against=against,
                )
            )
    return drafts
