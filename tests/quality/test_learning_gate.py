"""CI gates of the learning benchmark (issue 8): the quick configuration of ``bench.learning``.

Three seeds x 120 tasks, COLD and WARM side by side, real offline MiniLM embedder, real LanceDB
stores in temporary directories. See ``python -m bench.learning --quick`` for the same figures.
Runs are deterministic (seeded RNGs, idempotency keys, times from the task index), so every
gate either holds or is a strict xfail whose reason gives the measured value.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from bench.learning import QUICK, Config, run, table

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def figures(fast_embedder: object) -> dict[str, Any]:
    res = run(dataclasses.replace(QUICK, embedder=fast_embedder))
    print(table(res))
    figures: dict[str, Any] = res["figures"]
    return figures


def _without_timings(res: dict[str, Any]) -> dict[str, Any]:
    """A run's results minus what depends on the clock or the machine (timings, date, load)."""
    out = {k: v for k, v in res.items() if k not in ("created", "machine", "seconds")}
    figures = dict(out["figures"])
    figures.pop("consolidate_seconds_per_run")
    figures["arms"] = {
        arm: {k: v for k, v in a.items() if k != "seconds_per_task"}
        for arm, a in figures["arms"].items()
    }
    out["figures"] = figures
    out["per_seed"] = [{k: v for k, v in r.items() if k != "seconds"} for r in out["per_seed"]]
    return out


def test_the_same_seeds_give_the_same_figures(fast_embedder: object) -> None:
    # Experience ids come from idempotency keys and times from the task index, so the lesson
    # gate's cross-fitting folds (a hash of the ids) and everything downstream repeat exactly.
    cfg = Config((0,), 60, consolidate_every=20, window=20, embedder=fast_embedder, arms=QUICK.arms)
    first, second = run(cfg), run(cfg)
    assert first["figures"]["lessons"]["admitted"] >= 1  # the gate's folds were exercised
    assert _without_timings(first) == _without_timings(second)


def test_the_environment_is_learnable_and_cold_is_not_the_oracle(figures: dict[str, Any]) -> None:
    # Guards against a degenerate environment in which no arm could show a lift.
    oracle = figures["oracle_success"]["mean"]
    cold = figures["arms"]["cold"]["success"]["mean"]
    assert oracle - cold > 0.25, (oracle, cold)
    assert figures["lessons"]["admitted"] >= 5


def test_warm_beats_cold_beyond_the_noise_band(figures: dict[str, Any]) -> None:
    # Measured: WARM-COLD +0.111 (95% CI +0.080..+0.143 over 3 seeds, every seed positive).
    lift = figures["lift"]["cold"]
    assert lift["ci_low"] > 0, f"WARM-COLD lift {lift} is inside the noise band"


@pytest.mark.xfail(
    strict=True,
    reason="measured WARM/COLD repeat-mistake ratio 0.40 (WARM 0.106, COLD 0.264). recommend "
    "no longer re-recommends an action that only ever failed in this repo (paraphrases down to "
    "task cosine 0.30 included): 7 of 38 WARM repeats come from recommend, 30 from exploring "
    "an action whose earlier failure was on a paraphrase below cosine 0.30, which similarity "
    "cannot tell apart (MiniLM: a quarter of same-family task pairs are below 0.31, 5% of "
    "different-family pairs above 0.30)",
)
def test_warm_repeats_at_most_a_third_of_colds_mistakes(figures: dict[str, Any]) -> None:
    warm = figures["arms"]["warm"]["repeat_mistake_rate"]["mean"]
    cold = figures["arms"]["cold"]["repeat_mistake_rate"]["mean"]
    assert cold > 0.1
    assert warm <= cold / 3, f"repeat-mistake rate WARM {warm} vs COLD {cold}"


def test_recommend_is_never_overconfident(figures: dict[str, Any]) -> None:
    # The documented contract: confidence is a 5% lower bound, so it may undershoot what happens,
    # never overshoot it (the one-sided part of the calibration error), and observed success is
    # at least the stated bound in the vast majority of picks' bins (count-weighted).
    low = figures["lower_bound"]
    assert low["n"] >= 30
    assert low["overconfidence"] <= 0.05, low
    assert low["bin_coverage"] >= 0.9, low


@pytest.mark.xfail(
    strict=True,
    reason="measured ECE 0.109 of recommend's expected_success (n=96 picks), and the gate is "
    "below this configuration's noise floor: a perfectly calibrated estimate has a mean ECE of "
    "0.077 on ~100-140 Bernoulli outcomes (ECE <= 0.05 in 11% of simulated runs; 0.029 at "
    "1,000). A real residual remains: after drift the top bins predict 0.83 where the hidden "
    "rate is 0.65",
)
def test_recommend_confidence_calibration_error(figures: dict[str, Any]) -> None:
    # ECE of the calibrated point estimate (Recommendation.expected_success), bins by count.
    cal = figures["calibration"]
    assert cal["ece"] <= 0.05, f"expected calibration error {cal['ece']} (bins {cal['bins']})"


@pytest.mark.xfail(
    strict=True,
    reason="measured precision 0.73 (16 of 22 admitted lessons help in every repo they are "
    "served to): 3 misses are avoid lessons for an above-average action (the gate compares "
    "with what the agent did instead, mostly the best action), 2 are global prefer lessons for "
    "a fix that fails in one of the three repos, 1 a lucky scoped prefer. Per-project mining "
    "and an action-balanced gate were tried (gated per scope, sign vetoes, leave-one-scope-"
    "out): precision 0.68-0.77 at this size, and WARM-COLD fell inside the noise band "
    "(fewer, later lessons), so they are not in",
)
def test_lesson_precision(figures: dict[str, Any]) -> None:
    les = figures["lessons"]
    wrong = [le for le in les["list"] if not le["helps"]]
    assert les["precision"] >= 0.9, f"precision {les['precision']}; not helping: {wrong}"
