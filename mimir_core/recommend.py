"""Recommend the best-supported action for a task, with an honest confidence.

* Evidence is only on-topic: experiences whose task vector is close to the new task's (a cosine
  threshold), never anything that merely shares a word.
* Equivalent phrasings of an action pool their evidence: actions are clustered by the cosine of
  their own embeddings (or identical normalised text), but two shell commands with different
  signatures never pool (:func:`mimir_core.actions.command_signature`: ``pytest tests/x`` is not
  ``alembic upgrade head && pytest tests/x``, however close their embeddings).
* Confidence is the 5% lower bound of Beta(0.5 + s, 0.5 + f) (Jeffreys prior), where a partial
  outcome counts by its score. Relevance and recency decay weight which action *wins*;
  ``explore=True`` draws the winner by Thompson sampling instead (other projects' evidence
  worth at most :attr:`RecommendTuning.prior_strength` observations in the draw).
* ``expected_success`` is the calibrated point estimate: the posterior mean from the
  uninformed prior 0.5 (:attr:`RecommendTuning.prior_rate`), where this project's evidence
  counts in full, other projects' at most as
  :attr:`RecommendTuning.prior_strength` pseudo-observations (the same fix may not work here),
  and an action's older outcomes fade once newer ones of it arrive
  (:attr:`RecommendTuning.recent_half_life`), so drift shows, and many outcomes count with
  diminishing returns (:attr:`RecommendTuning.overdispersion`); times the probability that its
  closest evidence is the same kind of task at all (:attr:`RecommendTuning.topic_logit`).
* **Independent sources, not volume.** A record's evidence is weighted by its source (session,
  thread or host; :func:`~mimir_core.observations.tally.evidence_source`): one source's n
  records of an action count as n / (1 + (n - 1) / 2) observations, at most two. Fifty forged
  successes from one session weigh less than three from three sessions. Records made through
  the Python API without a session are each their own source.
* A command that destroys data outside the project or switches off a safety net
  (:func:`~mimir_core.actions.destructive_reason`: ``curl … | sh``, ``--insecure``, ``rm -rf ~``)
  is listed among the alternatives but never recommended, whatever its evidence.
* An action that has only ever failed is never recommended; ``None`` without on-topic evidence.
  With a project scope, "only ever failed" is judged on that project's evidence, including
  failed attempts phrased differently enough to fall below the topic threshold (down to
  :attr:`RecommendTuning.failure_threshold`): a fix that failed here and never worked here is
  not recommended here again, however well it did elsewhere, unless it since worked here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .actions import command_signature, destructive_reason, normalise_action
from .beta import jeffreys_lower_bound
from .filters import Filter
from .observations.tally import evidence_source, independence_weights
from .recall import decay_factor
from .store import DOC, EXPERIENCES, Store
from .types import Alternative, Recommendation

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@dataclass(frozen=True)
class RecommendTuning:
    """The knobs of the recommender (defaults tuned on the labelled set)."""

    topic_threshold: float = 0.40
    """Minimum task cosine for an experience to count as evidence."""
    topic_margin: float = 0.30
    """Evidence must also be within this cosine of the closest experience (same neighbourhood)."""
    action_threshold: float = 0.70
    """Minimum action cosine for two phrasings to pool their evidence."""
    candidates: int = 100
    """Nearest experiences considered (each on-topic one costs a Beta quantile or two)."""
    quantile: float = 0.05
    failure_threshold: float = 0.30
    """Task cosine down to which this project's failed attempts of an action count against it
    (paraphrases of a task often sit below :attr:`topic_threshold`)."""
    prior_rate: float = 0.5
    """Where ``expected_success`` starts before an action's own evidence: the uninformed 0.5.
    Not the topic's base rate (the mean of its actions' rates, tried before): the recommended
    action is the one its evidence singles out, so the average of the topic's other actions,
    traps included, says little about it (correlation with the true rate 0.07 on the learning
    benchmark, against 0.19 for the action's own posterior) and pulled estimates down."""
    base_strength: float = 4.0
    """How many pseudo-observations :attr:`prior_rate` is worth in ``expected_success`` (a
    single success says less about an action than the uniform prior would have it).
    Chosen with :attr:`prior_rate` by likelihood on the learning benchmark's seeds 4-11
    (12 x 300 tasks, 2,750 recommendations, each against what its action did on that task),
    held out from the CI seeds 0-3: there ECE 0.048 -> 0.028, log-loss 0.672 -> 0.658, Brier
    score against the hidden rates 0.074 -> 0.067 (base rate, 2 -> 0.5, 4). On the other two
    four-seed folds ECE 0.074 -> 0.017 and 0.085 -> 0.030: the old estimates spread wider than
    the rates they predict. Strength 6 fits as well (ECE 0.038, 0.023, 0.037); 2 or 10 worse."""
    prior_strength: float = 2.0
    """How many pseudo-observations other projects' evidence is worth in ``expected_success``."""
    recent_half_life: float = 8.0
    """In ``expected_success``, an outcome's weight halves with every this many newer outcomes
    of the same action (clock-free recency: stale evidence fades once fresh evidence exists)."""
    overdispersion: float = 0.15
    """In ``expected_success``, n outcomes of an action count as n / (1 + (n - 1) * this)
    (at most 1 / this): the tasks behind them are alike, not identical, so their outcomes are
    correlated (beta-binomial intra-class correlation). On the learning benchmark's held-out
    seeds (3-4 x 400 tasks) ECE against the hidden rates 0.074 -> 0.062 (0.059 at 0.3, which
    caps evidence at ~3 observations; 0.15 keeps 20 of 20 successes near 0.83)."""
    topic_logit: tuple[float, float] = (-8.34, 20.09)
    """(intercept, slope) of P(same kind of task | task cosine) = 1 / (1 + exp(-(a + b·cos))),
    fitted by logistic regression on the labelled set (MiniLM; ``bench/data/retrieval_set.json``,
    24 families): its 1,582 (task, evidence) pairs inside recommend's topic window, each task
    against the others. Cosine 0.40 -> 0.43, 0.45 -> 0.66, 0.50 -> 0.85, 0.60 -> 0.98.
    ``expected_success`` counts an action only as likely as its closest evidence is the same kind
    of task: a command recorded for another kind of task rarely solves this one."""


DEFAULT_TUNING = RecommendTuning()


@functools.lru_cache(maxsize=4096)
def _lower_bound(successes: float, failures: float, q: float) -> float:
    """:func:`~mimir_core.beta.jeffreys_lower_bound`, memoised: each call is a 60-step bisection
    (~0.3 ms) and raw counts repeat (1 success, 1 failure, ...) across clusters and calls."""
    return jeffreys_lower_bound(successes, failures, q)


@dataclass
class ActionCluster:
    """One action and its equivalent phrasings, with pooled evidence."""

    vector: npt.NDArray[np.float32]
    key: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    sig: str | None = None
    """The command signature of its shell commands (``None``: prose only so far)."""
    _independence: list[float] | None = field(default=None, init=False, repr=False)

    def independence(self) -> list[float]:
        """Each row's weight as evidence by its source: one session's many records of this
        action count with diminishing weight (:func:`~mimir_core.observations.tally.
        independence_weights`), so volume from one source cannot outvote independent ones."""
        if self._independence is None or len(self._independence) != len(self.rows):
            self._independence = independence_weights([evidence_source(r) for r in self.rows])
        return self._independence

    def counts(self, weighted: bool) -> tuple[float, float]:
        """(successes, failures), each record weighted by its source's independence and, when
        ``weighted``, by its relevance and recency."""
        s = f = 0.0
        for row, w, ind in zip(self.rows, self.weights, self.independence(), strict=True):
            mult = (w if weighted else 1.0) * ind
            score = float(row["score"])
            s += mult * score
            f += mult * (1.0 - score)
        return s, f

    def label(self) -> str:
        """The phrasing with the most success behind it (ties: the most recent)."""
        best: dict[str, float] = {}
        for row in self.rows:
            best[row["action"]] = best.get(row["action"], 0.0) + float(row["score"]) + 1e-6
        return max(best.items(), key=lambda kv: kv[1])[0]


def cluster_actions(
    rows: list[dict[str, Any]], weights: list[float], threshold: float
) -> list[ActionCluster]:
    """Greedy clustering of actions by identical normalised text or embedding cosine.

    A shell command never joins a cluster holding a command of another signature (prose, which
    has none, pools by embedding alone: "ran the migrations first" may describe a command).
    """
    return cluster_index(rows, weights, threshold).clusters


def cluster_index(
    rows: list[dict[str, Any]], weights: list[float], threshold: float
) -> ClusterIndex:
    """:func:`cluster_actions`, as the index that found the clusters (to look more actions up
    in them)."""
    import numpy as np

    index = ClusterIndex(threshold)
    for row, w in sorted(zip(rows, weights, strict=True), key=lambda rw: rw[0]["created_at"]):
        vec = np.asarray(row["action_vector"], dtype=np.float32)
        key = normalise_action(row["action"])
        sig = command_signature(row["action"])
        home = index.find(key, sig, vec)
        if home is None:
            home = index.add(ActionCluster(vector=vec, key=key, sig=sig))
        elif home.sig is None:
            home.sig = sig
        home.rows.append(row)
        home.weights.append(w)
    return index


class ClusterIndex:
    """Action clusters with their vectors stacked, so that finding an action's cluster is one
    matrix product rather than a numpy call per cluster (~200 lookups per ``recommend``)."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.clusters: list[ActionCluster] = []
        self._by_key: dict[str, ActionCluster] = {}
        self._vectors: npt.NDArray[np.float32] | None = None

    def add(self, cluster: ActionCluster) -> ActionCluster:
        """Index ``cluster`` (by its key and vector); returns it."""
        import numpy as np

        n = len(self.clusters)
        if self._vectors is None or n == len(self._vectors):
            grown = np.zeros((max(8, 2 * n), len(cluster.vector)), dtype=np.float32)
            if self._vectors is not None:
                grown[:n] = self._vectors
            self._vectors = grown
        self._vectors[n] = cluster.vector
        self.clusters.append(cluster)
        self._by_key.setdefault(cluster.key, cluster)
        return cluster

    def find(self, key: str, sig: str | None, vec: npt.NDArray[np.float32]) -> ActionCluster | None:
        """The cluster an action belongs to (same normalised text, else the closest by
        embedding at or above the threshold among clusters of a compatible command signature;
        ties go to the newer cluster), or ``None``."""
        same = self._by_key.get(key)
        if same is not None or self._vectors is None:
            return same
        n = len(self.clusters)
        sims = self._vectors[:n] @ vec
        best = n - 1 - int(sims[::-1].argmax())  # the newest of the closest
        if float(sims[best]) < self.threshold:
            return None  # the usual answer, without sorting
        cl = self.clusters[best]
        if sig is None or cl.sig is None or cl.sig == sig:
            return cl
        for i in sims.argsort(kind="stable")[::-1]:  # best first; ties: the newer one first
            if float(sims[i]) < self.threshold:
                break
            cl = self.clusters[int(i)]
            if sig is not None and cl.sig is not None and cl.sig != sig:
                continue  # two different commands, however close their embeddings
            return cl
        return None


def scoped_counts(
    cl: ActionCluster, prefer_scope: str | None, tuning: RecommendTuning = DEFAULT_TUNING
) -> tuple[float, float]:
    """Relevance-weighted (successes, failures) of an action for Thompson sampling: this
    project's evidence in full, other projects' worth at most ``tuning.prior_strength``
    observations (the same fix may not work here). Without a project scope: all of it."""
    here = [0.0, 0.0]
    other = [0.0, 0.0]
    for row, w, ind in zip(cl.rows, cl.weights, cl.independence(), strict=True):
        mine = prefer_scope is None or (row.get("scope") or "") == prefer_scope
        tally = here if mine else other
        score = float(row["score"])
        tally[0] += w * ind * score
        tally[1] += w * ind * (1.0 - score)
    n_other = other[0] + other[1]
    scale = min(1.0, tuning.prior_strength / n_other) if n_other > 0 else 0.0
    return here[0] + scale * other[0], here[1] + scale * other[1]


def expected_success(
    cl: ActionCluster, prefer_scope: str | None, tuning: RecommendTuning = DEFAULT_TUNING
) -> float:
    """The calibrated point estimate of an action's success rate (see the module docstring):
    the posterior mean from ``tuning.prior_rate`` (worth ``tuning.base_strength``
    observations), other projects' evidence (worth at most
    ``tuning.prior_strength``) and this project's recency-weighted evidence."""
    order = sorted(
        zip(cl.rows, cl.independence(), strict=True),
        key=lambda ri: float(ri[0]["created_at"]),
        reverse=True,
    )
    here = [0.0, 0.0, 0.0]  # successes, failures, newer outcomes seen so far
    other = [0.0, 0.0, 0.0]
    for row, ind in order:
        mine = prefer_scope is None or (row.get("scope") or "") == prefer_scope
        tally = here if mine else other  # recency within each side: drift is per project
        half = tuning.recent_half_life
        w = ind * (0.5 ** (tally[2] / half) if half > 0 else 1.0)
        score = float(row["score"])
        tally[0] += w * score
        tally[1] += w * (1.0 - score)
        tally[2] += 1.0
    n_other = other[0] + other[1]
    scale = min(1.0, tuning.prior_strength / n_other) if n_other > 0 else 0.0
    s, f = here[0] + scale * other[0], here[1] + scale * other[1]
    n = s + f
    if n > 1.0 and tuning.overdispersion > 0:  # correlated outcomes: diminishing returns
        shrink = 1.0 / (1.0 + (n - 1.0) * tuning.overdispersion)
        s, f = s * shrink, f * shrink
    k = tuning.base_strength
    return (k * tuning.prior_rate + s) / (k + s + f)


