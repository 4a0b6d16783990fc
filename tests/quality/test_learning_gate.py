"""CI gates of the learning benchmark (issue 8): the quick configuration of ``bench.learning``.

Four seeds x 300 tasks in two processes, COLD and WARM side by side, real offline MiniLM
embedder, real LanceDB stores in temporary directories. See ``python -m bench.learning --quick``
for the same figures. Runs are deterministic (seeded RNGs, idempotency keys, times from the
task index), so each gate's comment gives the value it measured.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from bench.learning import QUICK, Config, run, table

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def figures() -> dict[str, Any]:
    # jobs > 1: each worker process loads the offline model by name (from the sandboxed home).
    res = run(dataclasses.replace(QUICK, embedder="fastembed"))
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
    # gate's cross-fitting folds (a hash of the ids) and everything downstream repeat exactly:
    # in one process with a shared model, or one process per seed, each loading its own.
    cfg = Config(
        (0, 1), 60, consolidate_every=20, window=20, embedder=fast_embedder, arms=QUICK.arms
    )
    first = run(cfg)
    second = run(dataclasses.replace(cfg, embedder="fastembed", jobs=2))
    assert first["figures"]["lessons"]["admitted"] >= 1  # the gate's folds were exercised
    assert second["config"]["jobs"] == 2
    second["config"]["jobs"] = 1
    assert _without_timings(first) == _without_timings(second)


def test_the_environment_is_learnable_and_cold_is_not_the_oracle(figures: dict[str, Any]) -> None:
    # Guards against a degenerate environment in which no arm could show a lift.
    oracle = figures["oracle_success"]["mean"]
    cold = figures["arms"]["cold"]["success"]["mean"]
    assert oracle - cold > 0.25, (oracle, cold)
    assert figures["lessons"]["admitted"] >= 5


def test_warm_beats_cold_beyond_the_noise_band(figures: dict[str, Any]) -> None:
    # Measured: WARM-COLD +0.193 (95% CI +0.166..+0.219 over 4 seeds, every seed positive).
    lift = figures["lift"]["cold"]
    assert lift["ci_low"] > 0, f"WARM-COLD lift {lift} is inside the noise band"


def test_warm_repeats_at_most_a_third_of_colds_mistakes(figures: dict[str, Any]) -> None:
    # Measured: 0.116 (WARM 0.041, COLD 0.353). WARM asks memory about each candidate command
    # (Mimir.attempts: its own attempts in this repo on related tasks) before exploring it.
    warm = figures["arms"]["warm"]["repeat_mistake_rate"]["mean"]
    cold = figures["arms"]["cold"]["repeat_mistake_rate"]["mean"]
    assert cold > 0.1
    assert warm <= cold / 3, f"repeat-mistake rate WARM {warm} vs COLD {cold}"


def test_recommend_is_never_overconfident(figures: dict[str, Any]) -> None:
    # The documented contract: confidence is a 10% lower bound, so it may undershoot what happens,
    # never overshoot it (the one-sided part of the calibration error), and observed success is
    # at least the stated bound in the vast majority of picks' bins (count-weighted).
    low = figures["lower_bound"]
    assert low["n"] >= 30
    assert low["overconfidence"] <= 0.05, low
    assert low["bin_coverage"] >= 0.9, low


def test_recommend_confidence_calibration_error(figures: dict[str, Any]) -> None:
    # ECE of the calibrated point estimate (Recommendation.expected_success) over every
    # recommendation (893), against what its action did (or would have done: common random
    # numbers). Measured: 0.028 (0.028 against the hidden rates; a perfect forecast scores 0.026
    # median on the same tasks); seeds 4-7 and 8-11, 0.017 and 0.030. Its prior (0.5, worth 4
    # observations) was chosen on seeds 4-11, never on these. Was 0.048 with the topic's base
    # rate as the prior (0.074 and 0.085 on the other seeds).
    cal = figures["calibration"]
    assert cal["ece"] <= 0.05, f"expected calibration error {cal['ece']} (bins {cal['bins']})"


def test_lesson_precision(figures: dict[str, Any]) -> None:
    # Measured: 0.931 (54 of 58 admitted lessons help in every repository they are served to;
    # 0.91 over 12 seeds). Up from 0.75 at 3 x 120 (about +-0.09 by chance with ~20 lessons) and
    # 0.80 at 300 tasks before a prefer lesson had to be tried in every repository its topic
    # came up in before being served globally (lessons/mine.py, GLOBAL_TRIES).
    les = figures["lessons"]
    wrong = [le for le in les["list"] if not le["helps"]]
    assert les["precision"] >= 0.9, f"precision {les['precision']}; not helping: {wrong}"
