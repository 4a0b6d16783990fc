"""Mimir's side of ``bench.perf``'s write comparison with mem0, in a process of its own.

A process of its own so that its peak RSS and disk are Mimir's alone (the bench process holds
every store of the other sections). It answers the same JSON-line requests as
``bench/_mem0_worker.py``: ``open``, ``add`` (``record`` one by one, or ``record_many`` of
``batch`` items), ``search`` (``recall``), ``stats``, ``settle``. Vectors are handed over by
text (the bench's synthetic vectors: the store's cost without the model), or with ``real`` the
MiniLM model runs (Mimir's own :class:`~mimir_core.embed.core.FastEmbedder`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mimir_core import Mimir


class HandOver:
    """An :class:`~mimir_core.embed.core.Embedder` returning the vectors the bench handed over."""

    name = "bench-handover-384"
    dim = 384

    def __init__(self) -> None:
        self.vectors: dict[str, npt.NDArray[np.float32]] = {}

    def embed(self, texts: Any) -> npt.NDArray[np.float32]:
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)


STATE: dict[str, Any] = {}


def _disk(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def handle(req: dict[str, Any]) -> dict[str, Any]:
    op = req["op"]
    if op == "open":
        path = req["path"]
        emb: Any = HandOver()
        if req.get("real"):
            from mimir_core.embed.core import FastEmbedder

            emb = FastEmbedder(Path(req["model_dir"]))
            emb.embed(["warm up"])  # loaded before the clock starts, as mem0's worker does
        m = Mimir(path, embedder=emb, auto_consolidate=False)
        m.stats()  # open the store
        STATE.update(m=m, emb=emb, path=path)
        return {"ok": True, "version": version("mimir-lessons")}
    m, emb = STATE["m"], STATE["emb"]
    if op == "add":
        if req.get("vectors") and isinstance(emb, HandOver):
            texts = json.loads(Path(req["texts"]).read_text(encoding="utf-8"))
            vecs = np.load(req["vectors"])
            emb.vectors.update({t: vecs[i] for i, t in enumerate(texts)})
        with open(req["rows"], encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh]
        batch = int(req.get("batch", 1))
        ms = []
        start = time.perf_counter()
        for at in range(0, len(rows), batch):
            part = rows[at : at + batch]
            t0 = time.perf_counter()
            if batch == 1:
                m.record(**part[0])
            else:
                m.record_many(part)
            ms.append((time.perf_counter() - t0) * 1000)
        return {"seconds": time.perf_counter() - start, "ms": ms}
    if op == "search":
        if isinstance(emb, HandOver):
            emb.vectors.update(
                {q["text"]: np.asarray(q["vector"], np.float32) for q in req["queries"]}
            )
        ms = []
        for q in req["queries"]:
            t0 = time.perf_counter()
            m.recall(q["text"], k=req.get("k", 5))
            ms.append((time.perf_counter() - t0) * 1000)
        return {"ms": ms}
    if op == "stats":
        # VmHWM, not ru_maxrss: ru_maxrss survives exec, so it starts at the bench's own peak
        with open("/proc/self/status", encoding="utf-8") as fh:
            status = {x.split(":")[0]: x.split()[1] for x in fh if x.startswith(("Vm", "Rss"))}
        return {
            "rss_mb": int(status["VmRSS"]) / 1024,
            "peak_rss_mb": int(status["VmHWM"]) / 1024,
            # now, not peak: private memory, and pages of mapped files (shared library code)
            "rss_anon_mb": int(status["RssAnon"]) / 1024,
            "rss_file_mb": int(status["RssFile"]) / 1024,
            "disk_bytes": _disk(os.path.join(STATE["path"], "store")),
            "upkeep_conflicts": m.store.conflicts,
        }
    if op == "settle":  # the upkeep the writes asked for, finished
        m.store.upkeep.wait(600)
        return {"ok": True}
    if op == "settled":  # compacted, every old version removed: the store's size at rest
        from datetime import timedelta

        from mimir_core.store.core import TABLES

        for name in TABLES:
            m.store.optimize(name, cleanup_older_than=timedelta(0))
        return {"ok": True}
    raise ValueError(f"unknown op {op!r}")


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        if req.get("op") == "quit":
            break
        try:
            out = handle(req)
        except Exception as exc:  # report, keep serving
            out = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
