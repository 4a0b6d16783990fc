"""Recommend the best-supported action for a task, with an honest confidence.

* Evidence is only on-topic: experiences whose task vector is close to the new task's (a cosine
  threshold), never anything that merely shares a word.
* Equivalent phrasings of an action pool their evidence: actions are clustered by the cosine of
  their own embeddings (or identical normalised text).
* Confidence is the 5% lower bound of Beta(0.5 + s, 0.5 + f) (Jeffreys prior), where a partial
  outcome counts by its score. Relevance and recency decay weight which action *wins*;
  ``explore=True`` draws the winner by Thompson sampling instead.
* An action that has only ever failed is never recommended; ``None`` without on-topic evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .beta import jeffreys_lower_bound
from .recall import decay_factor
from .store import EXPERIENCES, Store
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
    candidates: int = 200
    quantile: float = 0.05


DEFAULT_TUNING = RecommendTuning()
_NORM = re.compile(r"[^\w]+", re.UNICODE)


def normalise_action(action: str) -> str:
    """Case, punctuation and spacing folded, for exact-variant pooling."""
    return _NORM.sub(" ", action.lower()).strip()


@dataclass
class ActionCluster:
    """One action and its equivalent phrasings, with pooled evidence."""

    vector: npt.NDArray[np.float32]
    key: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)

    def counts(self, weighted: bool) -> tuple[float, float]:
        s = f = 0.0
        for row, w in zip(self.rows, self.weights, strict=True):
            mult = w if weighted else 1.0
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
    """Greedy clustering of actions by embedding cosine or identical normalised text."""
    import numpy as np

    clusters: list[ActionCluster] = []
    for row, w in sorted(zip(rows, weights, strict=True), key=lambda rw: rw[0]["created_at"]):
        vec = np.asarray(row["action_vector"], dtype=np.float32)
        key = normalise_action(row["action"])
        home = None
        best = threshold
        for cl in clusters:
            if cl.key == key:
                home = cl
                break
            sim = float(cl.vector @ vec)
            if sim >= best:
                best, home = sim, cl
        if home is None:
            home = ActionCluster(vector=vec, key=key)
            clusters.append(home)
        home.rows.append(row)
        home.weights.append(w)
    return clusters


def recommend(
    store: Store,
    qvec: npt.NDArray[np.float32],
    task: str,
    *,
    where: str | None,
    explore: bool,
    rng: np.random.Generator,
    half_life_days: float | None,
    now: datetime,
    prefer_scope: str | None = None,
    tuning: RecommendTuning = DEFAULT_TUNING,
) -> Recommendation | None:
    """The best-supported action for ``task``, or ``None`` without usable on-topic evidence."""
    cols = ["id", "action", "outcome", "score", "created_at", "scope", "action_vector"]
    rows = store.vector_search(
        EXPERIENCES, qvec, where=where, limit=tuning.candidates, columns=cols
    )
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
    clusters = cluster_actions(on_topic, weights, tuning.action_threshold)
    options: list[tuple[float, ActionCluster, Alternative]] = []
    for cl in clusters:
        s, f = cl.counts(weighted=False)
        sw, fw = cl.counts(weighted=True)
        alt = Alternative(
            action=cl.label(),
            confidence=round(jeffreys_lower_bound(s, f, tuning.quantile), 6),
            successes=round(s, 6),
            failures=round(f, 6),
            evidence_ids=[r["id"] for r in cl.rows],
            variants=sorted({r["action"] for r in cl.rows}),
        )
        if s <= 1e-9:
            rank = -1.0  # only ever failed: listed, never chosen
        elif explore:
            rank = float(rng.beta(0.5 + sw, 0.5 + fw))
        else:
            rank = jeffreys_lower_bound(sw, fw, tuning.quantile)
        options.append((rank, cl, alt))
    options.sort(key=lambda o: (-o[0], -o[2].successes, o[2].action))
    rank, _cl, best = options[0]
    if rank < 0:
        return None
    return Recommendation(
        task=task,
        action=best.action,
        confidence=best.confidence,
        successes=best.successes,
        failures=best.failures,
        evidence_ids=best.evidence_ids,
        variants=best.variants,
        explored=explore,
        alternatives=[alt for _r, _c, alt in options[1:]],
    )
