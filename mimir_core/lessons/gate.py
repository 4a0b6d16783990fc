"""The evidence gate (ε-gate), the live gate and the circuit breaker.

The statistical choice, in one place:

* **Outcomes** are experience scores in [0, 1] (success 1, failure 0, partial by its score), so a
  group of experiences gives ``s = Σ score`` and ``f = Σ (1 - score)``.
* **Each group's success rate** has a Beta(0.5 + s, 0.5 + f) posterior (the Jeffreys prior, as in
  :mod:`mimir_core.search.recommend`). The **lift** is the difference of the posterior means of the
  group that followed the lesson and the group that did not. Its **noise band** is the
  one-sided 95% interval of the difference by MOVER (Newcombe's method of variance estimates
  recovery): ``sqrt((mean₁ - low₁)² + (high₀ - mean₀)²)``, from the exact 5% and 95% quantiles of
  each side's Beta. For large groups this is the normal band ``z · sqrt(var₁ + var₀)``; for small,
  skewed ones it is wider, as it must be: two failures of an action are Beta(0.5, 2.5), whose
  95% quantile is 0.57 where the normal approximation says 0.47. The normal band let "avoid"
  lessons in on two failures of an action that works 40% of the time, and "prefer" lessons on
  three lucky tries (on the learning benchmark's seeds 4-11, 10 of the 18 lessons that did not
  help). The lesson passes when ``lift - noise >= ε`` (ε = 0.05): the lower end of the interval
  beats "no effect" by at least ε. Each group needs at least two experiences.
* **Alternatives, action by action.** For an ``avoid`` lesson the group that followed it is
  "everything else that was done", which an agent exploiting its best action fills mostly with
  that action; pooled, it would make any ordinary action look bad. That side's rate is instead
  the mean of each alternative action's posterior mean (each action counts once, however often
  it was tried), with variance ``Σ var / k²`` over its k actions
  (``offline_gate(balance="followed")``); the consolidation run does this for ``avoid``. So
  "avoid X" means X is credibly worse than the average other action, not than the best one.
* **Held out, by two-fold cross-fitting.** Every experience falls in one of two folds by a hash of
  its id (deterministic for a store). A rule "counts" in a fold when that fold alone shows its
  direction (for ``prefer``: the action did better than the alternatives; for ``avoid``: worse,
  the alternatives taken action by action as above).
  The experiences of fold B are held-out evidence only if the rule counts in fold A, and vice
  versa. So an effect that shows up in only one half is never validated on the data it came from;
  a rule that replicates in both halves is tested on all of its topic's evidence.
* **Too little evidence** leaves the lesson a candidate and says how many more held-out
  experiences it needs if the observed rates held (``GateResult.needed``); a lift whose point
  estimate is below ε needs "0 more" because more of the same would not pass.
* **The live gate** measures the same quantity directly: a probe (the bench's WARM/COLD solver)
  solves tasks with the lesson in context (warm) and without it (cold); same ε, same noise band.
* **The circuit breaker** compares outcomes with the lesson in context (experiences whose
  ``recalled_lesson_ids`` name it, plus explicit feedback) against on-topic outcomes without it.
  It trips when the *upper* end of the same interval is below zero: the lesson credibly hurts.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..search.beta import beta_ppf
from ..types import GateResult

EPSILON = 0.05
Z = 1.6448536269514722  # one-sided 95%
Z_LEVEL = 0.05
MIN_GROUP = 2
#: How far ``needed`` searches before saying "more than this".
MAX_NEEDED = 10_000


@dataclass(frozen=True)
class Outcome:
    """One piece of held-out evidence: an experience id, its fold, score, and if it followed."""

    id: str
    score: float
    followed: bool
    group: str = ""
    """The action (cluster) the experience took: what :func:`offline_gate` balances over."""
    source: str | None = None
    """Its independent source (``None``: unattributed): one source's many outcomes on one side
    count with diminishing weight (:func:`~mimir_core.observations.tally.independence_weights`)."""


def fold_of(ident: str) -> int:
    """The cross-fitting fold (0 or 1) of an experience id."""
    return hashlib.sha256(ident.encode("utf-8")).digest()[0] & 1


def _beta(s: float, f: float) -> tuple[float, float]:
    a, b = 0.5 + s, 0.5 + f
    mean = a / (a + b)
    var = a * b / ((a + b) ** 2 * (a + b + 1.0))
    return mean, var


#: One side of a comparison: its scores, the action (cluster) of each when the side is averaged
#: action by action (``None``: the scores are pooled), and each score's weight as evidence
#: (``None``: every score counts once).
Side = tuple[Sequence[float], Sequence[str] | None, Sequence[float] | None]


def _tally(scores: Sequence[float], weights: Sequence[float], scale: float) -> tuple[float, float]:
    s = sum(w * x for w, x in zip(weights, scores, strict=True))
    f = sum(w * (1.0 - x) for w, x in zip(weights, scores, strict=True))
    return scale * s, scale * f


def _side(
    scores: Sequence[float],
    groups: Sequence[str] | None,
    weights: Sequence[float] | None = None,
    scale: float = 1.0,
) -> tuple[float, float]:
    """(posterior mean, variance) of one side's success rate, its tallies scaled by ``scale``.

    Pooled: one Beta posterior. Balanced by action: the mean of each action's posterior mean
    (each action counts once, however often it was tried), with variance ``Σ var / k²``.
    ``weights``: each score's weight as evidence (one source's many outcomes weigh less)."""
    ws = list(weights) if weights is not None else [1.0] * len(scores)
    if groups is None:
        return _beta(*_tally(scores, ws, scale))
    by: dict[str, tuple[list[float], list[float]]] = {}
    for g, x, w in zip(groups, scores, ws, strict=True):
        xs, gw = by.setdefault(g, ([], []))
        xs.append(x)
        gw.append(w)
    stats = [_beta(*_tally(xs, gw, scale)) for xs, gw in by.values()]
    k = len(stats)
    return sum(m for m, _v in stats) / k, sum(v for _m, v in stats) / (k * k)


def _quantile(mean: float, var: float, q: float) -> float:
    """The ``q`` quantile of the Beta with this mean and variance (a pooled side's posterior
    exactly; a side averaged action by action by its moments). Normal when no Beta has them."""
    size = mean * (1.0 - mean) / var - 1.0 if var > 0 else 0.0
    if size <= 0 or not 0.0 < mean < 1.0:
        return min(1.0, max(0.0, mean + (Z if q > 0.5 else -Z) * math.sqrt(max(var, 0.0))))
    return beta_ppf(q, mean * size, (1.0 - mean) * size)


def _band(m1: float, v1: float, m0: float, v0: float, upper: bool) -> float:
    """MOVER half-width of the one-sided 95% interval of ``m1 - m0`` (see the module
    docstring): below the difference (``upper=False``) or above it."""
    lo, hi = Z_LEVEL, 1.0 - Z_LEVEL
    if upper:  # the difference's upper end: followed high, other low
        a = _quantile(m1, v1, hi) - m1
        b = m0 - _quantile(m0, v0, lo)
    else:
        a = m1 - _quantile(m1, v1, lo)
        b = _quantile(m0, v0, hi) - m0
    return math.sqrt(a * a + b * b)


def lift_and_noise(
    followed: Sequence[float],
    other: Sequence[float],
    *,
    followed_groups: Sequence[str] | None = None,
    other_groups: Sequence[str] | None = None,
    followed_weights: Sequence[float] | None = None,
    other_weights: Sequence[float] | None = None,
    upper: bool = False,
) -> tuple[float, float]:
    """(difference of posterior means, half-width of its one-sided 95% interval: below it, or
    above it with ``upper``) of two groups of scores; a side with ``*_groups`` is averaged
    action by action (see :func:`_side`), a side with ``*_weights`` counts each score by its
    weight as evidence."""
    m1, v1 = _side(followed, followed_groups, followed_weights)
    m0, v0 = _side(other, other_groups, other_weights)
    return m1 - m0, _band(m1, v1, m0, v0, upper)


def _needed(followed: Side, other: Side, epsilon: float) -> int:
    """More held-out experiences needed to pass if every group kept its observed rate (the
    extra experiences shared in proportion to the groups' sizes)."""
    total = len(followed[0]) + len(other[0])

    def passes(extra: int) -> bool:
        scale = 1.0 + extra / total
        m1, v1 = _side(*followed, scale=scale)
        m0, v0 = _side(*other, scale=scale)
        return (m1 - m0) - _band(m1, v1, m0, v0, upper=False) >= epsilon

    if not passes(MAX_NEEDED):
        return 0
    lo, hi = 0, 1
    while not passes(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _result(
    lift: float,
    noise: float,
    n_with: int,
    n_without: int,
    *,
    passed: bool,
    detail: str,
    needed: int = 0,
) -> GateResult:
    return GateResult(
        lift=round(lift, 4),
        noise=round(noise, 4),
        n_with=n_with,
        n_without=n_without,
        passed=passed,
        needed=needed,
        detail=detail,
    )


def compare(
    followed: Sequence[float],
    other: Sequence[float],
    *,
    epsilon: float = EPSILON,
    what: str = "",
    followed_groups: Sequence[str] | None = None,
    other_groups: Sequence[str] | None = None,
    followed_weights: Sequence[float] | None = None,
    other_weights: Sequence[float] | None = None,
) -> GateResult:
    """The gate's verdict on two groups of outcome scores (followed the lesson vs did not); a
    side with ``*_groups`` (each score's action) is averaged action by action, a side with
    ``*_weights`` counts each score by its weight as evidence."""
    n1, n0 = len(followed), len(other)
    groups: dict[str, Any] = {
        "followed_groups": followed_groups,
        "other_groups": other_groups,
        "followed_weights": followed_weights,
        "other_weights": other_weights,
    }
    if n1 < MIN_GROUP or n0 < MIN_GROUP:
        short = []
        if n1 < MIN_GROUP:
            short.append(f"{MIN_GROUP - n1} more that followed it")
        if n0 < MIN_GROUP:
            short.append(f"{MIN_GROUP - n0} more that did not")
        lift, noise = lift_and_noise(followed, other, **groups) if n1 and n0 else (0.0, 0.0)
        return _result(
            lift,
            noise,
            n1,
            n0,
            passed=False,
            needed=max(MIN_GROUP - n1, 0) + max(MIN_GROUP - n0, 0),
            detail=f"too little {what}evidence: needs {' and '.join(short)}",
        )
    lift, noise = lift_and_noise(followed, other, **groups)
    passed = lift - noise >= epsilon
    if passed:
        detail = f"lift {lift:+.2f} ± {noise:.2f} clears ε={epsilon:g} ({n1} vs {n0})"
        needed = 0
    elif lift < epsilon:
        detail = f"lift {lift:+.2f} is below ε={epsilon:g}: no evidence that it helps"
        needed = 0
    else:
        needed = _needed(
            (followed, followed_groups, followed_weights),
            (other, other_groups, other_weights),
            epsilon,
        )
        more = f"about {needed} more" if needed else f"more than {MAX_NEEDED} more"
        detail = (
            f"lift {lift:+.2f} ± {noise:.2f} is within the noise band: needs {more} "
            f"{what}experiences at these rates"
        )
    return _result(lift, noise, n1, n0, passed=passed, needed=needed, detail=detail)


def _rate(outcomes: Sequence[Outcome], balanced: bool) -> float:
    """Observed success rate: pooled, or the mean of each action's rate."""
    if not balanced:
        return sum(o.score for o in outcomes) / len(outcomes)
    by: dict[str, list[float]] = {}
    for o in outcomes:
        by.setdefault(o.group, []).append(o.score)
    return sum(sum(v) / len(v) for v in by.values()) / len(by)


def _direction_holds(outcomes: Sequence[Outcome], balance: str) -> bool:
    fol = [o for o in outcomes if o.followed]
    oth = [o for o in outcomes if not o.followed]
    if not fol or not oth:
        return False
    return _rate(fol, balance == "followed") > _rate(oth, balance == "other")


def held_out(outcomes: Sequence[Outcome], *, balance: str = "") -> list[Outcome]:
    """The outcomes that count as held-out evidence under two-fold cross-fitting."""
    folds: tuple[list[Outcome], list[Outcome]] = ([], [])
    for o in outcomes:
        folds[fold_of(o.id)].append(o)
    kept: list[Outcome] = []
    for f in (0, 1):
        if _direction_holds(folds[f], balance):
            kept.extend(folds[1 - f])
    return sorted(kept, key=lambda o: o.id)


def offline_gate(
    outcomes: Sequence[Outcome], *, epsilon: float = EPSILON, balance: str = ""
) -> GateResult:
    """Gate a lesson on its topic's logged outcomes (cross-fitted; see the module docstring).

    ``balance`` names the side that holds the alternatives (``"followed"`` for an ``avoid``
    lesson, whose followers did anything else; ``"other"`` for ``prefer``): that side's rate is
    the mean of each alternative action's rate (:attr:`Outcome.group`), not the pooled rate.
    """
    if balance not in ("", "followed", "other"):
        from ..errors import InvalidInputError

        raise InvalidInputError("balance", f"must be '', 'followed' or 'other'; got {balance!r}")
    kept = held_out(outcomes, balance=balance)
    if not kept:
        total = len(outcomes)
        return GateResult(
            n_with=0,
            n_without=0,
            passed=False,
            needed=max(4 * MIN_GROUP - total, MIN_GROUP),
            detail=(
                f"the effect does not replicate across the two halves of its {total} "
                "experience(s) yet: needs more evidence on this task"
            ),
        )
    fol = [o for o in kept if o.followed]
    oth = [o for o in kept if not o.followed]
    return compare(
        [o.score for o in fol],
        [o.score for o in oth],
        epsilon=epsilon,
        what="held-out ",
        followed_groups=[o.group for o in fol] if balance == "followed" else None,
        other_groups=[o.group for o in oth] if balance == "other" else None,
        followed_weights=_independence(fol),
        other_weights=_independence(oth),
    )


def _independence(side: Sequence[Outcome]) -> list[float]:
    """Each outcome's weight by its source within one side, per action (1 for an outcome that is
    its source's only one there, or unattributed)."""
    from ..observations.tally import independence_weights

    out = [1.0] * len(side)
    by: dict[str, list[int]] = {}
    for i, o in enumerate(side):
        by.setdefault(o.group, []).append(i)
    for idx in by.values():
        for i, w in zip(idx, independence_weights([side[i].source for i in idx]), strict=True):
            out[i] = w
    return out


#: A probe solves a task once: ``probe(context_block, trial) -> score in [0, 1]``.
Probe = Callable[[str, int], float]


def live_gate(
    probe: Probe, block: str, *, trials: int = 20, epsilon: float = EPSILON
) -> GateResult:
    """Measure a lesson's lift directly: ``trials`` warm runs (with ``block``) and cold runs."""
    if trials < MIN_GROUP:
        from ..errors import InvalidInputError

        raise InvalidInputError("trials", f"must be at least {MIN_GROUP}; got {trials}")
    warm = [min(max(float(probe(block, t)), 0.0), 1.0) for t in range(trials)]
    cold = [min(max(float(probe("", t)), 0.0), 1.0) for t in range(trials)]
    return compare(warm, cold, epsilon=epsilon, what="live ")


def breaker(
    with_lesson: Sequence[float], without: Sequence[float], *, min_with: int = MIN_GROUP
) -> tuple[bool, GateResult]:
    """(trip?, measurement): trips when outcomes with the lesson are credibly worse."""
    if len(with_lesson) < min_with or len(without) < MIN_GROUP:
        res = compare(with_lesson, without, what="attributed ")
        return False, res
    lift, noise = lift_and_noise(with_lesson, without, upper=True)
    trip = lift + noise < 0.0
    detail = (
        f"with the lesson in context {len(with_lesson)} outcome(s) averaged "
        f"{sum(with_lesson) / len(with_lesson):.2f}, without it {len(without)} averaged "
        f"{sum(without) / len(without):.2f}: lift {lift:+.2f} ± {noise:.2f}"
    )
    return trip, _result(
        lift, noise, len(with_lesson), len(without), passed=not trip, detail=detail
    )
