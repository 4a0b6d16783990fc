"""Recommend the best-supported action for a task, with an honest confidence.

* Evidence is only on-topic, and it pools across the task's family: each experience counts by
  how likely its task is the same kind of task (P(same family | cosine), directly or through
  the task's family centroid: :mod:`mimir_core.search.family`), never by its distance to the single
  closest hit. So confidence rises with a family's evidence, and an exact-text match does not
  shut out the family's paraphrases. Nothing that merely shares a word counts.
* Equivalent phrasings of an action pool their evidence (:mod:`mimir_core.search.action_clusters`).
* One evidence count per action (:func:`evidence`) makes the draw, the ranking, the confidence
  and the point estimate: the records' family probabilities (and clock decay, when a half-life
  is set), their sources' independence, older outcomes fading once newer ones of the action
  arrive (:attr:`RecommendTuning.recent_half_life`, so drift shows), other projects' evidence
  worth at most :attr:`RecommendTuning.prior_strength` observations (the same fix may not
  work here).
* Confidence is the 10% lower bound (:attr:`RecommendTuning.quantile`) of Beta(0.5 + s,
  0.5 + f) (Jeffreys prior) of that count,
  where a partial outcome counts by its score. The winner is the best lower bound times how
  likely the action's closest evidence is this kind of task, or with ``explore=True`` the best
  Thompson draw times the same: of two fixes with about as strong evidence, the one whose
  evidence is more likely about this kind of task wins, not a neighbouring kind's.
* ``expected_success`` is the calibrated point estimate: the posterior mean from the
  uninformed prior 0.5 (:attr:`RecommendTuning.prior_rate`), many outcomes counting with
  diminishing returns (:attr:`RecommendTuning.overdispersion`); times the probability that its
  closest evidence is the same kind of task at all (:attr:`RecommendTuning.topic_logit`).
* When the task's own kind has a well-tried action (:attr:`RecommendTuning.well_tried`), an
  action whose evidence is clearly of another kind is listed but not chosen.
* **Independent sources, not volume.** A record's evidence is weighted by its source (session,
  thread or host; :func:`~mimir_core.observations.tally.evidence_source`): one source's n
  records of an action count as n / (1 + (n - 1) / 2) observations, at most two. Fifty forged
  successes from one session weigh less than three from three sessions. Records made through
  the Python API without a session are each their own source.
* A command that destroys data outside the project or switches off a safety net
  (:func:`~mimir_core.search.actions.destructive_reason`: ``curl … | sh``, ``--insecure``,
  ``rm -rf ~``) is listed among the alternatives but never recommended, whatever its evidence.
* An action that has only ever failed is never recommended; ``None`` without on-topic evidence.
  With a project scope, "only ever failed" is judged on that project's evidence, including
  failed attempts phrased differently enough to fall below the topic threshold (down to
  :attr:`RecommendTuning.failure_threshold`): a fix that failed here and never worked here is
  not recommended here again, however well it did elsewhere, unless it since worked here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..store.core import DOC, EXPERIENCES, Store
from ..store.filters import Filter
from ..types import Alternative, Recommendation
from .action_clusters import ActionCluster, ClusterIndex, cluster_index
from .actions import command_signature, destructive_reason, normalise_action
from .beta import jeffreys_lower_bound
from .family import family_probabilities, topic_probability
from .recall import decay_factor

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..deps import Deps


@dataclass(frozen=True)
class RecommendTuning:
    """The knobs of the recommender (defaults tuned on the labelled set)."""

    topic_threshold: float = 0.40
    """An experience counts as evidence from the family probability of this cosine (0.43)."""
    centroid_core: float = 0.50
    """Cosine from which a past task is confidently the same kind (P 0.85) and joins the
    task's family centroid (:func:`family_probabilities`)."""
    centroid_shift: float = 0.03
    """Cosine taken off a candidate's cosine to the family centroid before it is read as
    :func:`topic_probability` (a centroid is closer to every member than members are to each
    other; chosen on the dev learning stream so that the share of pooled weight from other
    families stays that of the direct cosine)."""
    action_threshold: float = 0.70
    """Minimum action cosine for two phrasings to pool their evidence."""
    candidates: int = 100
    """Nearest experiences considered (each on-topic one costs a Beta quantile or two)."""
    quantile: float = 0.10
    """The lower quantile of an action's Beta posterior that is its ``confidence`` (and its
    rank): 0.10, a 90% one-sided bound. Evidence here is counted fractionally (each record
    by how likely it is the same kind of task, its source's independence, its recency), so the
    same bound sits lower than on raw counts: at 0.05, 45% of the recommendations made late
    on the learning benchmark's dev stream stated less than 0.3, and an agent that follows
    from 0.3 (the policy most users write) ignored them. Chosen on the dev stream only (8 seeds
    x 320 tasks, second half: 0.833 -> 0.932 of the per-family ceiling; the ops stream held
    out). The bound stays honest: on the CI seeds its overconfidence is 0.000 and 99% of
    picks sit in bins whose observed success reaches it."""
    rank_quantile: float = 0.05
    """The lower quantile that ranks actions without ``explore`` (times how likely their evidence
    is this kind of task): more cautious than :attr:`quantile`, so that a lucky two of two does
    not outrank three of four (at 0.10 it did, on the labelled set's tune part and its test
    part alike). Only the choice uses it; the stated ``confidence`` is :attr:`quantile`'s."""
    well_tried: float = 4.0
    """Observations (as counted by :meth:`ActionCluster.evidence`) that, with a lower bound of
    at least :attr:`well_tried_bound`, make an action well tried on the task's own kind..."""
    well_tried_bound: float = 0.5
    family_gap: float = 0.10
    """...and then an action whose evidence is this much less likely (:func:`topic_probability`)
    the same kind of task is not chosen: exploring it is a bet on another kind of task."""
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
    """:func:`~mimir_core.search.beta.jeffreys_lower_bound`, memoised: each call is a 60-step
    bisection (~0.3 ms) and raw counts repeat (1 success, 1 failure, ...) across clusters and
    calls."""
    return jeffreys_lower_bound(successes, failures, q)


