"""Soak: 100k records through the capture spool, with the store's upkeep left to itself.

    python -m bench.soak                      # 100k records, a checkpoint every 10k
    python -m bench.soak --quick              # 10k records, a checkpoint every 1k
    python -m bench.soak --n 50k --embedder fastembed

What it does: records are appended to the spool exactly as hook processes write them
(:func:`mimir_core.ingest.spool.append`, one ``O_APPEND`` line per record, each with the
idempotency key a hook would give it), and drained in batches with :meth:`Mimir.ingest`, as the MCP
server's upkeep thread and ``mimir ingest`` do. Nothing else touches the store: compaction, the
vector and key indexes and old-version cleanup are whatever the store does by itself after writes.

At each checkpoint it measures:

* **recall** p50/p95 (wall) and the p50 of process CPU time over a fixed query set
  (``Mimir.recall(q, k=5)``, two rounds; the same queries at every checkpoint, so the query
  embedding is cached after the first: the figure is the store's search and ranking);
* **drain** throughput of the segment (records per second of ``ingest``, upkeep included, and
  per CPU-second of this process: on a shared machine the CPU figures are the steadier ones);
* **disk**: bytes of the store directory and bytes per record;
* **table versions** kept and **fragments** of the experiences table (and versions of every
  table), which grow without bound when compaction or cleanup stop working;
* **RSS** of this process (current and peak).

At the end every record must be stored exactly once (count, distinct keys, nothing rejected).
``flat`` compares the last checkpoint with the first one that has the vector index (recall p95)
and with the first checkpoint (bytes per record, versions). Results go to
``bench/results/soak-<stamp>.json`` with the seed, versions and machine.

Embedders: ``synthetic`` (default; ``bench.synthetic.SyntheticEmbedder``: realistic clustered
384-d vectors without model cost, so 100k records fit in minutes), ``hash`` (the tests'
keyword embedder) or ``fastembed`` (the real MiniLM; ~2 texts per record, ~150 texts/s here).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("LANCE_LOG", "error")
os.environ.setdefault("LANCEDB_LOG", "error")

from bench.synthetic import (
    SyntheticEmbedder,
    log,
    machine_info,
    make_experiences,
    make_queries,
    parse_size,
    pct,
    timed2,
)
from bench.versions import versions
from mimir_core import Mimir
from mimir_core.ingest import spool
from mimir_core.store.core import EXPERIENCES, TABLES

RESULTS = Path(__file__).resolve().parent / "results"


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MB."""
    current = 0.0
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                current = int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return round(current, 1), round(peak, 1)


def table_versions(m: Mimir) -> dict[str, int]:
    """How many versions each table keeps on disk."""
    return {name: len(m.store.table(name).list_versions()) for name in TABLES}


def spool_lines(start: int, count: int, seed: int) -> list[dict[str, Any]]:
    """The records hooks would spool for experiences ``start .. start+count``."""
    out = []
    for i, item in enumerate(make_experiences(count, seed, start)):
        n = start + i
        out.append(
            {
                **item,
                "source": "claude-code",
                "scope": f"repo-{n % 7}",
                "session_id": f"soak-session-{n // 50}",
                "created_at": time.time(),
                "recalled_lesson_ids": [],
                "idempotency_key": f"claude-code:soak-session-{n // 50}:fail:{n}",
            }
        )
    return out


def checkpoint(
    m: Mimir,
    done: int,
    queries: list[str],
    drain: tuple[float, float],
    drained: int,
    started: float,
) -> dict[str, Any]:
    drain_s, drain_cpu_s = drain
    lat = [timed2(lambda q=q: m.recall(q, k=5, scope="*")) for _round in range(2) for q in queries]
    stats = m.stats()
    disk = m.store.disk_bytes() or 0
    cur, peak = rss_mb()
    vers = table_versions(m)
    return {
        "records": done,
        "stored": stats.experiences,
        "recall_ms": pct(lat),
        "drain_records_per_s": round(drained / drain_s, 1) if drain_s else None,
        "drain_records_per_cpu_s": round(drained / drain_cpu_s, 1) if drain_cpu_s else None,
        "disk_bytes": disk,
        "disk_bytes_per_record": round(disk / max(stats.experiences, 1), 1),
        "experiences_versions": vers[EXPERIENCES],
        "versions_all_tables": sum(vers.values()),
        "fragments": stats.fragments,
        "vector_index": m.store._has_vector_index(EXPERIENCES),
        "rss_mb": cur,
        "rss_peak_mb": peak,
        "elapsed_s": round(time.perf_counter() - started, 1),
    }


