"""The write-path comparison of ``bench.perf``: Mimir beside mem0, in one run, on one machine.

mem0 (``mem0ai`` pinned to :data:`MEM0_VERSION`) is what many users pick for agent memory. It
runs as a new user would run it locally without an LLM: an embedded on-disk qdrant collection,
its SQLite history, ``add(..., infer=False)``. It is installed into its own cached venv
(:data:`MEM0_VENV`, made with ``python -m venv`` + pip on first use; never in quick mode) and
driven through ``bench/_mem0_worker.py``; Mimir's side runs in a process of its own too
(``bench/_mimir_peer_worker.py``), so each one's peak RSS and disk are its own.

Both get the same items (``bench.synthetic`` experiences; mem0 stores each task as one memory)
and the same vectors, handed over by text (no model cost: the store's own write cost), and each
phase runs in fresh processes, the two systems' calls interleaved in chunks:

* **one by one**: ``n`` single ``record`` / ``add`` calls: p50 / p95 over the first and the last
  1,000 (flatness), items/s, peak RSS, disk right after and (Mimir) once settled;
* **search** on that store: ``recall(k=5)`` / ``search(limit=5)`` p50 / p95;
* **bulk**: ``n`` items in calls of :data:`BULK` (``record_many`` / ``add`` of a message list):
  items/s and peak RSS;
* **bulk with the real MiniLM** on :data:`REAL_ITEMS` items (each embeds with the same model
  file, loaded before the clock starts; Mimir embeds task and action, each distinct text of a
  call once, mem0 the task): items/s, beside the embedder alone (texts/s of Mimir's embedder
  on the same texts: the ceiling); peak RSS, and at the end private memory (``RssAnon``)
  apart from mapped files' pages (``RssFile``: shared library code, which two Lance engines
  double on Mimir's side).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.synthetic import SyntheticEmbedder, log, make_experiences, make_queries, pct

MEM0_VERSION = "2.2.1"
MEM0_VENV = Path.home() / ".cache" / "mimir-bench" / f"mem0ai-{MEM0_VERSION}"
MEM0_PACKAGES = [f"mem0ai=={MEM0_VERSION}", "fastembed==0.9.1"]
HERE = Path(__file__).resolve().parent
MEM0_WORKER = HERE / "_mem0_worker.py"
MIMIR_WORKER = HERE / "_mimir_peer_worker.py"
#: Items per bulk call (``record_many`` / ``add`` of a message list).
BULK = 100
#: Items of the real-model bulk measure (the model dominates: a sample gives the ratio).
REAL_ITEMS = 1_000
#: Single calls per chunk before the other system's turn.
CHUNK = 500


def ensure_mem0_venv(create: bool) -> Path | None:
    """The cached venv with mem0 (made on first use); ``None`` if absent and not made."""
    py = MEM0_VENV / "bin" / "python"
    marker = MEM0_VENV / ".bench-ok"
    if marker.exists() and py.exists():
        return py
    if not create:
        return None
    base = getattr(sys, "_base_executable", sys.executable)
    log(f"creating {MEM0_VENV} ({base} -m venv + pip install {' '.join(MEM0_PACKAGES)})")
    shutil.rmtree(MEM0_VENV, ignore_errors=True)
    MEM0_VENV.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([base, "-m", "venv", str(MEM0_VENV)], check=True)
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", *MEM0_PACKAGES],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    marker.write_text(" ".join(MEM0_PACKAGES) + "\n")
    return py


class Worker:
    """A worker process spoken to in JSON lines (see the two worker scripts)."""

    def __init__(self, python: Path | str, script: Path, isolated: bool) -> None:
        env = {k: v for k, v in os.environ.items() if not (isolated and k.startswith("PYTHON"))}
        env["HF_HUB_OFFLINE"] = "1"
        self.proc = subprocess.Popen(
            [str(python), *(["-I"] if isolated else []), str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=str(HERE.parent),
        )

    def call(self, **req: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.proc.args} exited")
        out: dict[str, Any] = json.loads(line)
        if "error" in out:
            raise RuntimeError(f"worker {self.proc.args[-1]}: {out['error']}")
        return out

    def close(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=600)
        except Exception:
            self.proc.kill()


def _hand_over(work: Path, tag: str, items: list[dict[str, Any]], emb: SyntheticEmbedder) -> dict:
    """Files of the items and of the vectors of every text either system embeds."""
    rows = work / f"{tag}.jsonl"
    rows.write_text("".join(json.dumps(it) + "\n" for it in items), encoding="utf-8")
    texts = list(dict.fromkeys([it["task"] for it in items] + [it["action"] for it in items]))
    (work / f"{tag}.texts.json").write_text(json.dumps(texts), encoding="utf-8")
    np.save(work / f"{tag}.npy", emb.vectors(texts))
    return {
        "rows": str(rows),
        "texts": str(work / f"{tag}.texts.json"),
        "vectors": str(work / f"{tag}.npy"),
    }


def _pair(mem0_py: Path, work: Path, tag: str, model_dir: Path, real: bool) -> dict[str, Worker]:
    workers = {
        "mimir": Worker(sys.executable, MIMIR_WORKER, isolated=False),
        "mem0": Worker(mem0_py, MEM0_WORKER, isolated=True),
    }
    for name, w in workers.items():
        w.call(op="open", path=str(work / f"{name}-{tag}"), model_dir=str(model_dir), real=real)
    return workers


def _interleaved(workers: dict[str, Worker], files: dict, n: int, batch: int) -> dict[str, Any]:
    """Feed both systems the same items in chunks, alternating; per-call ms and seconds."""
    lines = Path(files["rows"]).read_text(encoding="utf-8").splitlines(keepends=True)
    out: dict[str, dict[str, Any]] = {k: {"ms": [], "seconds": 0.0} for k in workers}
    step = max(CHUNK, batch)
    for turn, at in enumerate(range(0, n, step)):
        part = Path(files["rows"]).with_suffix(f".{at}.jsonl")
        part.write_text("".join(lines[at : at + step]), encoding="utf-8")
        order = list(workers) if turn % 2 == 0 else list(workers)[::-1]
        for name in order:
            got = workers[name].call(op="add", **{**files, "rows": str(part)}, batch=batch)
            out[name]["ms"].extend(got["ms"])
            out[name]["seconds"] += got["seconds"]
        part.unlink()
    return out


def run(
    n: int,
    *,
    work: Path,
    emb: SyntheticEmbedder,
    model_dir: Path,
    seed: int,
    queries: int,
    mem0_py: Path,
) -> dict[str, Any]:
    """The comparison at ``n`` items (see the module docstring)."""
    result: dict[str, Any] = {"items": n, "bulk_batch": BULK}
    work.mkdir(parents=True, exist_ok=True)
    items = make_experiences(n, seed + 900, 50_000_000)
    files = _hand_over(work, f"peer-{n}", items, emb)

    log(f"peer: {n:,} single writes each, mimir and mem0 interleaved")
    workers = _pair(mem0_py, work, f"single-{n}", model_dir, real=False)
    try:
        single = _interleaved(workers, files, n, 1)
        qs = make_queries(queries, seed + 901)
        qv = emb.vectors(qs)
        payload = [{"text": q, "vector": qv[i].tolist()} for i, q in enumerate(qs)]
        for name, w in workers.items():
            ms = single[name]["ms"]
            head, tail = ms[: min(1000, len(ms))], ms[-min(1000, len(ms)) :]
            after = w.call(op="stats")
            w.call(op="settle")
            w.call(op="search", queries=payload[:5], k=5)  # warm-up
            search = w.call(op="search", queries=payload, k=5)["ms"]
            w.call(op="settled")
            settled = w.call(op="stats")
            result[name] = {
                "single_ms": pct(ms),
                "single_ms_first_1k": pct(head),
                "single_ms_last_1k": pct(tail),
                "single_flatness": round(pct(tail)["p50"] / pct(head)["p50"], 3),
                "single_items_per_s": round(n / single[name]["seconds"], 1),
                "single_peak_rss_mb": round(after["peak_rss_mb"], 1),
                "disk_mb_right_after": round(after["disk_bytes"] / 1e6, 1),
                "disk_mb_settled": round(settled["disk_bytes"] / 1e6, 1),
                # upkeep commits lost to a concurrent commit (Mimir: tried again, see
                # mimir_core/store/compaction.py)
                "upkeep_conflicts": after.get("upkeep_conflicts"),
                "search_ms": pct(search),
            }
    finally:
        for w in workers.values():
            w.close()

    log(f"peer: {n:,} items in calls of {BULK}, interleaved")
    workers = _pair(mem0_py, work, f"bulk-{n}", model_dir, real=False)
    try:
        bulk = _interleaved(workers, files, n, BULK)
        for name, w in workers.items():
            result[name]["bulk_items_per_s"] = round(n / bulk[name]["seconds"], 1)
            result[name]["bulk_peak_rss_mb"] = round(w.call(op="stats")["peak_rss_mb"], 1)
    finally:
        for w in workers.values():
            w.close()

    k = min(REAL_ITEMS, n)
    log(f"peer: {k:,} items in calls of {BULK} with the real MiniLM, interleaved")
    real_items = make_experiences(k, seed + 902, 60_000_000)
    real_files = _hand_over(work, f"peer-real-{k}", real_items, emb)
    workers = _pair(mem0_py, work, f"real-{k}", model_dir, real=True)
    try:
        real = _interleaved(workers, {"rows": real_files["rows"]}, k, BULK)
        for name, w in workers.items():
            result[name]["bulk_real_items_per_s"] = round(k / real[name]["seconds"], 1)
            st = w.call(op="stats")
            result[name]["bulk_real_peak_rss_mb"] = round(st["peak_rss_mb"], 1)
            result[name]["bulk_real_rss_anon_mb"] = round(st["rss_anon_mb"], 1)
            result[name]["bulk_real_rss_file_mb"] = round(st["rss_file_mb"], 1)
    finally:
        for w in workers.values():
            w.close()
    from mimir_core.embed.core import FastEmbedder

    fe = FastEmbedder(model_dir)
    texts = [it["task"] for it in real_items] + [it["action"] for it in real_items]
    t0 = time.perf_counter()
    for at in range(0, len(texts), 2 * BULK):
        fe.embed(texts[at : at + 2 * BULK])
    ceiling = len(texts) / (time.perf_counter() - t0)
    result["embed_only_texts_per_s"] = round(ceiling, 1)
    # Mimir embeds two texts per item: its ceiling in items/s is half the texts/s.
    result["mimir"]["bulk_real_share_of_ceiling"] = round(
        result["mimir"]["bulk_real_items_per_s"] / (ceiling / 2), 3
    )
    mi, m0 = result["mimir"], result["mem0"]
    result["ratios_mimir_over_mem0"] = {
        "single_p50_ms": round(mi["single_ms"]["p50"] / m0["single_ms"]["p50"], 3),
        "single_items_per_s": round(mi["single_items_per_s"] / m0["single_items_per_s"], 3),
        "bulk_items_per_s": round(mi["bulk_items_per_s"] / m0["bulk_items_per_s"], 3),
        "bulk_real_items_per_s": round(
            mi["bulk_real_items_per_s"] / m0["bulk_real_items_per_s"], 3
        ),
        "single_peak_rss": round(mi["single_peak_rss_mb"] / m0["single_peak_rss_mb"], 3),
        "bulk_peak_rss": round(mi["bulk_peak_rss_mb"] / m0["bulk_peak_rss_mb"], 3),
        "disk_right_after": round(mi["disk_mb_right_after"] / m0["disk_mb_right_after"], 3),
        "search_p50_ms": round(mi["search_ms"]["p50"] / m0["search_ms"]["p50"], 3),
    }
    return result