def evidence(
    cl: ActionCluster, prefer_scope: str | None, tuning: RecommendTuning
) -> tuple[float, float]:
    """An action's evidence for the task at hand (:meth:`ActionCluster.evidence` with this
    tuning's recency and other projects' cap)."""
    return cl.evidence(
        prefer_scope, recent_half_life=tuning.recent_half_life, prior_strength=tuning.prior_strength
    )


def expected_success(
    cl: ActionCluster, prefer_scope: str | None, tuning: RecommendTuning = DEFAULT_TUNING
) -> float:
    """The calibrated point estimate of an action's success rate (see the module docstring):
    the posterior mean from ``tuning.prior_rate`` (worth ``tuning.base_strength``
    observations) given the action's :func:`evidence`, many outcomes counting with
    diminishing returns (``tuning.overdispersion``)."""
    s, f = evidence(cl, prefer_scope, tuning)
    n = s + f
    if n > 1.0 and tuning.overdispersion > 0:  # correlated outcomes: diminishing returns
        shrink = 1.0 / (1.0 + (n - 1.0) * tuning.overdispersion)
        s, f = s * shrink, f * shrink
    k = tuning.base_strength
    return (k * tuning.prior_rate + s) / (k + s + f)


def _topic(sim: float, tuning: RecommendTuning) -> float:
    return topic_probability(sim, tuning.topic_logit)


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
        else:
            loose.join(lone, key, vec)
        lone.rows.append(row)
        lone.weights.append(0.0)
    only_failed = {cid for cid, (s, f) in tally.items() if s <= 1e-9 and f > 0}
    return only_failed, [cl for cl in loose.clusters if cl.counts(weighted=False)[0] <= 1e-9]


def _well_tried_topic(
    clusters: list[ActionCluster],
    failed_here: set[int],
    prefer_scope: str | None,
    tuning: RecommendTuning,
) -> float:
    """How likely the closest evidence of the task's *well-tried* actions is the same kind of
    task (:attr:`RecommendTuning.well_tried`), or ``0`` when no action is well tried."""
    best = 0.0
    for cl in clusters:
        if id(cl) in failed_here:
            continue
        s, f = evidence(cl, prefer_scope, tuning)
        if s + f >= tuning.well_tried and _lower_bound(s, f, tuning.quantile) >= (
            tuning.well_tried_bound
        ):
            best = max(best, cl.topic())
    return best


#: Options ranked exactly (the winner and the first alternatives); the rest by an upper bound.
EXACT_HEAD = 6


