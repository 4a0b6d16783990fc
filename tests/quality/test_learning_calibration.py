"""The learning benchmark's calibration measurement (``bench.learning``): ECE, and the floor a
perfect forecast would show on the same tasks, so a gate is never set below what a sample of that
size can resolve."""

from __future__ import annotations

import random

from bench.learning import _calibration, ece_floor


def _tasks(n: int, seed: int = 7) -> list[float]:
    rng = random.Random(seed)
    return [rng.choice((0.0, 0.3, 0.5, 0.8, 0.85)) for _ in range(n)]


def test_a_perfect_forecast_is_not_scored_zero_on_a_small_sample() -> None:
    rng = random.Random(1)
    rates = _tasks(215)
    perfect = [(r, rng.random() < r, r) for r in rates]
    cal = _calibration(perfect)
    assert cal["ece_vs_rate"] == 0.0  # against the hidden rates it is exact
    # Against outcomes, coin flips alone put it near the floor, which the figures report.
    assert 0.02 < cal["ece_floor"] < cal["ece_floor_p90"] < 0.12
    assert cal["ece"] < cal["ece_floor_p90"] + 0.03


def test_the_floor_shrinks_with_the_sample_and_a_biased_forecast_clears_it() -> None:
    small = ece_floor([(r, False, r) for r in _tasks(200)])
    large = ece_floor([(r, False, r) for r in _tasks(3200)])
    assert large[0] < small[0] / 2  # ~1/sqrt(n)
    assert ece_floor([(r, True, r) for r in _tasks(200)]) == small  # outcomes are redrawn
    rng = random.Random(2)
    rates = _tasks(3200)
    biased = _calibration([(min(r + 0.1, 1.0), rng.random() < r, r) for r in rates])
    assert biased["ece"] > 3 * biased["ece_floor"]