def topic_probability(sim: float, tuning: RecommendTuning = DEFAULT_TUNING) -> float:
    """How likely a past task at cosine ``sim`` is the same kind of task as the new one
    (:attr:`RecommendTuning.topic_logit`)."""
    a, b = tuning.topic_logit
    return 1.0 / (1.0 + math.exp(-(a + b * sim)))


def _failed_here(
    index: ClusterIndex,
    rows: list[dict[str, Any]],
    prefer_scope: str | None,
    floor: float,
    tuning: RecommendTuning,
) -> tuple[set[int], list[ActionCluster]]:
    """(ids of the clusters that only ever failed in this project, clusters of this project's
    failed actions found only below the topic floor).

    Looks at this project's attempts (every attempt without a project scope) down to
    ``tuning.failure_threshold``: a paraphrase of a failed task counts against the action."""
    import numpy as np

    tally: dict[int, list[float]] = {}
    loose = ClusterIndex(tuning.action_threshold)
    for row in sorted(rows, key=lambda r: float(r["created_at"])):
        sim = 1.0 - float(row["_distance"])
        if sim < min(tuning.failure_threshold, floor):
            continue
        if prefer_scope is not None and (row.get("scope") or "") != prefer_scope:
            continue
        vec = np.asarray(row["action_vector"], dtype=np.float32)
        key = normalise_action(row["action"])
        sig = command_signature(row["action"])
        home = index.find(key, sig, vec)
        score = float(row["score"])
        if home is not None:
            t = tally.setdefault(id(home), [0.0, 0.0])
            t[0] += score
            t[1] += 1.0 - score
            continue
        if sim >= floor:
            continue  # on topic, but not clustered (cannot happen): nothing to say
        lone = loose.find(key, sig, vec)
        if lone is None:
            lone = loose.add(ActionCluster(vector=vec, key=key, sig=sig))
        lone.rows.append(row)
        lone.weights.append(0.0)
    only_failed = {cid for cid, (s, f) in tally.items() if s <= 1e-9 and f > 0}
    return only_failed, [cl for cl in loose.clusters if cl.counts(weighted=False)[0] <= 1e-9]


