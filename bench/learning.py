"""The learning benchmark: does Mimir make an agent better? WARM vs NAIVE vs COLD.

    python -m bench.learning                      # 5 seeds x 400 tasks (real offline MiniLM)
    python -m bench.learning --quick              # the CI gate's configuration
    python -m bench.learning --seeds 3 --tasks 200 --json out.json
    python -m bench.learning --generic-quick      # generic arms + ceiling, both streams (smoke)
    python -m bench.learning --stream dev,ops --arms cold,generic,generic_learn,ceiling

A seeded, offline stream of tasks from recurring families (:mod:`bench.learning_env`: paraphrased
tasks, context-dependent hidden rates, traps, drift) is solved side by side by three simulated
agents (:mod:`bench.learning_agents`), each with its own fresh store. Reported per arm, over seeds,
with a noise band (min/max and a 95% t-interval): success rate, learning curve per window,
cumulative regret against an oracle that knows the hidden rates, repeat-mistake rate; for WARM:
calibration of recommend's confidence, lesson precision, and after how many tasks WARM beats COLD
beyond noise (a lift inside the band is reported as noise, not a result). Saves JSON with the
seeds, versions and machine under ``bench/results/`` and prints a compact table.

Two streams (``--stream``): ``dev`` (:mod:`bench.learning_env`, the default, the one Mimir's
knobs were tuned on) and ``ops`` (:mod:`bench.learning_env_ops`, structurally different and
held out: never used for tuning). Beyond WARM, NAIVE, COLD and MIMIR_LEARN, ``--arms`` takes the
arms that say what users get (:mod:`bench.learning_agents`): ``generic`` (the policy most users
write, on Mimir's ``recommend``), ``generic_learn`` (the same policy on mimir-learn 0.1.5's) and
``ceiling`` (per-family Thompson sampling, told the family). Reported for them: second-half
success against the ceiling, ``generic - generic_learn`` paired by seed, and why ``generic``
follows memory or not (``recommend_diagnostics``: recommend returned nothing, a low confidence,
or an action of another family, by the stream's hidden family labels).

A run depends on its seeds only: every random choice comes from a seeded RNG, and every record
carries an idempotency key and a time derived from its task index (so experience ids, and the
lesson gate's cross-fitting folds that hash them, repeat exactly). The same seeds give the same
figures; only timings and the machine fields differ between runs. (mimir-learn's ``record``
takes neither a key nor a time; its figures depend on neither.)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

from . import learning_env, learning_env_ops
from .learning_agents import GENERIC_THRESHOLD, Ceiling, Choice, Cold, Generic, Naive, Warm
from .learning_env import Family, Task, rate
from .learning_mimir_learn import ARM as MIMIR_LEARN
from .learning_mimir_learn import GENERIC_ARM as GENERIC_LEARN
from .learning_mimir_learn import GenericLearnAgent, MimirLearnAgent, learn_python
from .learning_mimir_learn import calibration as learn_calibration
from .versions import versions

ARMS = ("cold", "naive", "warm")
"""The default arms; ``mimir_learn`` (mimir-learn 0.1.5 in its side venv) is added on request."""
GENERIC = "generic"
CEILING = "ceiling"
ALL_ARMS = ("cold", "naive", "warm", MIMIR_LEARN, GENERIC, GENERIC_LEARN, CEILING)
"""Every arm ``--arms`` takes (COLD always runs: the oracle's figure comes from its log)."""
LEARN_ARMS = (MIMIR_LEARN, GENERIC_LEARN)
"""The arms that need mimir-learn's side venv."""
STREAMS: dict[str, ModuleType] = {"dev": learning_env, "ops": learning_env_ops}
"""``dev``: the tuning stream (default). ``ops``: held out, never used to tune Mimir's knobs."""
RESULTS = Path(__file__).parent / "results"


@dataclass(frozen=True)
class Config:
    seeds: tuple[int, ...]
    tasks: int
    consolidate_every: int
    window: int
    embedder: Any = "fastembed"
    """``fastembed`` (the real offline model), ``hash``, or an embedder object."""
    arms: tuple[str, ...] = ARMS
    learn_python: Path | None = None
    """The side venv's interpreter, for the ``mimir_learn`` arm."""
    jobs: int = 1
    """Seeds run at once, each in its own process (its own model and stores). A run's figures
    depend on its seeds only, so any number of jobs gives the same figures."""
    stream: str = "dev"
    """Which task stream (:data:`STREAMS`): ``dev`` (tuned on) or ``ops`` (held out)."""


FULL = Config(seeds=(0, 1, 2, 3, 4), tasks=400, consolidate_every=25, window=40)
# The CI gate's configuration: the gates compare WARM with COLD only, so NAIVE is left out.
# Four seeds in two processes (two per core on a 2-core runner). 300 tasks: at 120, ~20 lessons
# per run move precision by about +-0.09 by chance, and a perfect forecast's ECE is 0.051 (the
# 0.05 gate sat below what the sample can resolve); at 300, ~50-60 lessons and a floor of 0.026.
QUICK = Config(
    seeds=(0, 1, 2, 3),
    tasks=300,
    consolidate_every=25,
    window=30,
    arms=("cold", "warm"),
    jobs=2,
)
# The generic arms' smoke configuration (CI: tests/quality/test_learning_generic.py), run on
# both streams: COLD (the floor), GENERIC, GENERIC_LEARN (when its venv exists) and CEILING.
# Real offline MiniLM: ~15 s a stream on an idle 2-core machine (generic_learn ~0.01 s a task).
GENERIC_QUICK = Config(
    seeds=(0, 1),
    tasks=160,
    consolidate_every=25,
    window=20,
    arms=("cold", GENERIC, GENERIC_LEARN, CEILING),
    jobs=2,
)

# Two-sided 95% Student t quantiles by degrees of freedom (the noise band over seeds).
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306}


