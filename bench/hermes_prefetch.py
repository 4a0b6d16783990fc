"""What the Hermes memory provider costs Hermes per turn: prefetch, sync_turn, first turn.

    python -m bench.hermes_prefetch                 # labelled set + 2,000 synthetic, 3 rounds
    python -m bench.hermes_prefetch --extra 20000 --rounds 5 --json out.json
    python -m bench.hermes_prefetch --quick     # the CI smoke (a third of the set, 1 round)

Hermes calls ``prefetch(query)`` before every turn in a thread and gives up after 8 s;
``sync_turn`` runs after the turn on Hermes' background worker. Measured through the provider's
public methods (``mimir_integrations.hermes.MimirMemoryProvider``), with the real MiniLM model:

* **first turn**: ``initialize()`` then the first ``prefetch`` at once (the store and the model
  are still loading in the background: what the user waits for on the first turn);
* **prefetch, warm**: p50 / p95 / max over the labelled queries of ``bench/data`` (207 queries
  and 45 tasks, a fresh text each time) x rounds, and the share that got lessons; beside it the
  facade's own ``Mimir.context`` on the same queries (the provider's overhead is the difference);
* **sync_turn**: a 12-call turn (failures, fixes, reads) captured and spooled, p50 / p95.

The store holds the 376 labelled experiences, ``--extra`` synthetic ones, and the lessons one
``consolidate(force=True)`` learns from them. The machine is shared: compare ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
DATA = ROOT / "data" / "retrieval_set.json"
TARGET_P95_MS = 100.0


def pct(values: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / max of ``values`` in milliseconds."""
    ms = sorted(v * 1000 for v in values)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return {"p50": statistics.median(ms), "p95": p95, "max": ms[-1], "n": len(ms)}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def turn_messages(i: int) -> list[dict[str, Any]]:
    """A realistic Hermes turn: 12 tool calls, two failures, reads, the fix."""

    def call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        fn = {"name": name, "arguments": json.dumps(args)}
        return {"role": "assistant", "content": None, "tool_calls": [{"id": cid, "function": fn}]}

    def result(cid: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": cid, "content": json.dumps(body)}

    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are Hermes."},
        {"role": "user", "content": f"get the payments integration suite green (run {i})"},
    ]
    steps = [
        ("terminal", {"command": "pytest tests/integration -x"}, {"exit_code": 1}),
        ("read_file", {"path": "alembic.ini"}, {"content": "[alembic]\n" * 40}),
        ("search_files", {"pattern": "orders"}, {"matches": ["db/models.py"] * 20}),
        ("terminal", {"command": "alembic current"}, {"exit_code": 0}),
        ("terminal", {"command": "alembic upgrade head"}, {"exit_code": 255}),
        ("read_file", {"path": "migrations/env.py"}, {"content": "import x\n" * 80}),
        ("patch", {"path": "migrations/env.py", "old_string": "a", "new_string": "b"}, {}),
        ("terminal", {"command": "alembic upgrade head"}, {"exit_code": 0}),
        ("terminal", {"command": "pytest tests/integration -x"}, {"exit_code": 0}),
        ("terminal", {"command": "git status"}, {"exit_code": 0}),
        ("terminal", {"command": "git diff --stat"}, {"exit_code": 0}),
        ("todo", {"todos": [{"id": 1, "content": "done"}]}, {}),
    ]
    for n, (tool, args, extra) in enumerate(steps):
        cid = f"call_{i}_{n}"
        body = {"output": "E   UndefinedTable: relation orders does not exist\n" * 30, **extra}
        if "exit_code" not in extra:
            body = {"success": True, **extra}
        msgs += [call(cid, tool, args), result(cid, body)]
    msgs.append({"role": "assistant", "content": "All green now."})
    return msgs


