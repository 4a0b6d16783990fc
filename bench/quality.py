"""Retrieval and recommendation quality on the labelled set (``bench/data/retrieval_set.json``).

    python -m bench.quality            # metrics and gates with the real offline embedder
    python -m bench.quality --tune     # grid-search recall / recommend thresholds
    python -m bench.quality --json out.json
    python -m bench.quality --distractors 20000   # the set among realistic other experiences

Gates (also asserted in the test suite): paraphrase hit@5 >= 0.90, identifier hit@1 >= 0.95,
abstention on >= 90% of unanswerable queries, recommend accuracy >= 0.85 on paraphrased tasks.
Uses the public API only (plus the tuning dataclasses, which are part of it).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from mimir_core import Mimir

DATA = Path(__file__).parent / "data" / "retrieval_set.json"
GATES = {
    "paraphrase_hit@5": 0.90,
    "identifier_hit@1": 0.95,
    "unanswerable_abstention": 0.90,
    "recommend_accuracy": 0.85,
}


def load(path: Path = DATA) -> dict[str, Any]:
    """The labelled set."""
    return json.loads(path.read_text(encoding="utf-8"))


def build_store(
    data: dict[str, Any], home: Path, embedder: Any = None
) -> tuple[Mimir, dict[str, str]]:
    """A store holding the set's experiences; returns it and a map from store id to label id."""
    m = Mimir(home, embedder=embedder or "fastembed")
    items = []
    for e in data["experiences"]:
        items.append(
            {
                "task": e["task"],
                "action": e["action"],
                "outcome": e["outcome"],
                "reason": e.get("reason", ""),
                "context": e.get("context", {}),
                "scope": e.get("scope", ""),
                "idempotency_key": e["id"],
            }
        )
    stored = m.record_many(items)
    id_map = {s.id: e["id"] for s, e in zip(stored, data["experiences"], strict=True)}
    return m, id_map


def add_distractors(m: Mimir, n: int, seed: int = 5) -> None:
    """``n`` other coding-agent experiences (``bench.synthetic``), embedded with the store's
    model: a labelled target must now win against crowds of near neighbours. Some of them may
    truly answer an "unanswerable" query or a recommend case, so only the hit metrics keep
    their meaning."""
    from bench.synthetic import make_experiences

    for start in range(0, n, 2000):
        m.record_many(make_experiences(min(2000, n - start), seed, start))


def evaluate(m: Mimir, data: dict[str, Any], id_map: dict[str, str]) -> dict[str, Any]:
    """Every metric, per query kind, plus recommend accuracy."""
    per_kind: dict[str, dict[str, list[float]]] = {}
    misses: list[dict[str, Any]] = []
    for q in data["queries"]:
        hits = m.recall(q["query"], k=5, scope="*")
        got = [id_map.get(h.experience.id, "?") for h in hits]
        rel = set(q["relevant"])
        stats = per_kind.setdefault(q["kind"], {"hit@1": [], "hit@5": [], "mrr": [], "abstain": []})
        if rel:
            rank = next((i + 1 for i, g in enumerate(got) if g in rel), None)
            stats["hit@1"].append(float(rank == 1))
            stats["hit@5"].append(float(rank is not None))
            stats["mrr"].append(1.0 / rank if rank else 0.0)
            if rank != 1:
                misses.append({"id": q["id"], "kind": q["kind"], "query": q["query"], "got": got})
        else:
            stats["abstain"].append(float(not got))
            if got:
                misses.append({"id": q["id"], "kind": q["kind"], "query": q["query"], "got": got})
    metrics: dict[str, Any] = {}
    for kind, st in per_kind.items():
        for name, vals in st.items():
            if vals:
                metrics[f"{kind}_{name}"] = round(sum(vals) / len(vals), 4)
        metrics[f"{kind}_n"] = max(len(v) for v in st.values())
    metrics["unanswerable_abstention"] = metrics.pop("unanswerable_abstain", 0.0)
    groups = {e["id"]: e.get("action_group") for e in data["experiences"]}
    acted = correct = nulls = null_ok = 0
    rec_misses = []
    for case in data["recommend"]:
        rec = m.recommend(case["task"], scope="*")
        expected = case["expected_action"]
        if expected is None:
            nulls += 1
            null_ok += rec is None
            if rec is not None:
                rec_misses.append({"id": case["id"], "expected": None, "got": rec.action})
        else:
            acted += 1
            ok = rec is not None and chosen_group(rec.evidence_ids, id_map, groups) == case.get(
                "expected_group", expected
            )
            correct += ok
            if not ok:
                rec_misses.append(
                    {
                        "id": case["id"],
                        "expected": case.get("expected_group"),
                        "got": rec.action if rec else None,
                        "got_group": chosen_group(rec.evidence_ids, id_map, groups)
                        if rec
                        else None,
                    }
                )
    metrics["recommend_accuracy"] = round(correct / max(acted, 1), 4)
    metrics["recommend_abstention"] = round(null_ok / max(nulls, 1), 4)
    metrics["recommend_n"] = acted + nulls
    metrics["misses"] = misses
    metrics["recommend_misses"] = rec_misses
    return metrics