#: Options ranked exactly (the winner and the first alternatives); the rest by an upper bound.
EXACT_HEAD = 6


def _exact_head(
    bounded: list[tuple[float, ActionCluster, Alternative]], q: float
) -> list[tuple[float, ActionCluster, Alternative]]:
    """Rank options by their weighted lower bound, given an upper bound of it for each.

    The bound is a 60-step bisection (~0.5 ms in pure Python) and weighted counts never repeat,
    so with ~50 clusters it dominated ``recommend``; the upper bounds are memoised (weighted
    successes rounded up to a grid, no failures). Options are visited by falling upper bound;
    once one cannot enter the top :data:`EXACT_HEAD`, neither can the rest, which keep their
    upper bound as rank (they stay below the head, in the same order or nearly). The winner and
    the head are exactly what ranking everything would give.
    """
    bounded.sort(key=lambda o: -o[0])
    out: list[tuple[float, ActionCluster, Alternative]] = []
    head: list[float] = []
    for i, (upper, cl, alt) in enumerate(bounded):
        if len(head) >= EXACT_HEAD and upper + 1e-6 < head[-1]:
            out += bounded[i:]
            break
        sw, fw = cl.counts(weighted=True)
        rank = _lower_bound(sw, fw, q)
        out.append((rank, cl, alt))
        head = sorted([*head, rank], reverse=True)[:EXACT_HEAD]
    return out


