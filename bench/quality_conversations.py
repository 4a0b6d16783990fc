"""Conversational retrieval: Mimir's LangGraph store against BM25, dense and fused baselines.

    python -m bench.quality_conversations            # full set (24 conversations, ~370 questions)
    python -m bench.quality_conversations --quick    # CI subset (8 conversations, ~120 questions)
    python -m bench.quality_conversations --json out.json --show-misses 10

What it measures: how well ``MimirStore.search`` finds the turns of a multi-session chat that
answer a later question, the way LangGraph users keep chat memory in a ``BaseStore``. Every
turn of ``bench/data/conversations.json`` (written by ``bench/make_conversations.py``; never
used for tuning) is one document ``{"text", "session", "speaker"}`` under the namespace
``("conversations", <id>)``, indexed by its ``text`` field; each question is a
``store.search(namespace, query=question, limit=5)``.

Why the baselines run here, on the same documents and in the same process: a chat-memory
claim only means something next to what a plain lexical and a plain semantic search get on
the same data. They are

* ``bm25``: Okapi BM25 (k1 = 1.2, b = 0.75; lower-cased ``\\w+`` tokens minus Lucene's English
  stop words, no stemming), implemented below so that no dependency is added;
* ``dense``: cosine similarity with the embedder Mimir itself uses (MiniLM, offline), on the
  same vectors (they are computed once and shared);
* ``fusion``: per question, each of the two score lists min-max normalised over the
  conversation's turns, then ``w * bm25 + (1 - w) * dense``; ``w`` is picked from a small grid
  on the tune half only (``fusion@0.5`` is the untuned half-and-half).

Metrics over the answerable questions (abstention questions are counted, not scored):
``any-hit@5``, the share with at least one evidence turn in the top 5, and ``recall@5``, the
share of evidence turns found. The issue's gate: Mimir's any-hit@5 on the test half is at
least 1.15 x BM25's, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "conversations.json"
K = 5
GATE_RATIO = 1.15
#: The conversations of the quick configuration: the first four of each half (~120 questions).
QUICK_PER_HALF = 4
FUSION_GRID = [round(0.1 * i, 1) for i in range(11)]
SYSTEMS = ("mimir", "bm25", "dense", "fusion", "fusion@0.5")
HALVES = ("tune", "test", "all")
NAMESPACE = "conversations"

#: Lucene's default English stop words (StandardAnalyzer / EnglishAnalyzer).
STOPWORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
     "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
     "these", "they", "this", "to", "was", "will", "with"]
)  # fmt: skip
_WORD = re.compile(r"\w+", re.UNICODE)


def load(path: Path = DATA) -> dict[str, Any]:
    """The conversation set."""
    return json.loads(path.read_text(encoding="utf-8"))


def select(data: dict[str, Any], quick: bool = False) -> list[dict[str, Any]]:
    """The conversations of a configuration (quick: the first few of each half)."""
    convs = data["conversations"]
    if not quick:
        return list(convs)
    out: list[dict[str, Any]] = []
    for half in ("tune", "test"):
        out += [c for c in convs if c["split"] == half][:QUICK_PER_HALF]
    return sorted(out, key=lambda c: c["id"])


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without stop words: the plain analyzer a BM25 baseline uses."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


class BM25:
    """Okapi BM25 over a fixed list of documents (Robertson-Sparck Jones idf, floored at 0)."""

    def __init__(self, docs: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.tfs = [Counter(tokenize(d)) for d in docs]
        self.lens = [sum(tf.values()) for tf in self.tfs]
        self.avg = sum(self.lens) / max(len(self.lens), 1)
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(self.tfs)
        self.idf = {t: max(0.0, math.log((n - f + 0.5) / (f + 0.5) + 1.0)) for t, f in df.items()}

    def scores(self, query: str) -> list[float]:
        """The score of every document for ``query`` (repeated query terms count once)."""
        terms = [t for t in dict.fromkeys(tokenize(query)) if t in self.idf]
        out = []
        for tf, length in zip(self.tfs, self.lens, strict=True):
            norm = self.k1 * (1.0 - self.b + self.b * length / self.avg)
            s = 0.0
            for t in terms:
                f = tf.get(t, 0)
                if f:
                    s += self.idf[t] * f * (self.k1 + 1.0) / (f + norm)
            out.append(s)
        return out


class MemoEmbedder:
    """The given embedder with every text's vector kept: Mimir's store and the dense baseline
    then use the very same vectors, and each text is embedded once per run."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.memo: dict[str, Any] = {}

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        todo = list(dict.fromkeys(t for t in texts if t not in self.memo))
        if todo:
            for text, vec in zip(todo, self.inner.embed(todo), strict=True):
                self.memo[text] = np.asarray(vec, dtype=np.float32)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.memo[t] for t in texts])