def band(values: list[float]) -> dict[str, float]:
    """Mean, min, max and the 95% t-interval of per-seed values."""
    mean = statistics.fmean(values)
    half = 0.0
    if len(values) > 1:
        t = _T975.get(len(values) - 1, 1.96 if len(values) > 30 else 2.262)
        half = t * statistics.stdev(values) / math.sqrt(len(values))
    return {
        "mean": round(mean, 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
        "ci_low": round(mean - half, 4),
        "ci_high": round(mean + half, 4),
        "half_width": round(half, 4),
    }


# -- one seed --------------------------------------------------------------------------------


def env_of(cfg: Config) -> ModuleType:
    """The stream module of ``cfg`` (its families, context tags, ``stream``, ``rate``)."""
    if cfg.stream not in STREAMS:
        raise ValueError(f"unknown stream {cfg.stream!r}; known: {', '.join(STREAMS)}")
    return STREAMS[cfg.stream]


def _agents(seed: int, cfg: Config, workdir: Path, env: ModuleType) -> dict[str, Any]:
    """The arms of ``cfg``, each with its own seeded RNG and its own fresh store (COLD always:
    the oracle's figure comes from its log)."""
    ctx = env.REPOS
    agents: dict[str, Any] = {"cold": Cold(seed + 1000)}
    if "naive" in cfg.arms:
        agents["naive"] = Naive(seed + 3000, workdir / "naive", cfg.embedder, ctx)
    if "warm" in cfg.arms:
        agents["warm"] = Warm(
            seed + 2000, workdir / "warm", cfg.embedder, cfg.consolidate_every, ctx
        )
    for arm in LEARN_ARMS:
        if arm in cfg.arms and cfg.learn_python is None:
            raise ValueError(f"the {arm} arm needs Config.learn_python (the side venv)")
    if MIMIR_LEARN in cfg.arms:
        assert cfg.learn_python is not None
        agents[MIMIR_LEARN] = MimirLearnAgent(seed + 4000, workdir / MIMIR_LEARN, cfg.learn_python)
    if GENERIC in cfg.arms:
        agents[GENERIC] = Generic(seed + 5000, workdir / GENERIC, cfg.embedder, ctx)
    if GENERIC_LEARN in cfg.arms:
        assert cfg.learn_python is not None
        agents[GENERIC_LEARN] = GenericLearnAgent(
            seed + 6000, workdir / GENERIC_LEARN, cfg.learn_python
        )
    if CEILING in cfg.arms:
        agents[CEILING] = Ceiling(seed + 7000)
    return agents


def _diag(choice: Choice, task: Task) -> str | None:
    """Why a generic arm followed memory or not: recommend returned ``none``, an action of
    another family (``wrong_family``, by the stream's hidden labels: not plausible here), a
    plausible one below the threshold (``low_conf``), or one it ran (``followed``)."""
    if not choice.asked:
        return None
    if choice.rec is None:
        return "none"
    if choice.rec[0] not in task.family.commands:
        return "wrong_family"
    return "low_conf" if choice.rec[1] < GENERIC_THRESHOLD else "followed"


def run_seed(seed: int, cfg: Config, workdir: Path, progress: bool) -> dict[str, Any]:
    """Every arm of ``cfg`` side by side on one seed's stream (the same tasks, the same luck)."""
    env = env_of(cfg)
    tasks = env.stream(seed, cfg.tasks)
    agents = _agents(seed, cfg, workdir, env)
    warm = agents.get("warm")
    log: dict[str, list[dict[str, Any]]] = {a: [] for a in agents}
    history: dict[str, dict[tuple[str, str, str], list[bool]]] = {a: {} for a in agents}
    seconds = dict.fromkeys(agents, 0.0)
    seen: Counter[str] = Counter()  # tasks of each family met before this one
    # (arm, family, context) where the arm already succeeded once: memory had a success to show
    won: set[tuple[str, str, str]] = set()
    for task in tasks:
        best = env.best_rate(task.family, task.repo, task.drifted)
        for arm, agent in agents.items():
            started = time.perf_counter()
            choice: Choice = agent.choose(task)
            p = env.rate(task.family, choice.action, task.repo, task.drifted)
            success = task.luck < p
            agent.learn(task, choice, success)
            seconds[arm] += time.perf_counter() - started
            key = (task.family.name, task.repo, choice.action)
            past = history[arm].setdefault(key, [])
            entry = {
                "success": success,
                "regret": best - p,
                "repeat": bool(past) and not any(past),
                "source": choice.source,
                "confidence": choice.confidence,
                "posterior_mean": choice.posterior_mean,
                "rate": p,
                "said": _said(choice, task),
            }
            diag = _diag(choice, task)
            if diag is not None:
                entry["diag"] = diag
                entry["seen"] = seen[task.family.name]
                entry["best"] = p >= best
                entry["rec_confidence"] = None if choice.rec is None else choice.rec[1]
                entry["won_here"] = (arm, task.family.name, task.repo) in won
            log[arm].append(entry)
            past.append(success)
            if success:
                won.add((arm, task.family.name, task.repo))
        seen[task.family.name] += 1
        if progress and (task.index + 1) % cfg.window == 0:
            done = task.index + 1
            rates = " ".join(f"{a}={sum(r['success'] for r in log[a]) / done:.2f}" for a in agents)
            print(f"  {cfg.stream} seed {seed}: {done}/{cfg.tasks} tasks  {rates}", file=sys.stderr)
    for agent in agents.values():
        if isinstance(agent, (MimirLearnAgent, GenericLearnAgent)):
            agent.close()
    return {
        "seed": seed,
        "log": log,
        "seconds": {a: round(s, 2) for a, s in seconds.items()},
        "consolidations": warm.consolidations if warm else 0,
        "consolidate_seconds": round(warm.consolidate_seconds, 2) if warm else 0.0,
        "lessons": lesson_verdicts(warm, cfg.tasks, env) if warm else [],
        "embedder": warm.m.embedder.name if warm else getattr(cfg.embedder, "name", cfg.embedder),
    }


def _said(choice: Choice, task: Task) -> dict[str, Any] | None:
    """What recommend said on this task, and what its action would have done here (common
    random numbers: the same luck decides every action), whether the agent followed it or not."""
    if choice.recommended is None:
        return None
    action, expected, confidence = choice.recommended
    r = rate(task.family, action, task.repo, task.drifted)
    return {
        "action": action,
        "expected": expected,
        "confidence": confidence,
        "success": task.luck < r,
        "rate": r,
        "followed": choice.action == action,
    }


def _helps(family: Family, kind: str, action: str, repos: list[str], drifted: bool) -> bool:
    """Whether following a lesson beats not having it, in every repo it is served to: an
    ``avoid`` lesson helps when its action is worse than the family's average plausible action
    (the prior it removes it from), a ``prefer`` one when its action is better."""
    if action not in family.commands:
        return False
    for repo in repos:
        mean = statistics.fmean(rate(family, c, repo, drifted) for c in family.commands)
        r = rate(family, action, repo, drifted)
        if (kind == "avoid" and r >= mean) or (kind != "avoid" and r <= mean):
            return False
    return True


def lesson_verdicts(warm: Warm, n: int, env: ModuleType = learning_env) -> list[dict[str, Any]]:
    """Every lesson admitted during the run, judged against the hidden rates when admitted."""
    out = []
    for adm in warm.admitted:
        detail = warm.m.lesson_detail(adm.lesson_id)
        lesson = detail.lesson
        fams: dict[str, int] = {}
        for e in detail.supporting:
            t = warm.exp_ids.get(e.id)
            if t is not None:
                fams[t.family.name] = fams.get(t.family.name, 0) + 1
        fam_name = max(fams.items(), key=lambda kv: kv[1])[0] if fams else ""
        family = next((f for f in env.FAMILIES if f.name == fam_name), None)
        repos = [lesson.scope] if lesson.scope in env.REPOS else list(env.REPOS)
        drifted = adm.at >= n // 2
        helps = family is not None and _helps(family, lesson.kind, lesson.action, repos, drifted)
        now_helps = family is not None and _helps(family, lesson.kind, lesson.action, repos, True)
        out.append(
            {
                "id": lesson.id,
                "kind": lesson.kind,
                "action": lesson.action,
                "scope": lesson.scope,
                "family": fam_name,
                "admitted_at": adm.at,
                "helps": helps,
                "status_at_end": lesson.status,
                "helps_at_end": now_helps,
            }
        )
    return out


# -- figures ---------------------------------------------------------------------------------


Triple = tuple[float, bool, float]
"""(stated probability, succeeded, hidden rate) of one recommendation."""


def _bins(pairs: list[Triple], bins: int = 10) -> Iterator[tuple[float, float, list[Triple]]]:
    """(lo, hi, members) of each non-empty bin of stated probability (the last one closed)."""
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        sel = [p for p in pairs if lo <= p[0] < hi or (b == bins - 1 and p[0] >= hi)]
        if sel:
            yield lo, hi, sel


def _ece(pairs: list[Triple], against: int = 1) -> float:
    """Expected calibration error (bins weighted by their count) against what happened
    (``against=1``) or against the hidden rates (``against=2``)."""
    return sum(
        len(sel)
        / len(pairs)
        * abs(
            statistics.fmean(float(p[against]) for p in sel) - statistics.fmean(p[0] for p in sel)
        )
        for _lo, _hi, sel in _bins(pairs)
    )


def ece_floor(pairs: list[Triple], draws: int = 200) -> tuple[float, float]:
    """(median, 90th percentile) ECE of a *perfect* forecaster on the same tasks: one that states
    each task's hidden rate, scored against outcomes drawn from those rates (seeded, ``draws``
    times). A sample this size cannot show a smaller ECE than this, however good the forecast:
    the coin-flip noise of the outcomes alone puts it there."""
    import random

    rng = random.Random(20261130)
    vals = sorted(_ece([(p[2], rng.random() < p[2], p[2]) for p in pairs]) for _ in range(draws))
    return vals[len(vals) // 2], vals[(9 * len(vals)) // 10]


def _calibration(pairs: list[Triple]) -> dict[str, Any]:
    """A stated probability (``pairs``: stated, succeeded, hidden rate) against what happened:
    ECE (two-sided, against observed success, bins weighted by their count: the standard
    definition), ``ece_vs_rate`` (the same against the hidden rate, free of the coin-flip noise
    of observed outcomes), overconfidence (the one-sided part: a lower bound may undershoot,
    never overshoot), coverage (share of picks whose hidden rate is at least the stated value;
    a 10% lower bound promises >= 0.90) and ``bin_coverage`` (share of picks in bins whose
    observed success is at least the stated value)."""
    if not pairs:
        return {
            "n": 0,
            "ece": None,
            "ece_vs_rate": None,
            "overconfidence": None,
            "coverage": None,
            "bin_coverage": None,
            "bins": [],
        }
    table = []
    over = covered = 0.0
    for lo, hi, sel in _bins(pairs):
        pred = statistics.fmean(p[0] for p in sel)
        obs = statistics.fmean(float(p[1]) for p in sel)
        hidden = statistics.fmean(p[2] for p in sel)
        w = len(sel) / len(pairs)
        over += w * max(0.0, pred - obs)
        covered += w * (obs >= pred)
        table.append(
            {"lo": lo, "hi": hi, "n": len(sel), "predicted": pred, "observed": obs, "rate": hidden}
        )
    coverage = sum(p[2] >= p[0] for p in pairs) / len(pairs)
    floor, floor_p90 = ece_floor(pairs)
    return {
        "n": len(pairs),
        "ece": round(_ece(pairs), 4),
        "ece_vs_rate": round(_ece(pairs, against=2), 4),
        "ece_floor": round(floor, 4),
        "ece_floor_p90": round(floor_p90, 4),
        "overconfidence": round(over, 4),
        "coverage": round(coverage, 4),
        "bin_coverage": round(covered, 4),
        "bins": [
            {k: round(v, 4) if isinstance(v, float) else v for k, v in b.items()} for b in table
        ],
    }


def summarise(runs: list[dict[str, Any]], cfg: Config) -> dict[str, Any]:
    n, w = cfg.tasks, cfg.window
    ends = list(range(w, n + 1, w))
    if not ends or ends[-1] != n:
        ends.append(n)
    arms: dict[str, Any] = {}
    for arm in cfg.arms:
        logs = [r["log"][arm] for r in runs]
        curve = []
        for i, end in enumerate(ends):
            start = ends[i - 1] if i else 0
            curve.append(
                band([statistics.fmean(x["success"] for x in lg[start:end]) for lg in logs])
            )
        arms[arm] = {
            "success": band([statistics.fmean(x["success"] for x in lg) for lg in logs]),
            "second_half_success": band(
                [statistics.fmean(x["success"] for x in lg[n // 2 :]) for lg in logs]
            ),
            "expected_success": band([statistics.fmean(x["rate"] for x in lg) for lg in logs]),
            "regret": band([sum(x["regret"] for x in lg) for lg in logs]),
            "regret_curve": [
                round(statistics.fmean(sum(x["regret"] for x in lg[:end]) for lg in logs), 2)
                for end in ends
            ],
            "repeat_mistake_rate": band([statistics.fmean(x["repeat"] for x in lg) for lg in logs]),
            "curve": curve,
            "seconds_per_task": round(statistics.fmean(r["seconds"][arm] for r in runs) / n, 4),
        }
    oracle = band(
        [statistics.fmean(x["rate"] + x["regret"] for x in r["log"]["cold"]) for r in runs]
    )
    return {
        "window_ends": ends,
        "arms": arms,
        "oracle_success": oracle,
        **(_warm_figures(runs, cfg, arms, ends) if "warm" in cfg.arms else {}),
        **_generic_figures(runs, cfg),
    }


def _warm_figures(
    runs: list[dict[str, Any]], cfg: Config, arms: dict[str, Any], ends: list[int]
) -> dict[str, Any]:
    """WARM's figures: its lift over the other arms (and after how many tasks it beats COLD
    beyond noise), recommend's calibration, lessons."""
    lift = {
        other: band(
            [
                statistics.fmean(x["success"] for x in r["log"]["warm"])
                - statistics.fmean(x["success"] for x in r["log"][other])
                for r in runs
            ]
        )
        for other in ("cold", "naive", MIMIR_LEARN)
        if other in cfg.arms
    }
    for v in lift.values():
        v["beyond_noise"] = len(runs) > 1 and v["ci_low"] > 0
    until = None
    for end in (
        ends if len(runs) > 1 else []
    ):  # the first point after which the cumulative lift stays beyond noise
        ok = all(
            band(
                [
                    statistics.fmean(x["success"] for x in r["log"]["warm"][:e])
                    - statistics.fmean(x["success"] for x in r["log"]["cold"][:e])
                    for r in runs
                ]
            )["ci_low"]
            > 0
            for e in ends
            if e >= end
        )
        if ok:
            until = end
            break
    # Every recommendation, followed or not, against what its action did (or would have done)
    # on that task: ~3x the followed picks alone, so the ECE is not lost in coin-flip noise.
    said = [x["said"] for r in runs for x in r["log"]["warm"] if x.get("said")]
    means = [(s["expected"], s["success"], s["rate"]) for s in said]
    pairs = [(s["confidence"], s["success"], s["rate"]) for s in said]
    picks = [
        (x["posterior_mean"], x["success"], x["rate"])
        for r in runs
        for x in r["log"]["warm"]
        if x["source"] == "recommend" and x["posterior_mean"] is not None
    ]
    lessons = [le for r in runs for le in r["lessons"]]
    active_end = [le for le in lessons if le["status_at_end"] == "active"]
    sources: dict[str, int] = {}
    repeat_sources: dict[str, int] = {}
    for r in runs:
        for x in r["log"]["warm"]:
            sources[x["source"]] = sources.get(x["source"], 0) + 1
            if x["repeat"]:
                repeat_sources[x["source"]] = repeat_sources.get(x["source"], 0) + 1
    repeat_cold = arms["cold"]["repeat_mistake_rate"]["mean"]
    return {
        "lift": lift,
        "tasks_until_warm_beats_cold": until,
        "repeat_mistake_ratio_warm_cold": round(
            arms["warm"]["repeat_mistake_rate"]["mean"] / repeat_cold, 4
        )
        if repeat_cold
        else None,
        # recommend's calibrated point estimate (expected_success) and, separately, its honest
        # 10% lower bound (confidence): coverage and overconfidence
        "calibration": _calibration(means),
        "lower_bound": _calibration(pairs),
        "calibration_followed": _calibration(picks),
        **({"calibration_mimir_learn": learn_calibration(runs)} if MIMIR_LEARN in cfg.arms else {}),
        "lessons": {
            "admitted": len(lessons),
            "helpful": sum(le["helps"] for le in lessons),
            "precision": round(sum(le["helps"] for le in lessons) / len(lessons), 4)
            if lessons
            else None,
            "by_kind": {
                k: sum(le["kind"] == k for le in lessons) for k in ("avoid", "prefer", "procedure")
            },
            "active_at_end": len(active_end),
            "active_at_end_stale": sum(not le["helps_at_end"] for le in active_end),
            "list": lessons,
        },
        "warm_choice_sources": sources,
        "warm_repeat_sources": repeat_sources,
        "consolidate_seconds_per_run": round(
            statistics.fmean(r["consolidate_seconds"] / max(1, r["consolidations"]) for r in runs),
            3,
        ),
    }


DIAGS = ("none", "wrong_family", "low_conf", "followed")
SEEN_OFTEN = 10
"""A family counts as "seen many times" by a task once this many of its tasks came before."""


def _second_half(runs: list[dict[str, Any]], arm: str, n: int) -> list[float]:
    return [statistics.fmean(x["success"] for x in r["log"][arm][n // 2 :]) for r in runs]


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _diag_shares(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What recommend returned on ``rows`` (one per task), as shares that sum to 1: nothing
    (``recommend_none_share``), an action of another family (``wrong_family_share``; of those,
    ``wrong_family_confident_share`` at or above the threshold: run but for the plausibility
    check), a plausible action below the threshold (``low_conf_share``) or one the agent ran
    (``followed_share``; ``followed_best_share``: of those, the context's best action). Success
    when it followed and when it explored; mean stated confidence of plausible
    recommendations; ``none_after_success_here_share``: nothing recommended although the agent
    had already succeeded on this family in this context (memory held a success, recommend did
    not surface it)."""
    n = len(rows)
    by = Counter(x["diag"] for x in rows)
    followed = [x for x in rows if x["diag"] == "followed"]
    explored = [x for x in rows if x["diag"] != "followed"]
    plausible = [x["rec_confidence"] for x in rows if x["diag"] in ("low_conf", "followed")]
    return {
        "n": n,
        "recommend_none_share": _share(by["none"], n),
        "wrong_family_share": _share(by["wrong_family"], n),
        "wrong_family_confident_share": _share(
            sum(
                x["diag"] == "wrong_family" and x["rec_confidence"] >= GENERIC_THRESHOLD
                for x in rows
            ),
            n,
        ),
        "none_after_success_here_share": _share(
            sum(x["diag"] == "none" and x["won_here"] for x in rows), n
        ),
        "low_conf_share": _share(by["low_conf"], n),
        "followed_share": _share(by["followed"], n),
        "followed_best_share": _share(sum(x["best"] for x in followed), len(followed)),
        "followed_success": _share(sum(x["success"] for x in followed), len(followed)),
        "explored_success": _share(sum(x["success"] for x in explored), len(explored)),
        "plausible_mean_confidence": round(statistics.fmean(plausible), 4) if plausible else None,
    }


def recommend_diagnostics(runs: list[dict[str, Any]], arm: str, n: int) -> dict[str, Any]:
    """Why a generic arm follows memory or not, pooled over seeds: the shares of
    :func:`_diag_shares` over every task (at the top, and under ``all``), over the second half,
    and over tasks of a family already met :data:`SEEN_OFTEN` times or more
    (``family_seen_often``: there memory has had its chance)."""
    rows = [dict(x, index=i) for r in runs for i, x in enumerate(r["log"][arm]) if "diag" in x]
    every = _diag_shares(rows)
    return {
        **{k: every[k] for k in ("recommend_none_share", "low_conf_share", "wrong_family_share")},
        "threshold": GENERIC_THRESHOLD,
        "all": every,
        "second_half": _diag_shares([x for x in rows if x["index"] >= n // 2]),
        "family_seen_often": _diag_shares([x for x in rows if x["seen"] >= SEEN_OFTEN]),
        "seen_often_at_least": SEEN_OFTEN,
    }


def _generic_figures(runs: list[dict[str, Any]], cfg: Config) -> dict[str, Any]:
    """The generic arms' figures: ``generic - generic_learn`` in second-half success (paired by
    seed: the same tasks and luck), every arm's second-half success over the ceiling's (the
    issue's gate: Mimir >= 0.9 x the ceiling), and :func:`recommend_diagnostics`."""
    n = cfg.tasks
    out: dict[str, Any] = {}
    if GENERIC in cfg.arms and GENERIC_LEARN in cfg.arms:
        pairs = zip(
            _second_half(runs, GENERIC, n), _second_half(runs, GENERIC_LEARN, n), strict=True
        )
        diff = band([g - le for g, le in pairs])
        overall = band(
            [
                statistics.fmean(x["success"] for x in r["log"][GENERIC])
                - statistics.fmean(x["success"] for x in r["log"][GENERIC_LEARN])
                for r in runs
            ]
        )
        out["generic_minus_generic_learn"] = {
            "second_half": diff,
            "overall": overall,
            "verdict": "generic ahead beyond noise"
            if len(runs) > 1 and diff["ci_low"] > 0
            else "generic_learn ahead beyond noise"
            if len(runs) > 1 and diff["ci_high"] < 0
            else "noise",
        }
    if CEILING in cfg.arms:
        ceiling = _second_half(runs, CEILING, n)
        top = statistics.fmean(ceiling)
        out["over_ceiling"] = {}
        for arm in cfg.arms:
            if arm == CEILING:
                continue
            mine = _second_half(runs, arm, n)
            # A tiny run can leave the ceiling without one success: no ratio then, not a crash.
            ratio = statistics.fmean(mine) / top if top > 0 else None
            per_seed = [a / c for a, c in zip(mine, ceiling, strict=True) if c > 0]
            out["over_ceiling"][arm] = {
                "second_half_ratio": None if ratio is None else round(ratio, 4),
                "per_seed": band(per_seed) if per_seed else None,
                "meets_0_9": ratio is not None and ratio >= 0.9,
            }
    diags = {
        arm: recommend_diagnostics(runs, arm, n)
        for arm in (GENERIC, GENERIC_LEARN)
        if arm in cfg.arms
    }
    if diags:
        out["recommend_diagnostics"] = diags
    return out


def machine() -> dict[str, Any]:
    import mimir_core

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "mimir_core": mimir_core.__version__,
        **versions(("lancedb", "fastembed", "numpy")),
    }


def _load_embedder(cfg: Config, workdir: Path) -> Config:
    """``cfg`` with its embedder loaded once (shared by every arm and seed of this process)."""
    if not isinstance(cfg.embedder, str):
        return cfg
    from mimir_core import Mimir

    return dataclasses.replace(
        cfg, embedder=Mimir(workdir / "model", embedder=cfg.embedder).embedder
    )


def _seed_in_process(seed: int, cfg: Config, workdir: str, progress: bool) -> dict[str, Any]:
    """One seed in a worker process (``Config.jobs``): loads its own embedder."""
    path = Path(workdir)
    return run_seed(seed, _load_embedder(cfg, path), path, progress)


def _run_seeds(cfg: Config, tmp: Path, progress: bool) -> list[dict[str, Any]]:
    jobs = min(cfg.jobs, len(cfg.seeds))
    if jobs <= 1:
        cfg = _load_embedder(cfg, tmp)
        return [run_seed(seed, cfg, tmp / f"seed{seed}", progress) for seed in cfg.seeds]
    if not isinstance(cfg.embedder, str):
        raise ValueError("jobs > 1 needs the embedder by name: each process loads its own")
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn: a fresh interpreter per worker (no forked model sessions or LanceDB threads)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        futures = [
            pool.submit(_seed_in_process, seed, cfg, str(tmp / f"seed{seed}"), progress)
            for seed in cfg.seeds
        ]
        return [f.result() for f in futures]


def run(cfg: Config, *, progress: bool = False) -> dict[str, Any]:
    """Run every seed of ``cfg`` and return the full results (figures + per-seed raw logs)."""
    env = env_of(cfg)
    if "cold" not in cfg.arms:  # the oracle's figure comes from COLD's log
        cfg = dataclasses.replace(cfg, arms=("cold", *cfg.arms))
    unknown = [a for a in cfg.arms if a not in ALL_ARMS]
    if unknown:
        raise ValueError(f"unknown arms {unknown}; known: {', '.join(ALL_ARMS)}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mimir-learning-") as tmp:
        runs = _run_seeds(cfg, Path(tmp), progress)
    figures = summarise(runs, cfg)
    return {
        "benchmark": "learning",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config": {
            "stream": cfg.stream,
            "held_out": cfg.stream != "dev",
            "seeds": list(cfg.seeds),
            "tasks": cfg.tasks,
            "consolidate_every": cfg.consolidate_every,
            "window": cfg.window,
            "jobs": cfg.jobs,
            "arms": list(cfg.arms),
            "embedder": runs[0]["embedder"],
            "families": [f.name for f in env.FAMILIES],
            "repos": list(env.REPOS),
            "context_key": env.CONTEXT_KEY,
        },
        "machine": machine(),
        "seconds": round(time.perf_counter() - started, 1),
        "figures": figures,
        "per_seed": [
            {
                "seed": r["seed"],
                "seconds": r["seconds"],
                "consolidations": r["consolidations"],
                "success": {
                    a: statistics.fmean(x["success"] for x in lg) for a, lg in r["log"].items()
                },
                "outcomes": {
                    a: "".join("1" if x["success"] else "0" for x in lg)
                    for a, lg in r["log"].items()
                },
                "lessons": r["lessons"],
            }
            for r in runs
        ],
    }


def table(res: dict[str, Any]) -> str:
    f = res["figures"]
    c = res["config"]
    w = max(6, *(len(a) for a in c["arms"]))
    lines = [
        f"learning benchmark ({c.get('stream', 'dev')} stream"
        f"{', held out' if c.get('held_out') else ''}): {len(c['seeds'])} seeds x "
        f"{c['tasks']} tasks, {c['embedder']}, {res['seconds']} s",
        f"{'arm':<{w}} {'success':>8} {'min-max':>12} {'95% CI':>14} {'2nd half':>9} "
        f"{'2nd-half 95% CI':>16} {'regret':>7} {'repeat':>7} {'s/task':>7}",
    ]
    for arm in c["arms"]:
        a = f["arms"][arm]
        s, h = a["success"], a["second_half_success"]
        lines.append(
            f"{arm:<{w}} {s['mean']:>8.3f} {s['min']:>5.3f}-{s['max']:<6.3f} "
            f"{s['ci_low']:>6.3f}-{s['ci_high']:<7.3f} {h['mean']:>9.3f} "
            f"{h['ci_low']:>7.3f}-{h['ci_high']:<8.3f} "
            f"{a['regret']['mean']:>7.1f} {a['repeat_mistake_rate']['mean']:>7.3f} "
            f"{a['seconds_per_task']:>7.4f}"
        )
    lines.append(f"{'oracle':<{w}} {f['oracle_success']['mean']:>8.3f}")
    lines += _generic_lines(f)
    if "lift" not in f:  # no WARM arm
        return "\n".join(lines)
    for other, lift in f["lift"].items():
        verdict = "beyond noise" if lift["beyond_noise"] else "NOISE"
        lines.append(
            f"WARM-{other.upper()} lift {lift['mean']:+.3f} "
            f"(95% CI {lift['ci_low']:+.3f}..{lift['ci_high']:+.3f}): {verdict}"
        )
    cal, low, les = f["calibration"], f["lower_bound"], f["lessons"]
    lines += [
        f"tasks until WARM beats COLD beyond noise: {f['tasks_until_warm_beats_cold']}",
        f"repeat-mistake ratio WARM/COLD: {f['repeat_mistake_ratio_warm_cold']} "
        f"(WARM choices {f['warm_choice_sources']}, repeats by source {f['warm_repeat_sources']})",
        f"recommend expected_success calibration (n={cal['n']}): ECE {cal['ece']} "
        f"(vs hidden rate {cal['ece_vs_rate']}; a perfect forecast's ECE on these tasks: "
        f"{cal.get('ece_floor')} median, {cal.get('ece_floor_p90')} p90); "
        f"confidence (10% lower bound): coverage "
        f"{low['coverage']}, bin coverage {low['bin_coverage']}, overconfidence "
        f"{low['overconfidence']}",
        f"lessons admitted {les['admitted']} ({les['by_kind']}), precision {les['precision']}, "
        f"active at end {les['active_at_end']} (stale {les['active_at_end_stale']})",
        "learning curve (success per window, mean over seeds):",
    ]
    for arm in c["arms"]:
        pts = " ".join(f"{p['mean']:.2f}" for p in f["arms"][arm]["curve"])
        lines.append(f"  {arm:<{w}} {pts}")
    return "\n".join(lines)


def _generic_lines(f: dict[str, Any]) -> list[str]:
    """The table's lines for the generic arms' figures (none when they did not run)."""
    lines = []
    d = f.get("generic_minus_generic_learn")
    if d:
        h = d["second_half"]
        lines.append(
            f"GENERIC-GENERIC_LEARN, 2nd half {h['mean']:+.3f} "
            f"(95% CI {h['ci_low']:+.3f}..{h['ci_high']:+.3f}, paired by seed): {d['verdict']}"
        )
    for arm, r in f.get("over_ceiling", {}).items():
        if arm == "cold":
            continue
        if r["per_seed"] is None:
            lines.append(f"{arm.upper()}/CEILING: no ratio (the ceiling never succeeded)")
            continue
        lines.append(
            f"{arm.upper()}/CEILING, 2nd half {r['second_half_ratio']:.3f} "
            f"(per seed {r['per_seed']['min']:.3f}-{r['per_seed']['max']:.3f})"
            f"{'' if r['meets_0_9'] else '  < 0.9'}"
        )
    for arm, dg in f.get("recommend_diagnostics", {}).items():
        for part in ("all", "family_seen_often"):
            x = dg[part]
            lines.append(
                f"{arm} recommend ({part}, n={x['n']}): none {x['recommend_none_share']}, "
                f"other family {x['wrong_family_share']} (confident "
                f"{x['wrong_family_confident_share']}), low confidence {x['low_conf_share']}, "
                f"followed {x['followed_share']} (best action {x['followed_best_share']}, "
                f"success {x['followed_success']}; explored success {x['explored_success']})"
            )
    return lines


def _default_path(cfg: Config, mode: str) -> Path:
    """``learning-<stamp>[-quick].json`` for the dev stream with WARM (what the scoreboard and
    ``bench.run`` read), ``learning_<stream>-<stamp>[-<mode>].json`` otherwise (so a run
    without WARM, or on the held-out stream, is never taken for the headline result)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    suffix = f"-{mode}" if mode else ""
    if cfg.stream == "dev" and "warm" in cfg.arms:
        return RESULTS / f"learning-{stamp}{suffix}.json"
    return RESULTS / f"learning_{cfg.stream}-{stamp}{suffix}.json"


def _parse_list(text: str, known: tuple[str, ...], what: str) -> tuple[str, ...]:
    items = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    bad = [x for x in items if x not in known]
    if bad or not items:
        raise SystemExit(f"unknown {what} {bad or text!r}; known: {', '.join(known)}")
    return items


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.learning", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="the CI gate's small configuration")
    ap.add_argument(
        "--generic-quick",
        action="store_true",
        help="the generic arms' smoke configuration: cold, generic, generic_learn (if its venv "
        "exists) and ceiling, 2 seeds x 160 tasks, both streams unless --stream says",
    )
    ap.add_argument(
        "--stream",
        help="dev (default: the tuning stream), ops (held out), or both as dev,ops (one run and "
        "one JSON each)",
    )
    ap.add_argument(
        "--arms",
        help=f"comma-separated arms (cold always runs): {', '.join(ALL_ARMS)}",
    )
    ap.add_argument("--seeds", type=int, help="number of seeds (0..N-1)")
    ap.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="with --seeds N: run seeds FIRST..FIRST+N-1 (a block never run before)",
    )
    ap.add_argument("--note", action="append", default=[], help="a note kept in the json")
    ap.add_argument("--tasks", type=int, help="tasks per seed")
    ap.add_argument("--consolidate-every", type=int)
    ap.add_argument("--embedder", default="fastembed", help="fastembed (default) or hash")
    ap.add_argument(
        "--json", type=Path, help="where to save the results (-<stream> added with two streams)"
    )
    ap.add_argument("--naive", action="store_true", help="with --quick: run the NAIVE arm too")
    ap.add_argument(
        "--with-mimir-learn",
        action="store_true",
        help="run the mimir_learn arm (mimir-learn 0.1.5), making its cached venv if missing "
        "(full runs include it whenever the venv exists; with --arms, make the venv for the "
        "arms that need it)",
    )
    ap.add_argument("--no-mimir-learn", action="store_true", help="leave the mimir_learn arm out")
    ap.add_argument(
        "--jobs",
        type=int,
        help="seeds run at once, one process each (default: 2 with --quick and --generic-quick, "
        "else 1; any number gives the same figures)",
    )
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    if args.quick and args.generic_quick:
        ap.error("--quick and --generic-quick are two configurations: pick one")
    base = QUICK if args.quick else GENERIC_QUICK if args.generic_quick else FULL
    if args.first_seed < 0 or (args.first_seed and not args.seeds):
        ap.error(f"--first-seed {args.first_seed}: needs --seeds N, and must be 0 or more")
    mode = "quick" if args.quick else "generic-quick" if args.generic_quick else ""
    default_streams = "dev,ops" if args.generic_quick else "dev"
    streams = _parse_list(args.stream or default_streams, tuple(STREAMS), "stream")
    notes: list[str] = list(args.note)
    py = None
    if args.arms or args.generic_quick:
        arms = _parse_list(args.arms, ALL_ARMS, "arms") if args.arms else base.arms
        wanted = [a for a in arms if a in LEARN_ARMS]
        if wanted:
            py = learn_python(create=args.with_mimir_learn)
            if py is None:
                arms = tuple(a for a in arms if a not in LEARN_ARMS)
                notes.append(
                    f"{', '.join(wanted)} skipped: no mimir-learn 0.1.5 venv in "
                    "~/.cache/mimir-bench (--with-mimir-learn makes it)"
                )
                print(notes[-1], file=sys.stderr)
    else:
        if not args.no_mimir_learn and (args.with_mimir_learn or not args.quick):
            py = learn_python(create=args.with_mimir_learn)
            if py is None:
                notes.append(
                    "mimir_learn arm skipped: no mimir-learn 0.1.5 venv in ~/.cache/mimir-bench "
                    "(--with-mimir-learn makes it)"
                )
                print(notes[-1], file=sys.stderr)
        arms = (ARMS if args.naive else base.arms) + ((MIMIR_LEARN,) if py else ())
    tasks = args.tasks or base.tasks
    for name in streams:
        cfg = Config(
            seeds=(
                tuple(range(args.first_seed, args.first_seed + args.seeds))
                if args.seeds
                else base.seeds
            ),
            tasks=tasks,
            consolidate_every=args.consolidate_every or base.consolidate_every,
            window=base.window if tasks == base.tasks else max(10, tasks // 10),
            embedder=args.embedder,
            arms=arms,
            learn_python=py,
            jobs=max(1, args.jobs if args.jobs is not None else base.jobs),
            stream=name,
        )
        res = run(cfg, progress=not args.quiet)
        res["notes"] = notes
        if mode:
            res["mode"] = mode
        if py:
            from .perf import LEARN_VERSION

            res["config"]["mimir_learn_version"] = LEARN_VERSION
        path = args.json
        if path is not None and len(streams) > 1:
            path = path.with_name(f"{path.stem}-{name}{path.suffix}")
        path = path or _default_path(cfg, mode)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(res, indent=1) + "\n")
        print(table(res))
        print(f"saved {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
