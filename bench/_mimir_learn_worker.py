"""Drive ``mimir-learn`` 0.1.5 (the previous generation) for ``bench.perf``, in its own venv.

Run by ``bench.perf`` as ``<side venv>/bin/python -I bench/_mimir_learn_worker.py``; it must not
import anything from this repository. Protocol: one JSON object per line on stdin, one JSON
answer per line on stdout (``{"error": ...}`` on failure). Timings are taken here, around the
library call only, so the pipe is never timed.

Vectors: the bench's synthetic task vectors are handed over (a ``.npy`` file for loads, lists for
queries). Loads use :func:`bulk_add` (one transaction per 10k rows); timed single records use
``record``/``record_failure``. mimir-learn embeds ``task + "\\n" + action`` through its
``Embedder`` seam on write and the query on recall; the embedder below returns the handed-over
vector, and for queries it first runs the same MiniLM model (fastembed, threads=1, the bench's
model directory) on the query text and throws the result away, so recall pays the real
embedding cost, like Mimir's does.
"""

from __future__ import annotations

import json
import os
import sys
import time
from importlib.metadata import version
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from mimir import Mimir
from mimir.embeddings import Embedder
from mimir.ranking import default_score
from mimir.storage import SQLiteStorage


class HandOverEmbedder(Embedder):
    """Returns the vector the bench handed over; optionally charges the real model's cost."""

    def __init__(self) -> None:
        self.next: list[list[float]] = []
        self.model: Any = None

    def embed(self, text: str) -> list[float]:
        if self.model is not None:
            list(self.model.embed([text], batch_size=64))
        return self.next.pop(0)


def bulk_add(m: Mimir, rows: list[dict[str, Any]], vecs: Any) -> None:
    """Bench-only bulk load: the rows ``record``/``record_failure`` would write (same models,
    scores and cluster keys), inserted with ``executemany`` in one transaction. mimir-learn has
    no batch API and its single ``record`` runs at ~35-85 rows/s here (100k rows: ~40 min)."""
    import sqlite_vec
    from mimir.models import Experience, Outcome

    st = m.storage
    exps = []
    for row, vec in zip(rows, vecs, strict=True):
        ctx = dict(row.get("context") or {})
        outcome = Outcome(row["outcome"])
        if outcome is Outcome.FAILURE:
            if row.get("reason"):
                ctx["failure_reason"] = row["reason"]
            score = 0.0
        else:
            score = default_score(outcome)
        exps.append(
            Experience(
                task=row["task"],
                action=row["action"],
                outcome=outcome,
                score=score,
                context=ctx,
                embedding=[float(x) for x in vec],
            )
        )
    st.ensure_vec_table(len(exps[0].embedding))
    with st.writing() as conn:
        conn.executemany(
            "INSERT INTO experiences (id, task, action, action_norm, outcome, score, context, "
            "embedding, created_at, superseded_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    e.id,
                    e.task,
                    e.action,
                    st.clusterer.key(e.action, st.known_clusters),
                    e.outcome.value,
                    e.score,
                    json.dumps(e.context),
                    json.dumps(e.embedding),
                    e.created_at.isoformat(),
                    None,
                )
                for e in exps
            ],
        )
        if st.fts_enabled:
            conn.executemany(
                "INSERT INTO experiences_fts (id, task, action) VALUES (?, ?, ?)",
                [(e.id, e.task, e.action) for e in exps],
            )
        if st.vec_enabled:
            conn.executemany(
                "INSERT INTO vec_experiences(experience_id, embedding) VALUES (?, ?)",
                [(e.id, sqlite_vec.serialize_float32(e.embedding)) for e in exps],
            )
    st.clusters = None  # rebuilt lazily from the table


STORES: dict[str, tuple[Mimir, HandOverEmbedder]] = {}
MODEL: Any = None


def load_model(model_dir: str) -> Any:
    global MODEL
    if MODEL is None:
        from fastembed import TextEmbedding

        MODEL = TextEmbedding(
            "sentence-transformers/all-MiniLM-L6-v2", specific_model_path=model_dir, threads=1
        )
        list(MODEL.embed(["warm up"]))
    return MODEL


def handle(req: dict[str, Any]) -> dict[str, Any]:
    op = req["op"]
    if op == "versions":
        import sqlite3

        return {
            "mimir-learn": version("mimir-learn"),
            "sqlite-vec": version("sqlite-vec"),
            "fastembed": version("fastembed"),
            "onnxruntime": version("onnxruntime"),
            "sqlite": sqlite3.sqlite_version,
            "python": sys.version.split()[0],
        }
    if op == "open":
        load_model(req["model_dir"])
        emb = HandOverEmbedder()
        storage = SQLiteStorage(req["path"])
        m = Mimir(storage=storage, embedder=emb)
        STORES[req["name"]] = (m, emb)
        return {"vec_enabled": storage.vec_enabled, "fts_enabled": storage.fts_enabled}
    m, emb = STORES[req["name"]]
    if op == "load":  # single-row writes: mimir-learn has no batch API
        vecs = np.load(req["vectors"], mmap_mode="r")
        with open(req["rows"], encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh]
        emb.model = None
        ms = []
        start = time.perf_counter()
        if req.get("bulk"):
            off = req.get("offset", 0)
            bulk_add(m, rows, vecs[off : off + len(rows)])
            return {"seconds": time.perf_counter() - start, "ms": [], "count": m.count()}
        for i, row in enumerate(rows):
            emb.next = [vecs[req.get("offset", 0) + i].tolist()]
            t0 = time.perf_counter()
            if row["outcome"] == "failure":
                m.record_failure(row["task"], row["action"], reason=row["reason"] or None)
            else:
                m.record(row["task"], row["action"], outcome=row["outcome"])
            ms.append((time.perf_counter() - t0) * 1000)
        return {"seconds": time.perf_counter() - start, "ms": ms, "count": m.count()}
    if op == "recall":
        emb.model = MODEL
        ms, cpu, hits = [], [], []
        for q in req["queries"]:
            emb.next = [q["vector"]]
            c0, t0 = time.process_time(), time.perf_counter()
            found = m.recall(q["text"], k=req.get("k", 5))
            ms.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
            hits.append(len(found))
        return {"ms": ms, "cpu_ms": cpu, "hits": hits}
    if op == "recommend":  # keyword aggregation over FTS matches: no embedding involved
        emb.model = None
        ms, cpu, found = [], [], []
        for q in req["queries"]:
            c0, t0 = time.process_time(), time.perf_counter()
            rec = m.recommend(q["text"])
            ms.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
            found.append(rec is not None)
        return {"ms": ms, "cpu_ms": cpu, "found": found}
    raise ValueError(f"unknown op {op!r}")


def serve(handler: Any) -> None:
    """Answer JSON-line requests on stdin with ``handler`` until ``quit`` or end of input
    (shared with the learning benchmark's worker, :mod:`bench.learning_mimir_learn`)."""
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        if req.get("op") == "quit":
            break
        try:
            out = handler(req)
        except Exception as exc:  # report, keep serving
            out = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


def main() -> None:
    serve(handle)


if __name__ == "__main__":
    main()