def chosen_group(evidence: list[str], id_map: dict[str, str], groups: dict[str, Any]) -> Any:
    """The labelled action group most of a recommendation's evidence belongs to."""
    votes: dict[Any, int] = {}
    for ident in evidence:
        group = groups.get(id_map.get(ident, ""))
        votes[group] = votes.get(group, 0) + 1
    return max(votes.items(), key=lambda kv: kv[1])[0] if votes else None


def gates(metrics: dict[str, Any]) -> dict[str, tuple[float, float, bool]]:
    """(value, threshold, passed) for each CI gate."""
    return {k: (metrics.get(k, 0.0), t, metrics.get(k, 0.0) >= t) for k, t in GATES.items()}


def tune(m: Mimir, data: dict[str, Any], id_map: dict[str, str]) -> None:
    """Grid-search recall floors/weights (on cached features) and recommend thresholds."""
    from mimir_core.recall import gather, score_candidates
    from mimir_core.text import query_terms

    permissive = replace(m.recall_tuning, vector_floor=-2.0)
    cached = []
    for q in data["queries"]:
        qvec = m.embedder.embed_one(q["query"])
        cands = gather(m.store, qvec, q["query"], where="superseded_by IS NULL", limit=40)
        score_candidates(cands, q["query"], permissive)  # fills the coverage features
        _idents, words = query_terms(q["query"])
        feats = [(id_map.get(c.row["id"]), c.similarity, c.ident_cov, c.word_cov) for c in cands]
        cached.append((q, feats, len(words)))
    rows = []
    for vf, wf, iw, ww in itertools.product(
        [0.34, 0.38, 0.40, 0.42, 0.44, 0.46, 0.48],
        [0.0, 0.1, 0.2, 0.3, 1.0],
        [0.3, 0.45, 0.6, 0.8],
        [0.0, 0.06, 0.12, 0.2, 0.3],
    ):
        per: dict[str, list[float]] = {}
        for q, feats, n_words in cached:
            kept = []
            for label, sim, icov, wcov in feats:
                relevant = sim >= vf or icov > 0 or (n_words >= 2 and wcov >= 0.999 and sim >= wf)
                if relevant:
                    kept.append((sim + iw * icov + ww * wcov, label))
            kept.sort(key=lambda t: -t[0])
            got = [label for _s, label in kept[:5]]
            rel = set(q["relevant"])
            if rel:
                rank = next((i + 1 for i, g in enumerate(got) if g in rel), None)
                per.setdefault(q["kind"] + "@1", []).append(float(rank == 1))
                per.setdefault(q["kind"] + "@5", []).append(float(rank is not None))
            else:
                per.setdefault("abstain", []).append(float(not got))
        met = {k: round(sum(v) / len(v), 3) for k, v in per.items()}
        objective = (
            min(met["paraphrase@5"] / 0.9, met["identifier@1"] / 0.95, met["abstain"] / 0.9, 1.03)
            + 0.1 * met["paraphrase@1"]
            + 0.05 * met.get("non_english@5", 0)
        )
        rows.append((objective, (vf, wf, iw, ww), met))
    rows.sort(key=lambda r: -r[0])
    for objective, params, met in rows[:12]:
        print(f"recall {params} {objective:.3f} {met}", flush=True)
    base_c = m.recommend_tuning
    for tt, at in itertools.product([0.4, 0.45, 0.5, 0.55, 0.6], [0.7, 0.75, 0.8, 0.86, 0.9]):
        m.recommend_tuning = replace(base_c, topic_threshold=tt, action_threshold=at)
        met2 = evaluate(m, {**data, "queries": []}, id_map)
        print(
            "recommend",
            (tt, at),
            met2["recommend_accuracy"],
            met2["recommend_abstention"],
            flush=True,
        )
    m.recommend_tuning = base_c


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tune", action="store_true")
    parser.add_argument("--json", type=Path, help="write the metrics here")
    parser.add_argument("--embedder", default="fastembed")
    parser.add_argument("--show-misses", action="store_true")
    parser.add_argument("--distractors", type=int, default=0, metavar="N")
    args = parser.parse_args(argv)
    data = load()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        m, id_map = build_store(data, Path(tmp), args.embedder)
        add_distractors(m, args.distractors)
        build_s = time.perf_counter() - t0
        if args.tune:
            tune(m, data, id_map)
            return 0
        t0 = time.perf_counter()
        metrics = evaluate(m, data, id_map)
        eval_s = time.perf_counter() - t0
    misses = metrics.pop("misses"), metrics.pop("recommend_misses")
    metrics["build_seconds"] = round(build_s, 2)
    metrics["eval_seconds"] = round(eval_s, 2)
    for k, v in sorted(metrics.items()):
        print(f"{k:32} {v}")
    ok = True
    for name, (value, threshold, passed) in gates(metrics).items():
        ok &= passed
        print(f"gate {name:26} {value:.3f} >= {threshold:.2f}  {'PASS' if passed else 'FAIL'}")
    if args.show_misses:
        for miss in misses[0] + misses[1]:
            print("miss", json.dumps(miss, ensure_ascii=False))
    if args.json:
        args.json.write_text(json.dumps({"metrics": metrics, "gates": GATES}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
