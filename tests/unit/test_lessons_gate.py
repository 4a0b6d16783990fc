"""The ε-gate, cross-fitting, the live gate and the circuit breaker (pure statistics)."""

from __future__ import annotations

import math
import random

import pytest

from mimir_core.errors import InvalidInputError
from mimir_core.lessons.gate import (
    EPSILON,
    Outcome,
    Z,
    _side,
    breaker,
    compare,
    fold_of,
    held_out,
    lift_and_noise,
    live_gate,
    offline_gate,
)


def ids_in_fold(fold: int, n: int, prefix: str = "e") -> list[str]:
    out, i = [], 0
    while len(out) < n:
        ident = f"{prefix}{i}"
        if fold_of(ident) == fold:
            out.append(ident)
        i += 1
    return out


def test_a_clear_effect_passes_and_says_so() -> None:
    res = compare([1.0] * 6, [0.0] * 5)
    assert res.passed and res.needed == 0
    assert res.lift - res.noise >= EPSILON
    assert (res.n_with, res.n_without) == (6, 5)
    assert "clears" in res.detail


def test_too_little_evidence_stays_a_candidate_and_says_how_much_more() -> None:
    one = compare([1.0], [0.0, 0.0])
    assert not one.passed and one.needed == 1 and "1 more that followed it" in one.detail
    few = compare([1.0, 1.0, 0.0], [1.0, 0.0, 0.0])
    assert not few.passed and few.needed > 0 and "noise band" in few.detail
    # more evidence at the same rates shrinks the noise band and the need
    more = compare([1.0, 1.0, 0.0] * 4, [1.0, 0.0, 0.0] * 4)
    assert more.noise < few.noise and 0 < more.needed < few.needed
    enough = compare([1.0, 1.0, 0.0] * 12, [1.0, 0.0, 0.0] * 12)
    assert enough.passed


def test_no_effect_never_passes_and_needs_no_more_of_the_same() -> None:
    res = compare([1.0, 0.0] * 50, [1.0, 0.0] * 50)
    assert not res.passed and res.needed == 0 and "below ε" in res.detail
    worse = compare([0.0] * 10, [1.0] * 10)
    assert not worse.passed and worse.lift < 0


def test_partial_outcomes_count_by_score() -> None:
    lift_p, _ = lift_and_noise([0.5] * 10, [0.0] * 10)
    lift_s, _ = lift_and_noise([1.0] * 10, [0.0] * 10)
    assert 0 < lift_p < lift_s


def test_cross_fitting_never_validates_an_effect_on_its_own_half() -> None:
    # The whole effect sits in fold 0; fold 1 has no one who did not follow the lesson.
    f0, f1 = ids_in_fold(0, 6), ids_in_fold(1, 6, "x")
    lopsided = [Outcome(i, 1.0, True) for i in f0[:3]] + [Outcome(i, 0.0, False) for i in f0[3:]]
    lopsided += [Outcome(i, 1.0, True) for i in f1]
    kept = held_out(lopsided)
    assert {o.id for o in kept} == set(f1)  # fold 0 selected the rule, fold 1 is held out
    res = offline_gate(lopsided)
    assert not res.passed and "did not" in res.detail
    # The same effect replicated in both halves is tested on all of it.
    both = [Outcome(i, 1.0, True) for i in f0[:3] + f1[:3]]
    both += [Outcome(i, 0.0, False) for i in f0[3:] + f1[3:]]
    assert len(held_out(both)) == 12 and offline_gate(both).passed


def test_an_effect_in_neither_half_says_it_does_not_replicate() -> None:
    f0, f1 = ids_in_fold(0, 2), ids_in_fold(1, 2, "y")
    outs = [Outcome(f0[0], 1.0, True), Outcome(f0[1], 1.0, True), Outcome(f1[0], 0.0, False)]
    outs.append(Outcome(f1[1], 0.0, False))
    res = offline_gate(outs)
    assert not res.passed and "replicate" in res.detail and res.needed >= 2


def test_folds_are_deterministic_and_balanced() -> None:
    assert fold_of("abc") == fold_of("abc")
    share = sum(fold_of(f"id{i}") for i in range(2000)) / 2000
    assert 0.45 < share < 0.55


def solver(needs: str, base: float, boosted: float, seed: int = 7) -> object:
    """A WARM/COLD solver: succeeds more often when the context holds ``needs``."""
    rng = random.Random(seed)

    def probe(context: str, trial: int) -> float:
        p = boosted if needs in context else base
        return 1.0 if rng.random() < p else 0.0

    return probe