def top_k(scores: Sequence[float], k: int = K) -> list[int]:
    """Indices of the ``k`` best scores (ties: earlier document first)."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]


def minmax(values: Any) -> Any:
    lo, hi = float(values.min()), float(values.max())
    return (values - lo) / (hi - lo) if hi > lo else values * 0.0


def _hit_stats(rows: list[dict[str, Any]], system: str) -> dict[str, float]:
    scored = [r for r in rows if r["evidence"]]
    if not scored:
        return {"any_hit@5": 0.0, "recall@5": 0.0, "n": 0}
    anyhit = sum(bool(set(r["evidence"]) & set(r[system])) for r in scored) / len(scored)
    recall = sum(
        len(set(r["evidence"]) & set(r[system])) / len(r["evidence"]) for r in scored
    ) / len(scored)
    return {"any_hit@5": round(anyhit, 4), "recall@5": round(recall, 4), "n": len(scored)}


def _in_half(rows: list[dict[str, Any]], half: str) -> list[dict[str, Any]]:
    return rows if half == "all" else [r for r in rows if r["split"] == half]


def run(
    quick: bool = False,
    embedder: Any = None,
    data: dict[str, Any] | None = None,
    home: Path | None = None,
) -> dict[str, Any]:
    """Store every turn through ``MimirStore``, ask every question of Mimir and the three
    baselines, and return the per-system metrics per half, the gate and the per-question rows.

    ``embedder``: an embedder object (the tests pass their loaded model); by default the offline
    MiniLM, prepared in ``home`` (a temporary directory unless given).
    """
    if home is None:
        with tempfile.TemporaryDirectory() as tmp:
            return run(quick, embedder, data, Path(tmp))
    import numpy as np
    from langgraph.store.base import PutOp

    from mimir_core import Mimir
    from mimir_core.embed.core import FastEmbedder
    from mimir_integrations.langgraph import MimirStore

    data = data or load()
    convs = select(data, quick)
    memo = MemoEmbedder(embedder or FastEmbedder(home / "models" / "minilm-int8"))
    mimir = Mimir(home / "mimir", embedder=memo)
    store = MimirStore(mimir, index={"fields": ["text"]})
    seconds: dict[str, float] = dict.fromkeys(("build", *SYSTEMS), 0.0)
    t0 = time.perf_counter()
    for conv in convs:
        ns = (NAMESPACE, conv["id"])
        store.batch(
            [
                PutOp(ns, t["id"], {"text": t["text"], "session": s["id"], "speaker": t["speaker"]})
                for s in conv["sessions"]
                for t in s["turns"]
            ]
        )
    seconds["build"] = time.perf_counter() - t0
    rows: list[dict[str, Any]] = []
    fused: list[tuple[dict[str, Any], Any, Any, list[str]]] = []
    for conv in convs:
        ns = (NAMESPACE, conv["id"])
        turns = [t for s in conv["sessions"] for t in s["turns"]]
        ids = [t["id"] for t in turns]
        texts = [t["text"] for t in turns]
        t0 = time.perf_counter()
        bm25 = BM25(texts)
        seconds["bm25"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        matrix = memo.embed(texts)
        seconds["dense"] += time.perf_counter() - t0
        for q in conv["questions"]:
            row = {
                "id": q["id"],
                "conversation": conv["id"],
                "split": conv["split"],
                "category": q["category"],
                "wording": q["wording"],
                "question": q["question"],
                "evidence": q["evidence"],
            }
            t0 = time.perf_counter()
            row["mimir"] = [h.key for h in store.search(ns, query=q["question"], limit=K)]
            seconds["mimir"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            lex = np.asarray(bm25.scores(q["question"]), dtype=np.float64)
            row["bm25"] = [ids[i] for i in top_k(lex.tolist())]
            seconds["bm25"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            sem = (matrix @ memo.embed([q["question"]])[0]).astype(np.float64)
            row["dense"] = [ids[i] for i in top_k(sem.tolist())]
            seconds["dense"] += time.perf_counter() - t0
            rows.append(row)
            fused.append((row, minmax(lex), minmax(sem), ids))

    def fuse(w: float, subset: list[tuple[dict[str, Any], Any, Any, list[str]]]) -> list[Any]:
        return [[ids[i] for i in top_k((w * b + (1 - w) * d).tolist())] for _r, b, d, ids in subset]

    t0 = time.perf_counter()
    tune_rows = [f for f in fused if f[0]["split"] == "tune"]
    grid = []
    for w in FUSION_GRID:
        for (row, *_rest), got in zip(tune_rows, fuse(w, tune_rows), strict=True):
            row["_fusion"] = got
        st = _hit_stats([f[0] for f in tune_rows], "_fusion")
        grid.append({"w": w, **st})
    best = max(grid, key=lambda g: (g["any_hit@5"], g["recall@5"], -abs(g["w"] - 0.5)))
    for w, name in ((best["w"], "fusion"), (0.5, "fusion@0.5")):
        for (row, *_rest), got in zip(fused, fuse(w, fused), strict=True):
            row[name] = got
    for row in rows:
        row.pop("_fusion", None)
    seconds["fusion"] = seconds["fusion@0.5"] = time.perf_counter() - t0
    mimir.close()
    metrics = {
        system: {half: _hit_stats(_in_half(rows, half), system) for half in HALVES}
        for system in SYSTEMS
    }
    bm25_test = metrics["bm25"]["test"]["any_hit@5"]
    ratio = metrics["mimir"]["test"]["any_hit@5"] / bm25_test if bm25_test else 0.0
    turns_n = sum(len(s["turns"]) for c in convs for s in c["sessions"])
    missed = [r for r in rows if r["evidence"] and not set(r["evidence"]) & set(r["mimir"])]
    return {
        "config": "quick" if quick else "full",
        "conversations": len(convs),
        "turns": turns_n,
        "questions": len(rows),
        "answerable": {h: sum(bool(r["evidence"]) for r in _in_half(rows, h)) for h in HALVES},
        "abstention_questions": sum(not r["evidence"] for r in rows),
        "metrics": metrics,
        "per_category": breakdown(rows, "category"),
        "per_wording": breakdown(rows, "wording"),
        "fusion_weight": best["w"],
        "fusion_grid": grid,
        "gate": {
            "metric": "any_hit@5",
            "half": "test",
            "ratio": round(ratio, 4),
            "threshold": GATE_RATIO,
            "passed": ratio >= GATE_RATIO,
        },
        "mimir_misses": {
            "total": len(missed),
            **{
                f"found_by_{s}": sum(bool(set(r["evidence"]) & set(r[s])) for r in missed)
                for s in ("bm25", "dense", "fusion")
            },
        },
        "seconds": {k: round(v, 2) for k, v in seconds.items()},
        "rows": rows,
    }


def breakdown(rows: list[dict[str, Any]], key: str) -> dict[str, dict[str, float]]:
    """any-hit@5 per value of ``key`` (``category`` or ``wording``) and system, both halves."""
    out: dict[str, dict[str, float]] = {}
    for value in sorted({r[key] for r in rows if r["evidence"]}):
        sub = [r for r in rows if r[key] == value]
        out[value] = {s: _hit_stats(sub, s)["any_hit@5"] for s in SYSTEMS}
        out[value]["n"] = _hit_stats(sub, "mimir")["n"]
    return out


def misses(
    result: dict[str, Any], data: dict[str, Any] | None = None, limit: int = 8
) -> list[dict[str, Any]]:
    """Questions Mimir's store misses (no evidence in its top 5) but BM25 or the fusion finds,
    with the evidence turn and Mimir's first hit, spread over categories."""
    data = data or load()
    text = {
        t["id"]: t["text"] for c in data["conversations"] for s in c["sessions"] for t in s["turns"]
    }
    found = []
    for r in result["rows"]:
        ev = set(r["evidence"])
        if not ev or ev & set(r["mimir"]):
            continue
        by = [s for s in ("bm25", "fusion") if ev & set(r[s])]
        if by:
            found.append(
                {
                    "id": r["id"],
                    "category": r["category"],
                    "question": r["question"],
                    "evidence": [text[e] for e in r["evidence"]],
                    "mimir_top1": text.get(r["mimir"][0], "") if r["mimir"] else "",
                    "found_by": by,
                }
            )
    # Round-robin over categories so a few examples show the different kinds of miss.
    by_cat: dict[str, list[dict[str, Any]]] = {}
    for m in found:
        by_cat.setdefault(m["category"], []).append(m)
    out: list[dict[str, Any]] = []
    while len(out) < limit and any(by_cat.values()):
        for cat in sorted(by_cat):
            if by_cat[cat] and len(out) < limit:
                out.append(by_cat[cat].pop(0))
    return out


