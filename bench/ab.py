"""Two revisions side by side: recall / recommend latency of BASE against this checkout.

    python -m bench.ab HEAD~3                        # 100k and 1M rows, 200 queries each
    python -m bench.ab v0.3 --sizes 10k --queries 50

Each revision runs in its own worker process (``bench/_ab_worker.py``; BASE is extracted with
``git archive``) on the benchmark store its own code builds (``bench.perf``'s store cache), with
the real MiniLM query embedding charged on every call. The driver sends each query to both
workers, alternating which goes first, so both sides see the same machine load: on a shared
machine compare the **ratios**, which this reports with p50 / p95 wall and CPU of each side and
how many answers agree (the top hits' task and action; a recommendation's action and confidence;
they can differ only where the revisions' stores or rankings do). Results go to
``bench/results/ab-<date>.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.synthetic import log, machine_info, make_queries, parse_size, pct, size_label

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "_ab_worker.py"
OPS = ("recall", "recommend")
WARMUP = 10


def extract(rev: str, into: Path) -> Path:
    """The tree of ``rev`` in ``into`` (``git archive``)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True
    ).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


class Worker:
    """One revision's worker process."""

    def __init__(self, root: Path, size: int, seed: int, workdir: Path) -> None:
        cmd = [sys.executable, str(WORKER), str(root), str(size), str(seed), str(workdir)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        if not json.loads(self.proc.stdout.readline() or "{}").get("ready"):
            raise RuntimeError(f"worker for {root} did not start")

    def call(self, op: str, text: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op, "text": text}) + "\n")
        self.proc.stdin.flush()
        return dict(json.loads(self.proc.stdout.readline()))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def compare(
    roots: dict[str, Path], size: int, queries: int, seed: int, work: Path
) -> dict[str, Any]:
    """Interleaved calls of both revisions on stores of ``size`` rows."""
    workers = {side: Worker(root, size, seed, work) for side, root in roots.items()}
    try:
        samples: dict[str, dict[str, list[tuple[float, float]]]] = {
            side: {op: [] for op in OPS} for side in workers
        }
        agree = dict.fromkeys(OPS, 0)
        # Each call its own text: a text seen before would find its vector in the query cache.
        texts = make_queries(len(OPS) * (queries + WARMUP), seed + 4242)
        for i in range(queries + WARMUP):
            order = list(workers) if i % 2 == 0 else list(reversed(workers))
            for j, op in enumerate(OPS):
                text = texts[len(OPS) * i + j]
                got = {side: workers[side].call(op, text) for side in order}
                if i < WARMUP:
                    continue
                for side, reply in got.items():
                    samples[side][op].append((reply["ms"], reply["cpu"]))
                agree[op] += got["base"]["answer"] == got["head"]["answer"]
    finally:
        for w in workers.values():
            w.close()
    out: dict[str, Any] = {}
    for op in OPS:
        base, head = pct(samples["base"][op]), pct(samples["head"][op])
        out[op] = {
            "base": base,
            "head": head,
            "head_over_base_p50": round(head["p50"] / base["p50"], 3),
            "head_over_base_p95": round(head["p95"] / base["p95"], 3),
            "same_answer": agree[op],
            "n": queries,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("base", help="the revision to compare against (anything git archive takes)")
    ap.add_argument("--sizes", default="100k,1m")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7, help="the stores' seed (bench.perf's default)")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = bool(
        subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    result: dict[str, Any] = {
        "base": args.base,
        "head": head + ("+uncommitted" if dirty else ""),
        "machine": machine_info(),
        "queries": args.queries,
        "sizes": {},
    }
    work = Path(tempfile.mkdtemp(prefix="mimir-ab-"))
    try:
        roots = {"base": extract(args.base, work / "base"), "head": ROOT}
        for n in sizes:
            log(f"{size_label(n)}: {args.base} against {result['head']}, {args.queries} queries")
            result["sizes"][size_label(n)] = r = compare(roots, n, args.queries, args.seed, work)
            for op in OPS:
                b, h, o = r[op]["base"], r[op]["head"], r[op]
                print(
                    f"{size_label(n):>5} {op:<9} base p50 {b['p50']:6.1f} p95 {b['p95']:6.1f}"
                    f" | head p50 {h['p50']:6.1f} p95 {h['p95']:6.1f} ms"
                    f" | head/base {o['head_over_base_p50']:.2f} / {o['head_over_base_p95']:.2f}"
                    f" | same answer {o['same_answer']}/{o['n']}"
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    path = args.out_dir / f"ab-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
