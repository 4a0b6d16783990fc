"""Live mode of the learning benchmark: a real Claude model solves small real coding tasks, with
and without Mimir (opt-in; needs ``ANTHROPIC_API_KEY``; ``ANTHROPIC_BASE_URL`` is honoured).

    python -m bench.live [--trials 3] [--rounds 2] [--model claude-haiku-4-5] [--max-usd 2]

Each trial walks the tasks of :mod:`bench.live_tasks` in a seeded order, ``--rounds`` times,
through two arms on the same order: **COLD** (the model alone) and **WARM** (the model plus
Mimir: ``Mimir.context`` and this repository's past attempts, fenced as data, in the prompt;
every outcome recorded with the test's failure message as its reason; ``consolidate()`` every
``--consolidate-every`` tasks; a fresh store per trial). A task succeeds when its hidden unit
test passes on the code the model wrote. The WARM − COLD lift is paired by trial and reported
with its 95% t-interval: an interval that includes 0 is **noise**, not a result.

Cost cap: tokens are priced at ``--usd-per-mtok IN,OUT`` (default Claude Haiku 4.5's 1,5); the
run stops before the call that could pass ``--max-usd`` and says so in its results.
Results go to ``bench/results/live-<stamp>.json`` with the seeds, model, cost and machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .learning import band, machine
from .live_tasks import TASKS, LiveTask

SYSTEM = (
    "You are a careful software engineer working in an existing Python repository. Reply with "
    "one line 'APPROACH: <how you solve it, in a few words>' and then the complete new file in "
    "one ```python code block."
)
_CODE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.S)
_APPROACH = re.compile(r"APPROACH:\s*(.+)")
MAX_TOKENS = 1024
#: A call's worst case for the cost cap: the prompt as sent plus a full answer.
CHARS_PER_TOKEN = 3.5


class CostCapReached(Exception):
    """The next call could pass the cost cap."""


@dataclass
class Meter:
    """Tokens used and what they cost, with the cap checked before every call."""

    usd_in: float
    usd_out: float
    cap: float
    tokens_in: int = 0
    tokens_out: int = 0
    calls: int = 0

    @property
    def usd(self) -> float:
        return (self.tokens_in * self.usd_in + self.tokens_out * self.usd_out) / 1e6

    def check(self, prompt_chars: int) -> None:
        worst = (prompt_chars / CHARS_PER_TOKEN) * self.usd_in + MAX_TOKENS * self.usd_out
        if self.usd + worst / 1e6 > self.cap:
            raise CostCapReached(f"the next call could pass the cap of ${self.cap:g}")

    def add(self, usage: Any) -> None:
        self.calls += 1
        self.tokens_in += int(getattr(usage, "input_tokens", 0) or 0)
        self.tokens_out += int(getattr(usage, "output_tokens", 0) or 0)


@dataclass
class Attempt:
    approach: str
    success: bool
    reason: str
    seconds: float = 0.0


def _reason(stderr: str, limit: int = 400) -> str:
    """Why a unittest run failed, on one line: the assertion's message first (it says what the
    repository expects), then the assertion itself."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    start = max((i for i, ln in enumerate(lines) if "Error" in ln), default=len(lines) - 1)
    block = [ln for ln in lines[start:] if not ln.startswith(("---", "Ran ", "FAILED"))]
    if not block:
        return "the hidden test failed"
    said = [ln[1:].strip() for ln in block[1:] if ln.startswith(":")]
    head, _, tail = block[0].partition(" : ")  # a message on the assertion's own line
    text = "; ".join([*said, *([tail] if tail else []), head])
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_test(task: LiveTask, code: str, workdir: Path) -> tuple[bool, str]:
    """Write the model's file next to the hidden test and run it (20 s limit)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / f"{task.module}.py").write_text(code, encoding="utf-8")
    (workdir / "test_hidden.py").write_text(task.test, encoding="utf-8")
    try:
        proc = subprocess.run(
            [sys.executable, "-E", "-s", "test_hidden.py"],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=20,
        )
    except subprocess.TimeoutExpired:
        return False, "the hidden test timed out after 20 s"
    return proc.returncode == 0, "" if proc.returncode == 0 else _reason(proc.stderr)


def prompt_for(task: LiveTask, memory: str) -> str:
    parts = [memory] if memory else []
    parts.append(
        f"Task: implement `{task.function}` in `{task.module}.py`. {task.prompt}\n\n"
        f"Current `{task.module}.py`:\n```python\n{task.stub}```"
    )
    return "\n\n".join(parts)


def attempt(
    client: Any, model: str, meter: Meter, task: LiveTask, memory: str, work: Path
) -> Attempt:
    """One call to the model and one run of the hidden test."""
    prompt = prompt_for(task, memory)
    meter.check(len(SYSTEM) + len(prompt))
    started = time.perf_counter()
    msg = client.messages.create(
        model=model,
        max_tokens=MAX_TOKENS,
        system=SYSTEM,
        messages=[{"role": "user", "content": prompt}],
    )
    meter.add(msg.usage)
    text = "".join(getattr(b, "text", "") for b in msg.content)
    found = _APPROACH.search(text)
    approach = " ".join(found.group(1).split())[:200] if found else "(no approach stated)"
    code = _CODE.search(text)
    if code is None:
        ok, reason = False, "the answer held no python code block"
    else:
        ok, reason = run_test(task, code.group(1), work)
    return Attempt(approach, ok, reason, time.perf_counter() - started)


def memory_for(m: Any, task: LiveTask) -> tuple[str, list[str]]:
    """What WARM puts in front of the model: lessons and past attempts, fenced as data."""
    from mimir_core.tools.render import render_hits
    from mimir_core.tools.specs import fence

    block = m.context(task.text)
    hits = m.recall(task.text, k=3)
    ids = [le.id for le in m.lessons(task.text, k=3)] if block else []
    if hits:
        block = "\n\n".join(p for p in (block, fence(render_hits(hits, task.text))) if p)
    return block, ids


@dataclass
class Trial:
    """One trial: both arms on one task order, WARM with its own fresh store."""

    number: int
    cfg: argparse.Namespace
    client: Any
    meter: Meter
    root: Path
    m: Any
    log: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {"cold": [], "warm": []})
    admitted: list[str] = field(default_factory=list)

    def solve(self, i: int, task: LiveTask) -> None:
        """Both arms on one task; WARM records what happened (and consolidates every N)."""
        for arm in ("cold", "warm"):
            memory, lesson_ids = memory_for(self.m, task) if arm == "warm" else ("", [])
            work = self.root / f"t{self.number}-{i}-{arm}"
            got = attempt(self.client, self.cfg.model, self.meter, task, memory, work)
            self.log[arm].append(
                {
                    "task": task.function,
                    "family": task.family,
                    "success": got.success,
                    "approach": got.approach,
                    "reason": got.reason,
                    "memory_chars": len(memory),
                    "seconds": round(got.seconds, 3),
                }
            )
        self.m.record(  # what WARM (the loop's last arm) tried
            task.text,
            got.approach,
            "success" if got.success else "failure",
            reason=got.reason or None,
            context={"family": task.family, "file": f"{task.module}.py"},
            recalled_lesson_ids=lesson_ids or None,
            source="bench-live",
            idempotency_key=f"live-{self.cfg.seed}-{self.number}-{i}",
        )
        if (i + 1) % self.cfg.consolidate_every == 0:
            self.admitted += self.m.consolidate().admitted


def run_trial(
    trial: int, cfg: argparse.Namespace, client: Any, meter: Meter, root: Path, embedder: Any
) -> dict[str, Any]:
    from mimir_core import Mimir

    rng = random.Random(cfg.seed + trial)
    order = [t for _ in range(cfg.rounds) for t in rng.sample(list(TASKS), len(TASKS))]
    home = root / f"trial-{trial}" / "home"
    m = Mimir(home, embedder=embedder, scope="live-repo", auto_consolidate=False)
    run = Trial(trial, cfg, client, meter, root, m)
    stopped = None
    try:
        for i, task in enumerate(order):
            run.solve(i, task)
            print(f"  trial {trial}: {i + 1}/{len(order)}", file=sys.stderr)
    except CostCapReached as exc:  # what was done so far is kept
        stopped = str(exc)
    return {"trial": trial, "log": run.log, "lessons_admitted": run.admitted, "stopped": stopped}


def summarise(trials: list[dict[str, Any]]) -> dict[str, Any]:
    def rate(t: dict[str, Any], arm: str) -> float:
        n = min(len(t["log"]["cold"]), len(t["log"]["warm"]))  # the tasks both arms did
        return sum(x["success"] for x in t["log"][arm][:n]) / n

    done = [t for t in trials if t["log"]["cold"] and t["log"]["warm"]]
    if not done:
        return {"trials": 0}
    lift = band([rate(t, "warm") - rate(t, "cold") for t in done])
    return {
        "trials": len(done),
        "arms": {a: band([rate(t, a) for t in done]) for a in ("cold", "warm")},
        "lift": {**lift, "beyond_noise": lift["ci_low"] > 0},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.live", description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2, help="passes over the tasks per trial")
    ap.add_argument("--model", default="claude-haiku-4-5")
    ap.add_argument("--max-usd", type=float, default=2.0, help="cost cap for the whole run")
    ap.add_argument("--usd-per-mtok", default="1,5", help="price per million tokens: IN,OUT")
    ap.add_argument("--consolidate-every", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    args = ap.parse_args(argv)
    if not os.environ.get("ANTHROPIC_API_KEY"):
        print(
            "live mode needs ANTHROPIC_API_KEY (it calls a real model; "
            "ANTHROPIC_BASE_URL points it at another endpoint)",
            file=sys.stderr,
        )
        return 2
    try:
        usd_in, usd_out = (float(x) for x in args.usd_per_mtok.split(","))
    except ValueError:
        print(f"--usd-per-mtok wants IN,OUT; got {args.usd_per_mtok!r}", file=sys.stderr)
        return 2
    import anthropic

    res = run(
        args, anthropic.Anthropic(max_retries=2, timeout=120), Meter(usd_in, usd_out, args.max_usd)
    )
    res["command"] = "python -m bench.live " + " ".join(argv if argv is not None else sys.argv[1:])
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for path in [args.out_dir / f"live-{stamp}.json", *([args.json] if args.json else [])]:
        path.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print(report(res))
    return 0


def run(
    args: argparse.Namespace, client: Any, meter: Meter, embedder: Any = None
) -> dict[str, Any]:
    """Every trial (until the cost cap), summarised. ``embedder``: default from settings."""
    trials: list[dict[str, Any]] = []
    stopped = None
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mimir-live-") as tmp:
        from mimir_core import Mimir

        embedder = embedder or Mimir(Path(tmp) / "probe").embedder
        for trial in range(args.trials):
            trials.append(run_trial(trial, args, client, meter, Path(tmp), embedder))
            stopped = trials[-1]["stopped"]
            if stopped:
                break
    return {
        "bench": "mimir live",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": machine(),
        "cost": {
            "usd": round(meter.usd, 4),
            "cap_usd": meter.cap,
            "calls": meter.calls,
            "tokens_in": meter.tokens_in,
            "tokens_out": meter.tokens_out,
            "stopped_at_cap": stopped,
        },
        "figures": summarise(trials),
        "trials": trials,
        "seconds": round(time.perf_counter() - started, 1),
    }


def report(res: dict[str, Any]) -> str:
    """The run on two lines: the arms and the lift's verdict, then the cost."""
    f, cost = res["figures"], res["cost"]
    lines = []
    if f.get("trials"):
        lift = f["lift"]
        verdict = "beyond noise" if lift["beyond_noise"] else "noise, not a result"
        lines.append(
            f"COLD {f['arms']['cold']['mean']:.3f}  WARM {f['arms']['warm']['mean']:.3f}  "
            f"WARM-COLD {lift['mean']:+.3f} (95% CI {lift['ci_low']:+.3f}..{lift['ci_high']:+.3f}"
            f" over {f['trials']} trials): {verdict}"
        )
    stop = cost["stopped_at_cap"]
    lines.append(
        f"cost ${cost['usd']:.4f} of ${cost['cap_usd']:g} in {cost['calls']} calls"
        + (f"; stopped early: {stop}" if stop else "")
    )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