def report(result: dict[str, Any], show_misses: int = 0) -> None:
    """Print the tables (and a few misses)."""
    ans = result["answerable"]
    sec = result["seconds"]
    print(
        f"conversations ({result['config']}): {result['conversations']} conversations, "
        f"{result['turns']} turns, {result['questions']} questions ({ans['tune']} tune / "
        f"{ans['test']} test answerable, {result['abstention_questions']} abstention); "
        f"store build {sec['build']:.1f} s"
    )
    head = "".join(f"{h + ' any@5':>12}{h + ' rec@5':>12}" for h in HALVES)
    print(f"{'system':16}{head}{'seconds':>10}")
    for system in SYSTEMS:
        met = result["metrics"][system]
        label = f"fusion(w={result['fusion_weight']})" if system == "fusion" else system
        cells = "".join(f"{met[h]['any_hit@5']:>12.3f}{met[h]['recall@5']:>12.3f}" for h in HALVES)
        print(f"{label:16}{cells}{sec[system]:>10.1f}")
    for key in ("category", "wording"):
        print(f"any-hit@5 per {key} (both halves):")
        print(f"{key:16}{'n':>5}" + "".join(f"{s:>12}" for s in SYSTEMS))
        for value, vals in result[f"per_{key}"].items():
            cells = "".join(f"{vals[s]:>12.3f}" for s in SYSTEMS)
            print(f"{value:16}{int(vals['n']):>5}{cells}")
    gate = result["gate"]
    mimir_t = result["metrics"]["mimir"]["test"]["any_hit@5"]
    bm25_t = result["metrics"]["bm25"]["test"]["any_hit@5"]
    print(
        f"gate (test) mimir/bm25 any-hit@5 {mimir_t:.3f}/{bm25_t:.3f} = {gate['ratio']:.3f} "
        f">= {gate['threshold']:.2f}  {'PASS' if gate['passed'] else 'FAIL'}"
    )
    mm = result["mimir_misses"]
    print(
        f"mimir misses {mm['total']} answerable questions; of those BM25 finds "
        f"{mm['found_by_bm25']}, dense {mm['found_by_dense']}, fusion {mm['found_by_fusion']}"
    )
    if show_misses:
        for m in misses(result, limit=show_misses):
            print("miss", json.dumps(m, ensure_ascii=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the CI subset")
    parser.add_argument("--json", type=Path, help="write the result here")
    parser.add_argument("--show-misses", type=int, default=0, metavar="N")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    result = run(quick=args.quick)
    report(result, args.show_misses)
    print(f"total {time.perf_counter() - t0:.1f} s")
    if args.json:
        out = {k: v for k, v in result.items() if k != "rows"}
        out["misses"] = misses(result, limit=50)
        args.json.write_text(json.dumps(out, indent=2, ensure_ascii=False))
    return 0 if result["gate"]["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