def recommend(
    store: Store,
    qvec: npt.NDArray[np.float32],
    task: str,
    *,
    where: Filter | None,
    explore: bool,
    rng: np.random.Generator,
    half_life_days: float | None,
    now: datetime,
    prefer_scope: str | None = None,
    tuning: RecommendTuning = DEFAULT_TUNING,
) -> Recommendation | None:
    """The best-supported action for ``task``, or ``None`` without usable on-topic evidence."""
    cols = ["_rowid", DOC, "action_vector"]  # the document holds action, outcome, score, ...
    rows = store.vector_search(
        EXPERIENCES, qvec, where=where, limit=tuning.candidates, columns=cols
    )
    rows = store.expand_docs(rows)
    ts_now = now.timestamp()
    best_sim = max((1.0 - float(r["_distance"]) for r in rows), default=0.0)
    floor = max(tuning.topic_threshold, best_sim - tuning.topic_margin)
    on_topic: list[dict[str, Any]] = []
    weights: list[float] = []
    for row in rows:
        sim = 1.0 - float(row["_distance"])
        if sim < floor:
            continue
        w = sim * decay_factor(float(row["created_at"]), ts_now, half_life_days)
        if prefer_scope is not None and (row.get("scope") or "") != prefer_scope:
            w *= 0.5  # another project's evidence counts, but less
        on_topic.append(row)
        weights.append(w)
    if not on_topic:
        return None
    index = cluster_index(on_topic, weights, tuning.action_threshold)
    clusters = index.clusters
    failed_here, loose = _failed_here(index, rows, prefer_scope, floor, tuning)
    options: list[tuple[float, ActionCluster, Alternative]] = []
    bounded: list[tuple[float, ActionCluster, Alternative]] = []
    for cl in clusters + loose:
        s, f = cl.counts(weighted=False)
        alt = Alternative.model_construct(  # every field made here, of its type: not validated
            action=cl.label(),
            confidence=round(_lower_bound(s, f, tuning.quantile), 6),
            successes=round(s, 6),
            failures=round(f, 6),
            evidence_ids=[r["id"] for r in cl.rows],
            variants=sorted({r["action"] for r in cl.rows}),
        )
        if s <= 1e-9 or id(cl) in failed_here or destructive_reason(alt.action) is not None:
            # only ever failed (here), or destroys data / disables a safety net: listed, never
            # chosen (evidence never makes such a command advice; a person may pin a lesson)
            options.append((-1.0, cl, alt))
        elif explore:
            sw, fw = scoped_counts(cl, prefer_scope, tuning)
            options.append((float(rng.beta(0.5 + sw, 0.5 + fw)), cl, alt))
        else:  # an upper bound of the rank: the bound falls with failures, rises with successes
            sw_up = math.ceil(cl.counts(weighted=True)[0] * 32.0) / 32.0  # on a grid: memoised
            bounded.append((_lower_bound(sw_up, 0.0, tuning.quantile), cl, alt))
    options += _exact_head(bounded, tuning.quantile)
    options.sort(key=lambda o: (-o[0], -o[2].successes, o[2].action))
    rank, best_cl, best = options[0]
    if rank < 0:
        return None
    return Recommendation(
        task=task,
        action=best.action,
        confidence=best.confidence,
        expected_success=round(
            topic_probability(max(1.0 - float(r["_distance"]) for r in best_cl.rows), tuning)
            * expected_success(best_cl, prefer_scope, tuning),
            6,
        ),
        successes=best.successes,
        failures=best.failures,
        evidence_ids=best.evidence_ids,
        variants=best.variants,
        explored=explore,
        alternatives=[alt for _r, _c, alt in options[1:]],
    )
