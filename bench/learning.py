"""The learning benchmark: does Mimir make an agent better? WARM vs NAIVE vs COLD.

    python -m bench.learning                      # 5 seeds x 400 tasks (real offline MiniLM)
    python -m bench.learning --quick              # the CI gate's configuration
    python -m bench.learning --seeds 3 --tasks 200 --json out.json

A seeded, offline stream of tasks from recurring families (:mod:`bench.learning_env`: paraphrased
tasks, context-dependent hidden rates, traps, drift) is solved side by side by three simulated
agents (:mod:`bench.learning_agents`), each with its own fresh store. Reported per arm, over seeds,
with a noise band (min/max and a 95% t-interval): success rate, learning curve per window,
cumulative regret against an oracle that knows the hidden rates, repeat-mistake rate; for WARM:
calibration of recommend's confidence, lesson precision, and after how many tasks WARM beats COLD
beyond noise (a lift inside the band is reported as noise, not a result). Saves JSON with the
seeds, versions and machine under ``bench/results/`` and prints a compact table.

A run depends on its seeds only: every random choice comes from a seeded RNG, and every record
carries an idempotency key and a time derived from its task index (so experience ids, and the
lesson gate's cross-fitting folds that hash them, repeat exactly). The same seeds give the same
figures; only timings and the machine fields differ between runs.
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
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .learning_agents import Choice, Cold, Naive, Warm
from .learning_env import FAMILIES, REPOS, Family, Task, best_rate, rate, stream
from .learning_mimir_learn import ARM as MIMIR_LEARN
from .learning_mimir_learn import MimirLearnAgent, learn_python
from .learning_mimir_learn import calibration as learn_calibration
from .versions import versions

ARMS = ("cold", "naive", "warm")
"""The default arms; ``mimir_learn`` (mimir-learn 0.1.5 in its side venv) is added on request."""
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


def run_seed(seed: int, cfg: Config, workdir: Path, progress: bool) -> dict[str, Any]:
    """All three arms side by side on one seed's stream."""
    tasks = stream(seed, cfg.tasks)
    warm = Warm(seed + 2000, workdir / "warm", cfg.embedder, cfg.consolidate_every)
    agents: dict[str, Cold | Naive | Warm | MimirLearnAgent] = {"cold": Cold(seed + 1000)}
    if "naive" in cfg.arms:
        agents["naive"] = Naive(seed + 3000, workdir / "naive", cfg.embedder)
    agents["warm"] = warm
    if MIMIR_LEARN in cfg.arms:
        if cfg.learn_python is None:
            raise ValueError("the mimir_learn arm needs Config.learn_python (the side venv)")
        agents[MIMIR_LEARN] = MimirLearnAgent(seed + 4000, workdir / MIMIR_LEARN, cfg.learn_python)
    log: dict[str, list[dict[str, Any]]] = {a: [] for a in agents}
    history: dict[str, dict[tuple[str, str, str], list[bool]]] = {a: {} for a in agents}
    seconds = dict.fromkeys(agents, 0.0)
    for task in tasks:
        for arm, agent in agents.items():
            started = time.perf_counter()
            choice: Choice = agent.choose(task)
            p = rate(task.family, choice.action, task.repo, task.drifted)
            success = task.luck < p
            agent.learn(task, choice, success)
            seconds[arm] += time.perf_counter() - started
            key = (task.family.name, task.repo, choice.action)
            past = history[arm].setdefault(key, [])
            log[arm].append(
                {
                    "success": success,
                    "regret": best_rate(task.family, task.repo, task.drifted) - p,
                    "repeat": bool(past) and not any(past),
                    "source": choice.source,
                    "confidence": choice.confidence,
                    "posterior_mean": choice.posterior_mean,
                    "rate": p,
                    "said": _said(choice, task),
                }
            )
            past.append(success)
        if progress and (task.index + 1) % cfg.window == 0:
            done = task.index + 1
            rates = " ".join(f"{a}={sum(r['success'] for r in log[a]) / done:.2f}" for a in agents)
            print(f"  seed {seed}: {done}/{cfg.tasks} tasks  {rates}", file=sys.stderr)
    for agent in agents.values():
        if isinstance(agent, MimirLearnAgent):
            agent.close()
    return {
        "seed": seed,
        "log": log,
        "seconds": {a: round(s, 2) for a, s in seconds.items()},
        "consolidations": warm.consolidations,
        "consolidate_seconds": round(warm.consolidate_seconds, 2),
        "lessons": lesson_verdicts(warm, cfg.tasks),
        "embedder": warm.m.embedder.name,
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


def lesson_verdicts(warm: Warm, n: int) -> list[dict[str, Any]]:
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
        family = next((f for f in FAMILIES if f.name == fam_name), None)
        repos = [lesson.scope] if lesson.scope in REPOS else list(REPOS)
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
    a 5% lower bound promises >= 0.95) and ``bin_coverage`` (share of picks in bins whose
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
        "window_ends": ends,
        "arms": arms,
        "oracle_success": oracle,
        "lift": lift,
        "tasks_until_warm_beats_cold": until,
        "repeat_mistake_ratio_warm_cold": round(
            arms["warm"]["repeat_mistake_rate"]["mean"] / repeat_cold, 4
        )
        if repeat_cold
        else None,
        # recommend's calibrated point estimate (expected_success) and, separately, its honest
        # 5% lower bound (confidence): coverage and overconfidence
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
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mimir-learning-") as tmp:
        runs = _run_seeds(cfg, Path(tmp), progress)
    figures = summarise(runs, cfg)
    return {
        "benchmark": "learning",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config": {
            "seeds": list(cfg.seeds),
            "tasks": cfg.tasks,
            "consolidate_every": cfg.consolidate_every,
            "window": cfg.window,
            "jobs": cfg.jobs,
            "arms": list(cfg.arms),
            "embedder": runs[0]["embedder"],
            "families": [f.name for f in FAMILIES],
            "repos": list(REPOS),
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
    lines = [
        f"learning benchmark: {len(c['seeds'])} seeds x {c['tasks']} tasks, "
        f"{c['embedder']}, {res['seconds']} s",
        f"{'arm':<6} {'success':>8} {'min-max':>12} {'95% CI':>14} {'2nd half':>9} "
        f"{'regret':>7} {'repeat':>7} {'s/task':>7}",
    ]
    for arm in c["arms"]:
        a = f["arms"][arm]
        s = a["success"]
        lines.append(
            f"{arm:<6} {s['mean']:>8.3f} {s['min']:>5.3f}-{s['max']:<6.3f} "
            f"{s['ci_low']:>6.3f}-{s['ci_high']:<7.3f} {a['second_half_success']['mean']:>9.3f} "
            f"{a['regret']['mean']:>7.1f} {a['repeat_mistake_rate']['mean']:>7.3f} "
            f"{a['seconds_per_task']:>7.4f}"
        )
    lines.append(f"oracle {f['oracle_success']['mean']:>8.3f}")
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
        f"confidence (5% lower bound): coverage "
        f"{low['coverage']}, bin coverage {low['bin_coverage']}, overconfidence "
        f"{low['overconfidence']}",
        f"lessons admitted {les['admitted']} ({les['by_kind']}), precision {les['precision']}, "
        f"active at end {les['active_at_end']} (stale {les['active_at_end_stale']})",
        "learning curve (success per window, mean over seeds):",
    ]
    for arm in c["arms"]:
        pts = " ".join(f"{p['mean']:.2f}" for p in f["arms"][arm]["curve"])
        lines.append(f"  {arm:<6} {pts}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.learning", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="the CI gate's small configuration")
    ap.add_argument("--seeds", type=int, help="number of seeds (0..N-1)")
    ap.add_argument("--tasks", type=int, help="tasks per seed")
    ap.add_argument("--consolidate-every", type=int)
    ap.add_argument("--embedder", default="fastembed", help="fastembed (default) or hash")
    ap.add_argument("--json", type=Path, help="where to save the results")
    ap.add_argument("--naive", action="store_true", help="with --quick: run the NAIVE arm too")
    ap.add_argument(
        "--with-mimir-learn",
        action="store_true",
        help="run the mimir_learn arm (mimir-learn 0.1.5), making its cached venv if missing "
        "(full runs include it whenever the venv exists)",
    )
    ap.add_argument("--no-mimir-learn", action="store_true", help="leave the mimir_learn arm out")
    ap.add_argument(
        "--jobs",
        type=int,
        help="seeds run at once, one process each (default: 2 with --quick, else 1; any number "
        "gives the same figures)",
    )
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    base = QUICK if args.quick else FULL
    notes: list[str] = []
    py = None
    if not args.no_mimir_learn and (args.with_mimir_learn or not args.quick):
        py = learn_python(create=args.with_mimir_learn)
        if py is None:
            notes.append(
                "mimir_learn arm skipped: no mimir-learn 0.1.5 venv in ~/.cache/mimir-bench "
                "(--with-mimir-learn makes it)"
            )
            print(notes[-1], file=sys.stderr)
    tasks = args.tasks or base.tasks
    cfg = Config(
        seeds=tuple(range(args.seeds)) if args.seeds else base.seeds,
        tasks=tasks,
        consolidate_every=args.consolidate_every or base.consolidate_every,
        window=base.window if tasks == base.tasks else max(10, tasks // 10),
        embedder=args.embedder,
        arms=(ARMS if args.naive else base.arms) + ((MIMIR_LEARN,) if py else ()),
        learn_python=py,
        jobs=max(1, args.jobs if args.jobs is not None else base.jobs),
    )
    res = run(cfg, progress=not args.quiet)
    res["notes"] = notes
    if py:
        from .perf import LEARN_VERSION

        res["config"]["mimir_learn_version"] = LEARN_VERSION
    path = args.json
    if path is None:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        path = RESULTS / f"learning-{stamp}{'-quick' if args.quick else ''}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res, indent=1) + "\n")
    print(table(res))
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