def _exact_head(
    bounded: list[tuple[float, ActionCluster, Alternative]],
    q: float,
    prefer_scope: str | None,
    tuning: RecommendTuning,
) -> list[tuple[float, ActionCluster, Alternative]]:
    """Rank options by their weighted lower bound times how likely their evidence is this kind
    of task (as the explore draw is), given an upper bound of that for each.

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
        sw, fw = evidence(cl, prefer_scope, tuning)
        rank = _lower_bound(sw, fw, q) * cl.topic()
        out.append((rank, cl, alt))
        head = sorted([*head, rank], reverse=True)[:EXACT_HEAD]
    return out


def recommend_in(
    deps: Deps,
    task: str,
    *,
    explore: bool = False,
    scope: str | None = None,
    seed: int | None = None,
) -> Recommendation | None:
    """``Mimir.recommend`` once its arguments are checked and the spool drained: on a handle's
    store and embedder, by its scope rule, clock and tuning (so lesson serving, which needs a
    recommendation, does not go through the facade)."""
    import numpy as np

    from ..store.filters import LIVE, all_of

    by_scope, prefer = deps.scope_filter(scope)
    return recommend(
        deps.store,
        deps.embedder.embed_one(task),
        task,
        where=all_of(by_scope, LIVE),
        explore=bool(explore),
        rng=np.random.default_rng(seed),
        half_life_days=deps.half_life_days,
        now=deps.now(),
        prefer_scope=prefer,
        tuning=deps.recommend_tuning,
    )


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
    cols = ["_rowid", DOC, "action_vector", "vector"]  # the document: action, outcome, ...
    rows = store.vector_search(
        EXPERIENCES, qvec, where=where, limit=tuning.candidates, columns=cols
    )
    rows = store.expand_docs(rows)
    ts_now = now.timestamp()
    floor = tuning.topic_threshold
    family = family_probabilities(
        rows,
        qvec,
        logit=tuning.topic_logit,
        core=tuning.centroid_core,
        shift=tuning.centroid_shift,
    )
    p_floor = _topic(floor, tuning)
    on_topic: list[dict[str, Any]] = []
    weights: list[float] = []
    for row, p in zip(rows, family, strict=True):
        if p < p_floor:
            continue
        # Counted as likely as it is the same kind of task, whatever else is closer: an exact
        # match must not shut out its paraphrases (the family's evidence pools).
        row["_topic"] = p
        w = p * decay_factor(float(row["created_at"]), ts_now, half_life_days)
        on_topic.append(row)
        weights.append(w)
    if not on_topic:
        return None
    index = cluster_index(on_topic, weights, tuning.action_threshold)
    clusters = index.clusters
    failed_here, loose = _failed_here(index, rows, prefer_scope, floor, tuning)
    options: list[tuple[float, ActionCluster, Alternative]] = []
    bounded: list[tuple[float, ActionCluster, Alternative]] = []
    anchor = _well_tried_topic(clusters, failed_here, prefer_scope, tuning)
    for cl in clusters + loose:
        s, f = cl.counts(weighted=False)
        es, ef = evidence(cl, prefer_scope, tuning)
        alt = Alternative.model_construct(  # every field made here, of its type: not validated
            action=cl.label(),
            confidence=round(_lower_bound(es, ef, tuning.quantile), 6),
            successes=round(s, 6),
            failures=round(f, 6),
            evidence_ids=[r["id"] for r in cl.rows],
            variants=sorted({r["action"] for r in cl.rows}),
        )
        if s <= 1e-9 or id(cl) in failed_here or destructive_reason(alt.action) is not None:
            # only ever failed (here), or destroys data / disables a safety net: listed, never
            # chosen (evidence never makes such a command advice; a person may pin a lesson)
            options.append((-1.0, cl, alt))
        elif cl.topic() < anchor - tuning.family_gap:
            options.append((-0.5, cl, alt))  # another kind of task's: listed, never chosen
        elif explore:
            # The draw is of the action's rate on tasks like its evidence, times how likely that
            # evidence is this kind of task: a promising action of a neighbouring family does
            # not outdraw this family's well-tried one.
            sw, fw = es, ef
            options.append((float(rng.beta(0.5 + sw, 0.5 + fw)) * cl.topic(), cl, alt))
        else:  # an upper bound of the rank: the bound falls with failures, rises with successes
            sw_up = math.ceil(es * 32.0) / 32.0  # on a grid: memoised
            bounded.append((_lower_bound(sw_up, 0.0, tuning.rank_quantile) * cl.topic(), cl, alt))
    options += _exact_head(bounded, tuning.rank_quantile, prefer_scope, tuning)
    options.sort(key=lambda o: (-o[0], -o[2].successes, o[2].action))
    rank, best_cl, best = options[0]
    if rank < 0:
        return None
    return Recommendation(
        task=task,
        action=best.action,
        confidence=best.confidence,
        expected_success=round(
            best_cl.topic() * expected_success(best_cl, prefer_scope, tuning),
            6,
        ),
        successes=best.successes,
        failures=best.failures,
        evidence_ids=best.evidence_ids,
        variants=best.variants,
        explored=explore,
        alternatives=[alt for _r, _c, alt in options[1:]],
    )