def run(args: argparse.Namespace, home: Path, save: Any) -> dict[str, Any]:
    """The soak on a store in ``home``; ``save(points)`` after each checkpoint."""
    if args.embedder == "synthetic":
        emb: Any = SyntheticEmbedder()
    else:
        emb = args.embedder
    m = Mimir(home, embedder=emb, auto_consolidate=False)
    m.stats()  # create the store
    directory = m.spool_dir
    queries = make_queries(args.queries, args.seed + 99)
    points: list[dict[str, Any]] = []
    started = time.perf_counter()
    done, seg_drained, rejected = 0, 0, 0
    seg_drain_s = seg_drain_cpu = 0.0
    while done < args.n:
        count = min(args.batch, args.n - done)
        for rec in spool_lines(done, count, args.seed):
            spool.append(directory, rec)  # one O_APPEND line per record, as a hook does
        t0, c0 = time.perf_counter(), time.process_time()
        report = m.ingest()
        seg_drain_s += time.perf_counter() - t0
        seg_drain_cpu += time.process_time() - c0
        seg_drained += report.ingested
        rejected += report.rejected
        done += count
        if done % args.every == 0 or done == args.n:
            drain = (seg_drain_s, seg_drain_cpu)
            point = checkpoint(m, done, queries, drain, seg_drained, started)
            points.append(point)
            log(
                f"{done:>7} records: recall p50 {point['recall_ms']['p50']:.1f} ms "
                f"p95 {point['recall_ms']['p95']:.1f} ms (cpu p50 "
                f"{point['recall_ms']['cpu_p50']:.1f} ms), drain "
                f"{point['drain_records_per_s']} rec/s ({point['drain_records_per_cpu_s']} per "
                f"cpu-s), disk {point['disk_bytes'] / 1e6:.1f} MB "
                f"({point['disk_bytes_per_record']:.0f} B/rec), versions "
                f"{point['experiences_versions']} (all {point['versions_all_tables']}), "
                f"fragments {point['fragments']}, RSS {point['rss_mb']:.0f} MB"
            )
            seg_drain_s, seg_drain_cpu, seg_drained = 0.0, 0.0, 0
            save(points)
    keys = m.store.column(EXPERIENCES, ["idem_key"]).column("idem_key").to_pylist()
    integrity = {
        "appended": args.n,
        "stored": len(keys),
        "distinct_keys": len(set(keys)),
        "rejected": rejected,
        "left_in_spool": spool.has_pending(directory),
    }
    return {"checkpoints": points, "integrity": integrity}


def flatness(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Last checkpoint against the first indexed one (latency) and the first one (disk)."""
    if not points:
        return {}
    first, last = points[0], points[-1]
    indexed = next((p for p in points if p["vector_index"]), first)
    cpu = "cpu_p50"
    return {
        "recall_p95_last_over_first_indexed": round(
            last["recall_ms"]["p95"] / max(indexed["recall_ms"]["p95"], 1e-9), 2
        ),
        "recall_p50_last_over_first_indexed": round(
            last["recall_ms"]["p50"] / max(indexed["recall_ms"]["p50"], 1e-9), 2
        ),
        "recall_cpu_p50_last_over_first_indexed": round(
            last["recall_ms"][cpu] / max(indexed["recall_ms"][cpu], 1e-9), 2
        ),
        "disk_bytes_per_record_last_over_first": round(
            last["disk_bytes_per_record"] / max(first["disk_bytes_per_record"], 1e-9), 2
        ),
        "max_experiences_versions": max(p["experiences_versions"] for p in points),
        "max_fragments": max(p["fragments"] for p in points),
        "first_indexed_at": indexed["records"] if indexed["vector_index"] else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=parse_size, default=100_000, help="records (default 100k)")
    parser.add_argument("--every", type=parse_size, default=None, help="checkpoint interval")
    parser.add_argument("--batch", type=int, default=2000, help="records spooled per drain")
    parser.add_argument("--queries", type=int, default=50, help="fixed recall queries")
    parser.add_argument("--quick", action="store_true", help="10k records, checkpoints every 1k")
    parser.add_argument(
        "--embedder", choices=["synthetic", "hash", "fastembed"], default="synthetic"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--home", type=Path, help="Mimir home (default: a temp dir, removed)")
    parser.add_argument("--out-dir", type=Path, default=RESULTS, help="results directory")
    args = parser.parse_args(argv)
    if args.quick:
        args.n = 10_000
    args.every = args.every or (1000 if args.n <= 10_000 else 10_000)
    args.batch = min(args.batch, args.every)
    if args.every % args.batch:
        parser.error("--every must be a multiple of --batch")
    result: dict[str, Any] = {
        "bench": "soak",
        "seed": args.seed,
        "n": args.n,
        "every": args.every,
        "batch": args.batch,
        "queries": args.queries,
        "embedder": args.embedder,
        "versions": versions(),
        "machine": machine_info(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    log(f"soak: {args.n} records, batches of {args.batch}, checkpoints every {args.every}")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / f"soak-{time.strftime('%Y%m%d-%H%M%S')}.json"

    def save(points: list[dict[str, Any]]) -> None:  # a partial result survives an interrupt
        out.write_text(json.dumps({**result, "checkpoints": points, "partial": True}, indent=1))

    if args.home:
        result.update(run(args, args.home, save))
    else:
        with tempfile.TemporaryDirectory(prefix="mimir-soak-") as tmp:
            result.update(run(args, Path(tmp) / "home", save))
    result["flat"] = flatness(result["checkpoints"])
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out.write_text(json.dumps(result, indent=1))
    log(f"integrity: {result['integrity']}")
    log(f"flat: {result['flat']}")
    log(f"wrote {out}")
    ok = result["integrity"]
    lost = ok["stored"] != ok["appended"] or ok["distinct_keys"] != ok["stored"]
    return 1 if lost or ok["rejected"] or ok["left_in_spool"] else 0


if __name__ == "__main__":
    sys.exit(main())
