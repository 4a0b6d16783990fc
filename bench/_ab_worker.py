"""One side of ``bench.ab``: serves timed ``recall`` / ``recommend`` calls from one code tree.

Run as ``python bench/_ab_worker.py ROOT SIZE SEED WORKDIR``: imports ``mimir_core`` and
``bench`` from ROOT (this checkout or an older revision), opens ROOT's own benchmark store of SIZE
rows (its ``bench.perf.cached_store``: built once, then copied from the cache, so each revision
gets the store its own code writes), then answers one JSON request per stdin line with one JSON
line: ``{"ms": wall, "cpu": process CPU, "answer": ...}``. Only this file's own code must work
with every revision compared; it uses nothing newer than ``cached_store`` and
``SyntheticEmbedder``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    root, size, seed, workdir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    sys.path.insert(0, root)
    from bench import perf
    from bench.synthetic import SyntheticEmbedder
    from mimir_core.embed.core import FastEmbedder

    model = FastEmbedder(Path(tempfile.mkdtemp(dir=workdir)) / "model")
    emb = SyntheticEmbedder(model)
    home = Path(tempfile.mkdtemp(dir=workdir)) / "home"
    cache = perf.CACHE if size >= getattr(perf, "CACHE_MIN", 100_000) else None  # as bench.perf
    bs, _info = perf.cached_store(home, size, emb, seed, "fast", cache)
    emb.charge_model = True  # every timed call pays the real query embedding
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        c0, t0 = time.process_time(), time.perf_counter()
        if req["op"] == "recall":
            hits = bs.m.recall(req["text"], k=5)
            answer: object = [[h.experience.task, h.experience.action] for h in hits]
        else:
            rec = bs.m.recommend(req["text"])
            answer = None if rec is None else [rec.action, round(rec.confidence, 4)]
        wall, cpu = (time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3
        print(json.dumps({"ms": wall, "cpu": cpu, "answer": answer}), flush=True)


if __name__ == "__main__":
    main()
