"""One command for every figure: the learning benchmark and the performance figures, one run.

    python -m bench --quick                 # small configurations (a few minutes)
    python -m bench                         # full: 5 seeds x 400 tasks, 10k / 100k / 1M stores
    python -m bench --only perf,hook_cost   # some parts only
    python -m bench.scoreboard              # then the HTML page of the newest results

Each part runs as its own process (``python -m bench.<part> ... --json``), one after the other,
so that one part's memory, threads and caches never colour another's figures and each gets its
own peak RSS (``ru_maxrss`` of the part's process, from ``wait4``; processes it starts itself,
like hook processes or the mimir-learn worker, are not included). Parts:

* ``learning``: WARM / NAIVE / COLD (+ MIMIR_LEARN when its venv exists) (:mod:`bench.learning`);
* ``perf``: record / recall / recommend p50/p95 at 10k, 100k, 1M against the numpy floor and
  mimir-learn 0.1.5, store disk size (:mod:`bench.perf`);
* ``lessons_latency``: ``Mimir.lessons`` and ``Mimir.context`` p50/p95 over the same stores
  (perf's cached ones for 100k and 1M), real MiniLM query embedding included (this module);
* ``spool_drain``: records/s of ``Mimir.ingest`` draining what hooks spooled (this module);
* ``hook_cost``: ``mimir hook`` per tool call against a bare ``python -c pass``;
* ``mcp_startup``: MCP server start-up to the first ``tools/list`` answer;
* ``consolidation``: a full consolidation's seconds per 1,000 experiences (:mod:`bench.lessons`);
* ``hosts``: what an agent in each host is shown of past attempts and how often it still repeats
  a failed command, against a no-memory baseline (:mod:`bench.hosts`).

Saves ``bench/results/run-<stamp>.json``: every part's own JSON, its seconds, exit code and
peak RSS, a summary of the headline figures (medians and ratios), seeds, versions and machine.
Progress goes to stderr; a part that fails is recorded with its exit code and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.versions import versions

RESULTS = Path(__file__).resolve().parent / "results"
PY = sys.executable
PARTS = (
    "learning",
    "perf",
    "lessons_latency",
    "spool_drain",
    "hook_cost",
    "mcp_startup",
    "consolidation",
    "hosts",
)


# -- progress --------------------------------------------------------------------------------


class Progress:
    """A one-line stdlib progress bar on stderr (redrawn every second on a terminal)."""

    def __init__(self, total: int, width: int = 24) -> None:
        self.total, self.width, self.done = total, width, 0
        self.label = ""
        self.started = self.part_started = time.monotonic()
        self.tty = sys.stderr.isatty()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.tty:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()

    def line(self) -> str:
        filled = round(self.width * self.done / max(1, self.total))
        now = time.monotonic()
        return (
            f"[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
            f"{self.label} ({now - self.part_started:.0f} s; total {now - self.started:.0f} s)"
        )

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            sys.stderr.write("\r\033[K" + self.line())
            sys.stderr.flush()

    def start(self, label: str) -> None:
        self.label, self.part_started = label, time.monotonic()
        if not self.tty:
            print(self.line(), file=sys.stderr, flush=True)

    def finish(self, note: str) -> None:
        self.done += 1
        msg = f"{self.line()} {note}"
        print(("\r\033[K" if self.tty else "") + msg, file=sys.stderr, flush=True)

    def close(self) -> None:
        self._stop.set()


# -- parts measured here (run as ``python -m bench.run --part NAME``) ------------------------


def _pct(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 3), "p95": round(p95, 3), "n": len(values)}


def lessons_latency(sizes: list[int], queries: int, seed: int) -> dict[str, Any]:
    """``Mimir.lessons(q, k=5)`` and ``Mimir.context(q)`` p50/p95 (ms) over perf's stores.

    The stores are :func:`bench.perf.cached_store`'s (synthetic vectors; 100k and up reused
    from its cache by hard links), queried with fresh texts whose real MiniLM embedding is paid
    on every call. Stores up to 10k are consolidated first so that ``lessons`` has lessons to
    rank; the cached big ones are served as they are (the lessons count is reported):
    ``lessons`` searches the lessons table, ``context`` also runs ``recommend`` over every
    experience, so it is the one that grows with the store."""
    from mimir_core.embed.core import FastEmbedder

    from .perf import CACHE, CACHE_MIN, cached_store
    from .synthetic import SyntheticEmbedder, make_queries, size_label

    out: dict[str, Any] = {"sizes": {}, "queries": queries, "seed": seed}
    with tempfile.TemporaryDirectory(prefix="mimir-bench-lessons-lat-") as tmp:
        fe = FastEmbedder(Path(tmp) / "models")
        fe.embed(["warm up the model"])
        emb = SyntheticEmbedder(fe)
        for n in sizes:
            label = size_label(n)
            bs, info = cached_store(
                Path(tmp) / label, n, emb, seed, "fast", CACHE if n >= CACHE_MIN else None
            )
            m = bs.m
            consolidate_s = None
            if n <= 10_000:
                t0 = time.perf_counter()
                m.consolidate()
                consolidate_s = round(time.perf_counter() - t0, 2)
            emb.charge_model = True
            qs = make_queries(2 * queries + 2, seed + n)
            m.lessons(qs[-1])
            m.context(qs[-2])  # warm caches
            les, ctx, les_cpu, ctx_cpu = [], [], [], []
            for i in range(queries):  # interleaved, a fresh text each call
                c0, t0 = time.process_time(), time.perf_counter()
                m.lessons(qs[2 * i], k=5)
                les.append((time.perf_counter() - t0) * 1000)
                les_cpu.append((time.process_time() - c0) * 1000)
                c0, t0 = time.process_time(), time.perf_counter()
                m.context(qs[2 * i + 1])
                ctx.append((time.perf_counter() - t0) * 1000)
                ctx_cpu.append((time.process_time() - c0) * 1000)
            emb.charge_model = False
            out["sizes"][label] = {
                "rows": n,
                "lessons_by_status": dict(m.stats().lessons),
                "consolidate_seconds": consolidate_s,
                "cached_store": bool(info.get("cached")),
                "lessons_ms": dict(_pct(les), cpu_p50=round(statistics.median(les_cpu), 3)),
                "context_ms": dict(_pct(ctx), cpu_p50=round(statistics.median(ctx_cpu), 3)),
            }
            m.close()
    return out


def spool_drain(n: int) -> dict[str, Any]:
    """Records/s of ``Mimir.ingest`` over ``n`` spooled records, with the real MiniLM embedder
    (what a long-lived process does with what hooks captured), in a temporary home."""
    from mimir_core import Mimir
    from mimir_core.ingest import spool

    from .synthetic import make_experiences

    with tempfile.TemporaryDirectory(prefix="mimir-bench-spool-") as tmp:
        m = Mimir(Path(tmp) / "home", auto_consolidate=False)
        m.recall("warm up the model and open the store")
        items = make_experiences(n, seed=21)
        t0 = time.perf_counter()
        for i, it in enumerate(items):
            rec = {k: v for k, v in it.items() if v != ""}
            spool.append(m.spool_dir, dict(rec, idempotency_key=f"bench-drain-{i}"))
        append_s = time.perf_counter() - t0
        c0, t0 = time.process_time(), time.perf_counter()
        report = m.ingest()
        drain_s = time.perf_counter() - t0
        drain_cpu = time.process_time() - c0
        ingested = report.ingested
        m.close()
    return {
        "records": n,
        "ingested": ingested,
        "append_us_per_record": round(1e6 * append_s / n, 1),
        "drain_seconds": round(drain_s, 2),
        "drain_records_per_s": round(ingested / drain_s, 1) if drain_s else None,
        "drain_records_per_cpu_s": round(ingested / drain_cpu, 1) if drain_cpu else None,
        "embedder": "fastembed MiniLM (real)",
    }


# -- the runner ------------------------------------------------------------------------------


def _commands(quick: bool, with_learn: bool, out: Path) -> dict[str, tuple[list[str], str]]:
    """Each part's command and how it hands back its JSON (``file`` or ``stdout``)."""
    m = [PY, "-m"]
    f = {name: str(out / f"{name}.json") for name in PARTS}
    from .learning_mimir_learn import learn_python

    # The mimir_learn arm runs whenever its venv exists (--with-mimir-learn: made if missing).
    learn = ["--with-mimir-learn"] if with_learn or learn_python(create=False) else []
    return {
        "learning": (
            [
                *m,
                "bench.learning",
                "--json",
                f["learning"],
                *(["--quick"] if quick else []),
                *learn,
            ],
            "file",
        ),
        "perf": (
            [*m, "bench.perf", "--json", f["perf"], "--out-dir", str(out)]
            + (["--quick"] if quick else []),
            "file",
        ),
        "lessons_latency": (
            [*m, "bench.run", "--part", "lessons_latency", "--json", f["lessons_latency"]]
            + (["--sizes", "2k", "--queries", "10"] if quick else []),
            "file",
        ),
        "spool_drain": (
            [*m, "bench.run", "--part", "spool_drain", "--json", f["spool_drain"]]
            + (["--records", "200"] if quick else []),
            "file",
        ),
        "hook_cost": (
            [*m, "bench.hook_cost", "--json", "--rounds", "5" if quick else "30"],
            "stdout",
        ),
        "mcp_startup": (
            [*m, "bench.mcp_startup", "--json", f["mcp_startup"], "--runs", "2" if quick else "7"],
            "file",
        ),
        "consolidation": (
            [*m, "bench.lessons", "--json", f["consolidation"]]
            + (["--skip-quality", "--sizes", "1000"] if quick else []),
            "file",
        ),
        "hosts": (
            [*m, "bench.hosts", "--json", "--out", f["hosts"], *(["--quick"] if quick else [])],
            "file",
        ),
    }


