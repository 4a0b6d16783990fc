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
    # Measured: WARM-COLD +0.108 (95% CI +0.054..+0.163 over 3 seeds, every seed positive).
    lift = figures["lift"]["cold"]
    assert lift["ci_low"] > 0, f"WARM-COLD lift {lift} is inside the noise band"


def test_warm_repeats_at_most_a_third_of_colds_mistakes(figures: dict[str, Any]) -> None:
    # Measured: 0.20 (WARM 0.053, COLD 0.264). WARM asks memory about each candidate command
    # (Mimir.attempts: its own attempts in this repo on related tasks) before exploring it.
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
    reason="measured ECE 0.058 of recommend's expected_success over all 215 recommendations "
    "(each against what its action did on that task, followed or not; 0.064 against the hidden "
    "rates), down from 0.129. At this size the gate is below what the sample can resolve: a "
    "perfect forecast (each task's hidden rate) scores 0.051 median, 0.076 p90 on the same "
    "tasks (figures['calibration']['ece_floor'], resampled outcomes). The full run (1,608 "
    "recommendations, floor 0.02) measures 0.045. Seeds 3-5 x 120: 0.12 (0.107 against the "
    "rates): with <= 1 outcome in the project behind 85% of the recommendations, high estimates "
    "overshoot (drift halfway, fixes that work in one repo only)",
)
def test_recommend_confidence_calibration_error(figures: dict[str, Any]) -> None:
    # ECE of the calibrated point estimate (Recommendation.expected_success) over every
    # recommendation, against what its action did (or would have done: common random numbers).
    cal = figures["calibration"]
    assert cal["ece"] <= 0.05, f"expected calibration error {cal['ece']} (bins {cal['bins']})"


@pytest.mark.xfail(
    strict=True,
    reason="measured precision 0.75 (15 of 20 admitted lessons help in every repo they are "
    "served to; was 0.73). Now in: avoid lessons gated against the average alternative action "
    "(not the agent's favourite), and a lesson is global only when no repo contradicts it, "
    "else scoped to the repos that earn it. The misses are prefer lessons on two lucky "
    "successes (2/2 for a 0.3 action) and a global fix never tried in the repo where it fails; "
    "requiring 3 successes reached 0.83 but put WARM-COLD inside the noise band. With ~20 "
    "lessons per run precision moves about +-0.09 by chance alone",
)
def test_lesson_precision(figures: dict[str, Any]) -> None:
    les = figures["lessons"]
    wrong = [le for le in les["list"] if not le["helps"]]
    assert les["precision"] >= 0.9, f"precision {les['precision']}; not helping: {wrong}"