def build_store(hermes_home: Path, extra: int, every: int = 1) -> dict[str, Any]:
    """The labelled experiences (every ``every``-th one) plus ``extra`` synthetic ones."""
    from mimir_core import Mimir

    data = json.loads(DATA.read_text(encoding="utf-8"))
    m = Mimir(hermes_home / "mimir", embedder="fastembed", auto_consolidate=False)
    items = [
        {k: e[k] for k in ("task", "action", "outcome", "reason", "context") if k in e}
        for e in data["experiences"][::every]
    ]
    if extra:
        sys.path.insert(0, str(ROOT.parent))
        from bench.synthetic import make_experiences

        items += make_experiences(extra, seed=7)
    t_load, _ = timed(
        lambda: [m.record_many(items[i : i + 500]) for i in range(0, len(items), 500)]
    )
    t_cons, report = timed(lambda: m.consolidate(force=True))
    active = len(m.list_lessons(status="active", limit=1000))
    m.close()
    return {
        "experiences": len(items),
        "load_s": round(t_load, 1),
        "consolidate_s": round(t_cons, 1),
        "lessons_active": active,
        "admitted": len(report.admitted),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--extra", type=int, default=2000, help="synthetic experiences to add")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke size: a third of the set, 1 round, 24 queries, 6 turns",
    )
    args = ap.parse_args(argv)
    turns = 60
    if args.quick:
        args.extra, args.rounds, turns = 0, 1, 6

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["MIMIR_AUTO_CONSOLIDATE"] = "0"
    os.environ.pop("MIMIR_HOME", None)
    os.environ.pop("MIMIR_STORE_URI", None)
    from mimir_core import Mimir
    from mimir_integrations.hermes import MimirMemoryProvider

    data = json.loads(DATA.read_text(encoding="utf-8"))
    queries = [q["query"] for q in data["queries"]] + [r["task"] for r in data["recommend"]]
    if args.quick:
        queries = queries[::10][:24]  # spread over the set: both kinds of query
    result: dict[str, Any] = {"extra": args.extra, "rounds": args.rounds, "turns": turns}
    with tempfile.TemporaryDirectory(prefix="mimir-hermes-bench-") as tmp:
        hermes_home = Path(tmp) / "hermes"
        print(f"building the store (+{args.extra} synthetic experiences)...", file=sys.stderr)
        result["store"] = build_store(hermes_home, args.extra, every=3 if args.quick else 1)

        # first turn: initialize, then prefetch at once (store and model still loading)
        p = MimirMemoryProvider()
        t0 = time.perf_counter()
        p.initialize("bench", hermes_home=str(hermes_home), platform="cli")
        t_init = time.perf_counter() - t0
        t_first, first = timed(lambda: p.prefetch(queries[0]))
        result["first_turn_ms"] = {"initialize": t_init * 1000, "first_prefetch": t_first * 1000}
        result["first_prefetch_had_lessons"] = bool(first)

        m = Mimir(hermes_home / "mimir", embedder="fastembed", auto_consolidate=False)
        m.context("warm up")
        provider_t: list[float] = []
        facade_t: list[float] = []
        hits = 0
        for r in range(args.rounds):
            for i, q in enumerate(queries):
                text = f"{q} (round {r})"  # a fresh text: no embedding cache hit
                if (i + r) % 2:
                    dt, out = timed(lambda text=text: p.prefetch(text))
                    provider_t.append(dt)
                    hits += bool(out)
                    facade_t.append(timed(lambda text=text: m.context(text + " "))[0])
                else:
                    facade_t.append(timed(lambda text=text: m.context(text + " "))[0])
                    dt, out = timed(lambda text=text: p.prefetch(text))
                    provider_t.append(dt)
                    hits += bool(out)
        result["prefetch_warm_ms"] = pct(provider_t)
        result["context_direct_ms"] = pct(facade_t)
        result["prefetch_with_lessons"] = round(hits / len(provider_t), 3)

        sync_t = [
            timed(lambda i=i: p.sync_turn("x", "y", messages=turn_messages(i)))[0]
            for i in range(turns)
        ]
        result["sync_turn_ms"] = pct(sync_t)
        t_shutdown, _ = timed(p.shutdown)
        result["shutdown_ms"] = t_shutdown * 1000
        m.close()
        stored = Mimir(hermes_home / "mimir", embedder="fastembed", auto_consolidate=False)
        result["captured_experiences"] = stored.stats().experiences - result["store"]["experiences"]

    warm = result["prefetch_warm_ms"]
    result["target"] = f"warm prefetch p95 < {TARGET_P95_MS:g} ms (Hermes' budget: 8000 ms)"
    result["target_met"] = warm["p95"] < TARGET_P95_MS
    print(render(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


def render(r: dict[str, Any]) -> str:
    s = r["store"]

    def row(label: str, d: dict[str, float]) -> str:
        return f"| {label} | {d['p50']:.1f} | {d['p95']:.1f} | {d['max']:.1f} | {d['n']} |"

    lines = [
        f"store: {s['experiences']} experiences, {s['lessons_active']} active lessons "
        f"(load {s['load_s']} s, consolidate {s['consolidate_s']} s)",
        f"first turn: initialize {r['first_turn_ms']['initialize']:.0f} ms, first prefetch "
        f"{r['first_turn_ms']['first_prefetch']:.0f} ms (store and model loading; "
        f"{'with' if r['first_prefetch_had_lessons'] else 'without'} lessons)",
        "",
        "| call | p50 ms | p95 ms | max ms | n |",
        "|---|---|---|---|---|",
        row("prefetch (provider, warm)", r["prefetch_warm_ms"]),
        row("Mimir.context (direct)", r["context_direct_ms"]),
        row("sync_turn (12 tool calls)", r["sync_turn_ms"]),
        "",
        f"prefetches that returned lessons: {r['prefetch_with_lessons']:.0%}; "
        f"shutdown (flush): {r['shutdown_ms']:.0f} ms; "
        f"captured from {r['turns']} turns: {r['captured_experiences']} experiences",
        f"{r['target']}: {'met' if r['target_met'] else 'NOT met'}",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
