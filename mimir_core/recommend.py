"""Recommend the best-supported action for a task, with an honest confidence.

* Evidence is only on-topic: experiences whose task vector is close to the new task's (a cosine
  threshold), never anything that merely shares a word.
* Equivalent phrasings of an action pool their evidence: actions are clustered by the cosine of
  their own embeddings (or identical normalised text), but two shell commands with different
  signatures never pool (:func:`mimir_core.actions.command_signature`: ``pytest tests/x`` is not
  ``alembic upgrade head && pytest tests/x``, however close their embeddings).
* Confidence is the 5% lower bound of Beta(0.5 + s, 0.5 + f) (Jeffreys prior), where a partial
  outcome counts by its score. Relevance and recency decay weight which action *wins*;
  ``explore=True`` draws the winner by Thompson sampling instead.
* An action that has only ever failed is never recommended; ``None`` without on-topic evidence.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .actions import command_signature
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
    candidates: int = 100
    """Nearest experiences considered (each on-topic one costs a Beta quantile or two)."""
    quantile: float = 0.05


DEFAULT_TUNING = RecommendTuning()


@functools.lru_cache(maxsize=4096)
def _lower_bound(successes: float, failures: float, q: float) -> float:
    """:func:`~mimir_core.beta.jeffreys_lower_bound`, memoised: each call is a 60-step bisection
    (~0.3 ms) and raw counts repeat (1 success, 1 failure, ...) across clusters and calls."""
    return jeffreys_lower_bound(successes, failures, q)


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
    sig: str | None = None
    """The command signature of its shell commands (``None``: prose only so far)."""

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
    """Greedy clustering of actions by identical normalised text or embedding cosine.

    A shell command never joins a cluster holding a command of another signature (prose, which
    has none, pools by embedding alone: "ran the migrations first" may describe a command).
    """
    import numpy as np

    clusters: list[ActionCluster] = []
    for row, w in sorted(zip(rows, weights, strict=True), key=lambda rw: rw[0]["created_at"]):
        vec = np.asarray(row["action_vector"], dtype=np.float32)
        key = normalise_action(row["action"])
        sig = command_signature(row["action"])
        home = None
        best = threshold
        for cl in clusters:
            if cl.key == key:
                home = cl
                break
            if sig is not None and cl.sig is not None and cl.sig != sig:
                continue  # two different commands, however close their embeddings
            sim = float(cl.vector @ vec)
            if sim >= best:
                best, home = sim, cl
        if home is None:
            home = ActionCluster(vector=vec, key=key, sig=sig)
            clusters.append(home)
        elif home.sig is None:
            home.sig = sig
        home.rows.append(row)
        home.weights.append(w)
    return clusters


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
    bounded: list[tuple[float, ActionCluster, Alternative]] = []
    for cl in clusters:
        s, f = cl.counts(weighted=False)
        alt = Alternative(
            action=cl.label(),
            confidence=round(_lower_bound(s, f, tuning.quantile), 6),
            successes=round(s, 6),
            failures=round(f, 6),
            evidence_ids=[r["id"] for r in cl.rows],
            variants=sorted({r["action"] for r in cl.rows}),
        )
        if s <= 1e-9:
            options.append((-1.0, cl, alt))  # only ever failed: listed, never chosen
        elif explore:
            sw, fw = cl.counts(weighted=True)
            options.append((float(rng.beta(0.5 + sw, 0.5 + fw)), cl, alt))
        else:  # an upper bound of the rank: the bound falls with failures, rises with successes
            sw_up = math.ceil(cl.counts(weighted=True)[0] * 32.0) / 32.0  # on a grid: memoised
            bounded.append((_lower_bound(sw_up, 0.0, tuning.quantile), cl, alt))
    options += _exact_head(bounded, tuning.quantile)
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