def test_live_gate_measures_lift_with_the_same_rule() -> None:
    block = "<mimir-memory>… run `alembic upgrade head` first …</mimir-memory>"
    helps = live_gate(solver("alembic upgrade head", 0.2, 0.9), block, trials=30)  # type: ignore[arg-type]
    assert helps.passed and helps.n_with == helps.n_without == 30
    useless = live_gate(solver("something else", 0.5, 0.9), block, trials=30)  # type: ignore[arg-type]
    assert not useless.passed
    harmful = live_gate(solver("alembic", 0.8, 0.3), block, trials=30)  # type: ignore[arg-type]
    assert not harmful.passed and harmful.lift < 0
    with pytest.raises(InvalidInputError, match="trials"):
        live_gate(solver("x", 0.1, 0.2), block, trials=1)  # type: ignore[arg-type]


def test_breaker_trips_only_when_the_lesson_credibly_hurts() -> None:
    trip, res = breaker([0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0])
    assert trip and res.lift + res.noise < 0 and "with the lesson" in res.detail
    assert not breaker([0.0], [1.0, 1.0, 1.0])[0]  # one bad outcome is not evidence
    assert not breaker([1.0, 0.0, 1.0], [1.0, 0.0, 1.0, 0.0])[0]
    assert not breaker([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])[0]


def _tries(action: str, successes: int, n: int, prefix: str) -> list[tuple[str, str, float]]:
    """(id, action, score) of ``n`` tries of ``action``, half in each fold, successes first."""
    ids = [i for pair in zip(ids_in_fold(0, n), ids_in_fold(1, n), strict=True) for i in pair]
    return [(f"{prefix}{i}", action, 1.0 if k < successes else 0.0) for k, i in enumerate(ids[:n])]


def test_avoid_is_judged_against_the_alternatives_action_by_action() -> None:
    # The agent exploits the one action that always works (20 tries); the two others it tried
    # always failed. The avoided action failed 4 of 5: worse than the pooled alternatives (mostly
    # the best action), but not credibly worse than the average alternative action.
    alternatives = _tries("best", 20, 20, "b") + _tries("c", 0, 4, "c") + _tries("d", 0, 4, "d")
    scores = [s for _i, _a, s in alternatives]
    groups = [a for _i, a, _s in alternatives]
    avoided = [1.0, 0.0, 0.0, 0.0, 0.0]
    assert compare(scores, avoided).passed
    balanced = compare(scores, avoided, followed_groups=groups)
    assert not balanced.passed and balanced.lift < compare(scores, avoided).lift
    assert balanced.needed > 0 and "noise band" in balanced.detail
    # The same through the cross-fitted gate: an avoid lesson's followers are the alternatives.
    outs = [Outcome(i, s, True, a) for i, a, s in alternatives]
    outs += [Outcome(i, s, False, "x") for i, _a, s in _tries("x", 1, 10, "x")]
    assert offline_gate(outs).passed
    assert not offline_gate(outs, balance="followed").passed
    # An action that always fails stays worse than the average alternative.
    trap = [o for o in outs if o.followed]
    trap += [Outcome(i, 0.0, False, "x") for i, _a, _s in _tries("x", 0, 6, "t")]
    assert offline_gate(trap, balance="followed").passed
    with pytest.raises(InvalidInputError, match="balance"):
        offline_gate(outs, balance="both")


def test_a_balanced_side_weighs_each_action_once() -> None:
    # Ten tries of one action and one try of another count as two actions, not eleven tries.
    lift, _ = lift_and_noise([1.0] * 10 + [0.0], [0.5] * 4, followed_groups=["a"] * 10 + ["b"])
    pooled, _ = lift_and_noise([1.0] * 10 + [0.0], [0.5] * 4)
    assert lift < pooled
    assert abs((lift + 0.5) - (10.5 / 11 + 0.5 / 2) / 2) < 1e-9


def test_two_failures_are_not_credibly_worse_than_alternatives_that_work_sixty_percent() -> None:
    # Two failures are Beta(0.5, 2.5): its 95% quantile is 0.57, where the normal approximation
    # says 0.47. An action that works 60% of the time fails twice running 16% of the time.
    alternatives = [1.0] * 36 + [0.0] * 24
    res = compare(alternatives, [0.0, 0.0])
    assert not res.passed, res.detail
    normal = res.lift - Z * math.sqrt(_side(alternatives, None)[1] + _side([0.0, 0.0], None)[1])
    assert normal >= EPSILON  # what the normal band would have admitted
    assert compare(alternatives, [0.0] * 5).passed  # five failures are


def test_large_groups_keep_the_normal_band() -> None:
    followed, other = [1.0] * 60 + [0.0] * 40, [1.0] * 40 + [0.0] * 60
    lift, noise = lift_and_noise(followed, other)
    v = _side(followed, None)[1] + _side(other, None)[1]
    assert lift == pytest.approx(0.2, abs=0.01)
    assert noise == pytest.approx(Z * math.sqrt(v), rel=0.03)
    _lift, above = lift_and_noise(followed, other, upper=True)
    assert above == pytest.approx(noise, rel=0.03)
