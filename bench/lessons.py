"""Lessons: what consolidation learns from the labelled set, and what it costs at scale.

    python -m bench.lessons              # quality on bench/data/retrieval_set.json + timing
    python -m bench.lessons --sizes 1000,5000 --json out.json

Quality (real offline MiniLM embedder, 376 labelled experiences of 24 task families): how many
topics, candidates and admitted lessons a full run gives, whether every admitted lesson's
evidence comes from one labelled family (purity), and whether its rule names a recorded action.

Cost: a full run over N synthetic experiences (``bench.synthetic``: realistic task texts and
text-embedding-like vectors, so the run pays for clustering and the store, not for embedding,
which consolidation never does for experiences), then an incremental run after 10 more.
Uses the public API only (plus the report it returns).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from mimir_core import Mimir

from .quality import build_store, load


def quality(home: Path) -> dict[str, Any]:
    """Consolidate the labelled set and check the admitted lessons against the labels."""
    data = load()
    m, id_map = build_store(data, home)
    family = {e["id"]: (e.get("action_group") or "-").split(":")[0] for e in data["experiences"]}
    started = time.perf_counter()
    report = m.consolidate()
    seconds = time.perf_counter() - started
    admitted = [m.lesson_detail(i) for i in report.admitted]
    pure = 0
    named = 0
    rows = []
    for d in admitted:
        fams = Counter(family[id_map[e.id]] for e in d.supporting)
        labelled = {f for f in fams if f != "-"}
        pure += len(labelled) <= 1
        named += d.lesson.action in d.lesson.rule
        rows.append(
            {
                "id": d.lesson.id,
                "kind": d.lesson.kind,
                "confidence": d.lesson.confidence,
                "lift": d.lesson.gate.lift,
                "noise": d.lesson.gate.noise,
                "families": dict(fams),
                "rule": d.lesson.rule,
            }
        )
    return {
        "experiences": len(data["experiences"]),
        "topics": report.clusters,
        "candidates": len(report.candidates),
        "admitted": len(report.admitted),
        "pending": len(report.pending),
        "admitted_pure": pure,
        "admitted_naming_their_action": named,
        "seconds_full_run": round(seconds, 3),
        "lessons": rows,
    }


def rss_mb() -> float | None:
    """This process's resident memory (MB; Linux ``/proc``), else ``None``."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


class PeakRss:
    """The highest resident memory seen while the block runs (sampled every 20 ms)."""

    def __init__(self) -> None:
        self.start = self.peak = rss_mb()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(0.02):
            now = rss_mb()
            if now is not None and self.peak is not None:
                self.peak = max(self.peak, now)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def cost(n: int, home: Path) -> dict[str, Any]:
    """Full and incremental consolidation time over ``n`` synthetic experiences, and how much
    resident memory the full run adds (its peak over what the process held before it)."""
    from .synthetic import SyntheticEmbedder, make_experiences

    m = Mimir(home, embedder=SyntheticEmbedder(), auto_consolidate=False)
    items = make_experiences(n, seed=11)
    for start in range(0, n, 2000):
        m.record_many(items[start : start + 2000])
    del items
    started = time.perf_counter()
    with PeakRss() as mem:
        full = m.consolidate()
    t_full = time.perf_counter() - started
    m.record_many(make_experiences(10, seed=12, start=n))
    started = time.perf_counter()
    inc = m.consolidate()
    t_inc = time.perf_counter() - started
    return {
        "experiences": n,
        "full_seconds": round(t_full, 3),
        "full_seconds_per_1000": round(1000 * t_full / n, 3),
        "full_peak_rss_added_mb": round(mem.peak - mem.start, 1)
        if mem.peak is not None and mem.start is not None
        else None,
        "topics": full.clusters,
        "candidates": len(full.candidates),
        "admitted": len(full.admitted),
        "incremental_seconds_10_new": round(t_inc, 3),
        "incremental_examined": inc.examined,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lessons", description=__doc__)
    parser.add_argument("--sizes", default="1000,5000", help="synthetic store sizes for timing")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mimir-bench-lessons-") as tmp:
        if not args.skip_quality:
            out["quality"] = q = quality(Path(tmp) / "quality")
            print(
                f"labelled set: {q['experiences']} experiences → {q['topics']} topics, "
                f"{q['candidates']} candidates, {q['admitted']} admitted "
                f"({q['admitted_pure']} pure, {q['admitted_naming_their_action']} naming their "
                f"action), {q['pending']} waiting; full run {q['seconds_full_run']:.2f} s"
            )
            for le in q["lessons"]:
                print(
                    f"  {le['kind']:6} conf {le['confidence']:.2f} lift {le['lift']:+.2f}"
                    f"±{le['noise']:.2f} {le['families']}\n    {le['rule'][:160]}"
                )
        out["cost"] = []
        for n in (int(s) for s in args.sizes.split(",") if s):
            c = cost(n, Path(tmp) / f"cost-{n}")
            out["cost"].append(c)
            print(
                f"{n} experiences: full run {c['full_seconds']:.2f} s "
                f"({c['full_seconds_per_1000']:.2f} s per 1,000; {c['topics']} topics, "
                f"{c['candidates']} candidates; peak memory +{c['full_peak_rss_added_mb']} MB), "
                f"incremental after 10 new "
                f"{c['incremental_seconds_10_new']:.2f} s"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
