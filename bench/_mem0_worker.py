"""Drive mem0 (``mem0ai``, pinned) for ``bench.perf``'s write comparison, in its own venv.

Run by ``bench.peer`` as ``<mem0 venv>/bin/python -I bench/_mem0_worker.py``; it must not import
anything from this repository. Protocol: one JSON object per line on stdin, one JSON answer per
line on stdout (``{"error": ...}`` on failure). Timings are taken here, around the library call
only. The peer worker for Mimir (``bench/_mimir_peer_worker.py``) answers the same requests.

mem0 is set up as a new user would run it locally without an LLM: an on-disk qdrant collection
(``vector_store.provider = "qdrant"``, ``path=...``, embedded, no server), its SQLite history,
``add(..., infer=False)`` (each message stored as one memory, no LLM call). Its embedder is
replaced by one that returns the vector the bench handed over for the text (the bench's
synthetic vectors: no model cost, like Mimir's side), or, with ``real``, runs the same MiniLM
model file Mimir uses (fastembed, the bench's model directory).
"""

from __future__ import annotations

import json
import os
import sys
import time
from importlib.metadata import version
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("OPENAI_API_KEY", "unused-infer-is-false")  # mem0 builds its LLM client

import numpy as np

USER = "bench"


class HandOver:
    """mem0's embedder seam: ``embed(text, memory_action)`` -> list of floats."""

    def __init__(self) -> None:
        self.vectors: dict[str, list[float]] = {}
        self.model: Any = None

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        if self.model is not None:
            return [float(x) for x in next(iter(self.model.embed([text])))]
        return self.vectors[text]


STATE: dict[str, Any] = {}


def _model(model_dir: str) -> Any:
    from fastembed import TextEmbedding

    model = TextEmbedding(
        "sentence-transformers/all-MiniLM-L6-v2", specific_model_path=model_dir, threads=1
    )
    list(model.embed(["warm up"]))
    return model


def _disk(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def _load_vectors(req: dict[str, Any], emb: HandOver) -> None:
    with open(req["texts"], encoding="utf-8") as fh:
        texts = json.load(fh)
    vecs = np.load(req["vectors"])
    emb.vectors = {t: vecs[i].tolist() for i, t in enumerate(texts)}


def handle(req: dict[str, Any]) -> dict[str, Any]:
    op = req["op"]
    if op == "versions":
        return {
            "mem0ai": version("mem0ai"),
            "qdrant-client": version("qdrant-client"),
            "fastembed": version("fastembed"),
            "python": sys.version.split()[0],
        }
    if op == "open":
        from mem0 import Memory

        path = req["path"]
        os.makedirs(path, exist_ok=True)
        config = {
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": "bench",
                    "path": os.path.join(path, "qdrant"),
                    "on_disk": True,
                    "embedding_model_dims": req.get("dim", 384),
                },
            },
            "history_db_path": os.path.join(path, "history.db"),
        }
        m = Memory.from_config(config)
        emb = HandOver()
        m.embedding_model = emb
        if req.get("real"):
            emb.model = _model(req["model_dir"])
        STATE.update(m=m, emb=emb, path=path)
        return {"ok": True}
    m, emb = STATE["m"], STATE["emb"]
    if op == "add":  # items one call each (batch 1) or ``batch`` messages per call
        if req.get("vectors"):
            _load_vectors(req, emb)
        with open(req["rows"], encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh]
        batch = int(req.get("batch", 1))
        ms = []
        start = time.perf_counter()
        for at in range(0, len(rows), batch):
            part = rows[at : at + batch]
            messages = [{"role": "user", "content": r["task"]} for r in part]
            t0 = time.perf_counter()
            m.add(messages, user_id=USER, infer=False, metadata={"outcome": part[0]["outcome"]})
            ms.append((time.perf_counter() - t0) * 1000)
        return {"seconds": time.perf_counter() - start, "ms": ms}
    if op == "search":
        emb.vectors.update({q["text"]: q["vector"] for q in req["queries"] if "vector" in q})
        ms = []
        for q in req["queries"]:
            t0 = time.perf_counter()
            m.search(q["text"], filters={"user_id": USER}, limit=req.get("k", 5))
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
            "disk_bytes": _disk(STATE["path"]),
        }
    if op in ("settle", "settled"):
        return {"ok": True}  # nothing to compact: qdrant's local store writes in place
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