def run_part(cmd: list[str], kind: str, path: Path) -> dict[str, Any]:
    """Run one part; its JSON, seconds, exit code and peak RSS (MB) of its process."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out if kind == "stdout" else subprocess.DEVNULL)
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    part: dict[str, Any] = {
        "command": " ".join(["python", *cmd[1:]]),
        "exit": proc.returncode,
        "seconds": round(time.perf_counter() - t0, 1),
        "rss_peak_mb": round(usage.ru_maxrss / 1024, 1),  # Linux: kilobytes
        "result": None,
    }
    try:
        part["result"] = json.loads(text if kind == "stdout" else path.read_text())
    except (OSError, ValueError) as exc:
        part["error"] = f"no JSON result ({type(exc).__name__}: {exc})"
    return part


def _get(d: Any, *keys: Any) -> Any:
    for k in keys:
        if isinstance(d, dict) and k in d:
            d = d[k]
        else:
            return None
    return d


def _ratio(a: Any, b: Any) -> float | None:
    return (
        round(a / b, 2)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b
        else None
    )


def summarise(parts: dict[str, Any]) -> dict[str, Any]:
    """The headline figures (medians, p50/p95 and ratios) from the parts' own JSON."""
    r = {name: (p or {}).get("result") or {} for name, p in parts.items()}
    s: dict[str, Any] = {}
    fig = r.get("learning", {}).get("figures")
    if fig:
        s["learning"] = {
            "arms": {a: v["success"] for a, v in fig["arms"].items()},
            "lift": fig["lift"],
            "oracle_success": fig["oracle_success"],
            "repeat_mistake_ratio_warm_cold": fig["repeat_mistake_ratio_warm_cold"],
            "calibration_ece": fig["calibration"]["ece"],
            "calibration_ece_mimir_learn": _get(fig, "calibration_mimir_learn", "ece"),
            "lesson_precision": fig["lessons"]["precision"],
            "tasks_until_warm_beats_cold": fig["tasks_until_warm_beats_cold"],
        }
    perf = r.get("perf", {})
    if perf.get("recall"):
        lat: dict[str, Any] = {}
        for size in perf.get("load", {}):
            row: dict[str, Any] = {}
            for what in ("recall", "recommend"):
                mine = _get(perf, what, f"mimir@{size}")
                if mine is None:
                    continue
                row[what] = {"p50_ms": mine["p50"], "p95_ms": mine["p95"]}
                floor = _get(perf, what, f"numpy@{size}", "p50")
                learn = _get(perf, what, f"mimir_learn@{size}", "p50")
                if floor is not None:
                    row[what]["numpy_p50_ms"] = floor
                    row[what]["vs_numpy"] = _ratio(mine["p50"], floor)
                if learn is not None:
                    row[what]["mimir_learn_p50_ms"] = learn
                    row[what]["mimir_learn_over_mimir"] = _ratio(learn, mine["p50"])
            ll = _get(r, "lessons_latency", "sizes", size)
            if ll:
                row["lessons"] = {
                    "p50_ms": ll["lessons_ms"]["p50"],
                    "p95_ms": ll["lessons_ms"]["p95"],
                }
                row["context"] = {
                    "p50_ms": ll["context_ms"]["p50"],
                    "p95_ms": ll["context_ms"]["p95"],
                }
            if row:
                lat[size] = row
        s["latency"] = lat
        s["disk_mb_per_100k"] = {
            size: round(v["disk_mb"] * 100_000 / v["rows"], 1)
            for size, v in perf.get("load", {}).items()
            if v.get("disk_mb") and v.get("rows")
        }
    hook = r.get("hook_cost", {})
    if hook.get("bare"):
        s["hook"] = {
            "bare_p50_ms": hook["bare"]["p50_ms"],
            "capture_p50_ms": hook["capture"]["p50_ms"],
            "capture_over_bare": hook["capture_over_bare"],
            "capture_over_bare_cpu": hook["capture_over_bare_cpu"],
            "inject_p50_ms": hook["inject"]["p50_ms"],
        }
    drain = r.get("spool_drain", {})
    if drain.get("drain_records_per_s") is not None:
        s["spool_drain_records_per_s"] = drain["drain_records_per_s"]
    mcp = r.get("mcp_startup", {}).get("results", {})
    if mcp.get("mimir-mcp"):
        s["mcp"] = {
            "tools_list_median_ms": round(mcp["mimir-mcp"]["tools_list"]["median"], 1),
            "python_pass_median_ms": round(mcp["python -c pass"]["exit"]["median"], 1),
            "first_call_median_ms": round(mcp["mimir-mcp"]["first_call"]["median"], 1),
        }
    cost = r.get("consolidation", {}).get("cost") or []
    if cost:
        s["consolidation_seconds_per_1000"] = {
            str(c["experiences"]): c["full_seconds_per_1000"] for c in cost
        }
    s["rss_peak_mb"] = {name: p["rss_peak_mb"] for name, p in parts.items() if p}
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small configurations (a few minutes)")
    ap.add_argument("--only", help=f"comma-separated parts of: {', '.join(PARTS)}")
    ap.add_argument("--skip", help="comma-separated parts to leave out")
    ap.add_argument(
        "--with-mimir-learn",
        action="store_true",
        help="make mimir-learn 0.1.5's cached venv if missing (pip) for its learning arm",
    )
    ap.add_argument(
        "-o", "--out", type=Path, help="the combined JSON (default: bench/results/run-<stamp>.json)"
    )
    ap.add_argument("--part", choices=["lessons_latency", "spool_drain"], help=argparse.SUPPRESS)
    ap.add_argument("--json", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="10k,100k,1m", help=argparse.SUPPRESS)
    ap.add_argument("--queries", type=int, default=40, help=argparse.SUPPRESS)
    ap.add_argument("--records", type=int, default=1000, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.part:  # one measurement of this module, in its own process
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from .synthetic import parse_size

        if args.part == "lessons_latency":
            sizes = [parse_size(x) for x in args.sizes.split(",") if x.strip()]
            res = lessons_latency(sizes, args.queries, seed=7)
        else:
            res = spool_drain(args.records)
        text = json.dumps(res, indent=1)
        if args.json:
            args.json.write_text(text + "\n")
        else:
            print(text)
        return 0

    parts = list(PARTS)
    if args.only:
        wanted = [p.strip() for p in args.only.split(",") if p.strip()]
        bad = [p for p in wanted if p not in PARTS]
        if bad:
            ap.error(f"unknown part(s) {', '.join(bad)}; choose from {', '.join(PARTS)}")
        parts = [p for p in PARTS if p in wanted]
    if args.skip:
        parts = [p for p in parts if p not in {x.strip() for x in args.skip.split(",")}]

    from .synthetic import machine_info

    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    out_path = args.out or RESULTS / f"run-{stamp}{'-quick' if args.quick else ''}.json"
    result: dict[str, Any] = {
        "bench": "mimir run",
        "mode": "quick" if args.quick else "full",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:]),
        "seeds": {"learning": "0..3 (quick) / 0..4 (full)", "perf": 7, "lessons_latency": 7},
        "machine": machine_info(),
        "versions": versions(),
        "parts": {},
    }
    progress = Progress(len(parts))
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="mimir-bench-run-") as tmp:
            cmds = _commands(args.quick, args.with_mimir_learn, Path(tmp))
            for name in parts:
                cmd, kind = cmds[name]
                progress.start(name)
                part = run_part(cmd, kind, Path(tmp) / f"{name}.json")
                result["parts"][name] = part
                note = "ok" if part["exit"] == 0 and part["result"] is not None else "FAILED"
                progress.finish(
                    f"{name}: {note}, {part['seconds']} s, RSS {part['rss_peak_mb']} MB"
                )
    finally:
        progress.close()
    learning = _get(result, "parts", "learning", "result", "config")
    if learning:
        result["seeds"]["learning"] = learning["seeds"]
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    result["summary"] = summarise(result["parts"])
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(json.dumps(result["summary"], indent=1))
    print(f"saved {out_path}; the page: python -m bench.scoreboard")
    failed = [n for n, p in result["parts"].items() if p["exit"] != 0 or p["result"] is None]
    if failed:
        print(f"failed parts: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
