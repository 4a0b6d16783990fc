"""Retrieval and recommendation quality on the labelled set (``bench/data/retrieval_set.json``),
plus the conversational-retrieval part (``bench/quality_conversations.py``).

    python -m bench.quality            # metrics per part (tune / test / all) and the gates
    python -m bench.quality --quick    # the same, with the quick conversational configuration
    python -m bench.quality --tune     # grid-search recall / recommend thresholds (tune part)
    python -m bench.quality --json out.json
    python -m bench.quality --distractors 20000   # the set among realistic other experiences
    python -m bench.quality --write-split         # recompute the family split into the JSON

Why a split: the core's thresholds and weights were tuned on this very set, so figures on it
flatter them. The set's task families are split once, deterministically, into a ``tune`` part
and a held-out ``test`` part (``split`` in the JSON; every experience, query and recommend case
carries its ``family``). ``--tune`` searches on the tune part only, and the gates are judged on
the test part. Every part is answered against the store of ALL experiences, as a user's store
would be: the split only says which queries and cases a figure is computed on.

Gates (also asserted in the test suite, on the test part): paraphrase hit@5 >= 0.90, identifier
hit@1 >= 0.95, abstention on >= 90% of unanswerable queries, recommend accuracy >= 0.85 on
paraphrased tasks; and on the conversational test half, Mimir's store any-hit@5 >= 1.15 x BM25's.
Uses the public API only (plus the tuning dataclasses, which are part of it).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import tempfile
import time
from collections.abc import Iterable
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
#: The part the gates are judged on: the one no threshold was ever chosen with.
GATE_PART = "test"
PARTS = ("tune", "test", "all")
#: Salt of the family split's hash order; changing it makes a different (equally valid) split.
SPLIT_SALT = "mimir-retrieval-split-v1"
#: What the split balances between the parts (besides the hash order that decides ties).
_BALANCE = (
    "families",
    "experiences",
    "paraphrase",
    "identifier",
    "non_english",
    "unanswerable",
    "recommend",
    "recommend_null",
)


def load(path: Path = DATA) -> dict[str, Any]:
    """The labelled set."""
    return json.loads(path.read_text(encoding="utf-8"))


# -- the family split ------------------------------------------------------------------------


def split_units(data: dict[str, Any]) -> list[list[str]]:
    """Groups of families that must land in the same part, each sorted.

    A family is its own group unless a query or recommend case links it to another (an
    identifier such as ``ghcr.io 403`` occurs in two families): tuning on such a query would
    otherwise have seen experiences of a test family as relevant.
    """
    fam_of = {e["id"]: e["family"] for e in data["experiences"]}
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def link(families: Iterable[str]) -> None:
        fams = [find(f) for f in families]
        for other in fams[1:]:
            parent[other] = fams[0] if other != fams[0] else other

    for e in data["experiences"]:
        find(e["family"])
    for q in data["queries"]:
        link([q["family"], *(fam_of[i] for i in q["relevant"])])
    for r in data["recommend"]:
        link([r["family"], *(fam_of[i] for i in r.get("family_ids", []))])
    groups: dict[str, list[str]] = {}
    for fam in parent:
        groups.setdefault(find(fam), []).append(fam)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: g[0])


def _unit_load(data: dict[str, Any], unit: list[str]) -> dict[str, int]:
    fams = set(unit)
    load_ = dict.fromkeys(_BALANCE, 0)
    load_["families"] = len(fams)
    load_["experiences"] = sum(e["family"] in fams for e in data["experiences"])
    for q in data["queries"]:
        if q["family"] in fams:
            load_[q["kind"]] += 1
    for r in data["recommend"]:
        if r["family"] in fams:
            load_["recommend_null" if r["expected_action"] is None else "recommend"] += 1
    return load_


def make_split(data: dict[str, Any], salt: str = SPLIT_SALT) -> dict[str, Any]:
    """A deterministic, about 50/50 split of the families into ``tune`` and ``test``.

    The linked groups of :func:`split_units` are taken in the order of a salted SHA-256 of
    their names (so no author chose which family is held out) and each goes to the part where
    it leaves the two parts closest in families, experiences, query kinds and recommend cases
    (a hash bit breaks ties): a plain hash split of ~100 families would leave, say, a third
    of the recommend cases on one side.
    """
    units = split_units(data)
    digest = {u[0]: hashlib.sha256(f"{salt}:{u[0]}".encode()).hexdigest() for u in units}
    units.sort(key=lambda u: digest[u[0]])
    loads = [_unit_load(data, u) for u in units]
    total = {k: max(sum(ld[k] for ld in loads), 1) for k in _BALANCE}
    acc = {p: dict.fromkeys(_BALANCE, 0) for p in ("tune", "test")}
    parts: dict[str, list[str]] = {"tune": [], "test": []}
    for unit, ld in zip(units, loads, strict=True):

        def cost(part: str, ld: dict[str, int] = ld) -> float:
            other = "test" if part == "tune" else "tune"
            return sum(abs(acc[part][k] + ld[k] - acc[other][k]) / total[k] for k in _BALANCE)

        tie = "tune" if int(digest[unit[0]][-1], 16) % 2 else "test"
        c_tune, c_test = cost("tune"), cost("test")
        part = tie if abs(c_tune - c_test) < 1e-12 else ("tune" if c_tune < c_test else "test")
        parts[part].extend(unit)
        for k in _BALANCE:
            acc[part][k] += ld[k]
    return {
        "salt": salt,
        "method": (
            "Families: an experience with an action_group belongs to its prefix (24 families "
            "of repeated attempts); the others form families by the queries that name them "
            "together (experiences relevant to one query share a family); an experience no "
            "query links stays a family of its own; an unanswerable query is an 'absent:' "
            "family of its own; a query belongs to the family of most of its relevant "
            "experiences. Families linked by a query or recommend case go to one part. Groups "
            "are taken in salted SHA-256 order, each to the part that keeps the two closest in "
            "families, experiences, query kinds and recommend cases. Computed by "
            "bench.quality.make_split; regenerate with python -m bench.quality --write-split."
        ),
        "tune": sorted(parts["tune"]),
        "test": sorted(parts["test"]),
    }


def part_map(data: dict[str, Any]) -> dict[str, str]:
    """Family -> ``tune`` or ``test``, from the set's ``split``."""
    return {f: p for p in ("tune", "test") for f in data["split"][p]}


def restrict(data: dict[str, Any], part: str) -> dict[str, Any]:
    """The set with only ``part``'s queries and recommend cases (every experience is kept: they
    make up the store every part is answered against)."""
    if part == "all":
        return data
    parts = part_map(data)
    return {
        **data,
        "queries": [q for q in data["queries"] if parts[q["family"]] == part],
        "recommend": [r for r in data["recommend"] if parts[r["family"]] == part],
    }


def dump_set(data: dict[str, Any]) -> str:
    """The set as stored: one JSON object per line, so a diff shows which items changed."""
    lines = ["{"]
    keys = list(data)
    for n, key in enumerate(keys):
        value, comma = data[key], "," if n < len(keys) - 1 else ""
        if isinstance(value, list):
            lines.append(f"  {json.dumps(key)}: [")
            for i, item in enumerate(value):
                sep = "," if i < len(value) - 1 else ""
                lines.append("    " + json.dumps(item, ensure_ascii=False) + sep)
            lines.append("  ]" + comma)
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


# -- the store and the metrics ---------------------------------------------------------------


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


def run_queries(m: Mimir, data: dict[str, Any], id_map: dict[str, str]) -> list[dict[str, Any]]:
    """One row per query: its kind, family, the labels recall returned and the first relevant
    rank (``None``: none in the top 5)."""
    rows = []
    for q in data["queries"]:
        hits = m.recall(q["query"], k=5, scope="*")
        got = [id_map.get(h.experience.id, "?") for h in hits]
        rel = set(q["relevant"])
        rank = next((i + 1 for i, g in enumerate(got) if g in rel), None)
        rows.append({**q, "got": got, "rank": rank})
    return rows


def run_recommend(m: Mimir, data: dict[str, Any], id_map: dict[str, str]) -> list[dict[str, Any]]:
    """One row per recommend case: whether the recommendation (or abstention) was right."""
    groups = {e["id"]: e.get("action_group") for e in data["experiences"]}
    rows = []
    for case in data["recommend"]:
        rec = m.recommend(case["task"], scope="*")
        got_group = chosen_group(rec.evidence_ids, id_map, groups) if rec else None
        if case["expected_action"] is None:
            ok = rec is None
        else:
            ok = rec is not None and got_group == case.get(
                "expected_group", case["expected_action"]
            )
        rows.append(
            {
                "id": case["id"],
                "family": case["family"],
                "null": case["expected_action"] is None,
                "ok": ok,
                "expected": case.get("expected_group"),
                "got": rec.action if rec else None,
                "got_group": got_group,
            }
        )
    return rows


def summarise(qrows: list[dict[str, Any]], rrows: list[dict[str, Any]]) -> dict[str, Any]:
    """Every metric, per query kind, plus recommend accuracy (and the misses)."""
    per_kind: dict[str, dict[str, list[float]]] = {}
    misses: list[dict[str, Any]] = []
    for q in qrows:
        stats = per_kind.setdefault(q["kind"], {"hit@1": [], "hit@5": [], "mrr": [], "abstain": []})
        rank, got = q["rank"], q["got"]
        if q["relevant"]:
            stats["hit@1"].append(float(rank == 1))
            stats["hit@5"].append(float(rank is not None))
            stats["mrr"].append(1.0 / rank if rank else 0.0)
            wrong = rank != 1
        else:
            stats["abstain"].append(float(not got))
            wrong = bool(got)
        if wrong:
            misses.append({"id": q["id"], "kind": q["kind"], "query": q["query"], "got": got})
    metrics: dict[str, Any] = {}
    for kind, st in per_kind.items():
        for name, vals in st.items():
            if vals:
                metrics[f"{kind}_{name}"] = round(sum(vals) / len(vals), 4)
        metrics[f"{kind}_n"] = max(len(v) for v in st.values())
    metrics["unanswerable_abstention"] = metrics.pop("unanswerable_abstain", 0.0)
    acted = [r for r in rrows if not r["null"]]
    nulls = [r for r in rrows if r["null"]]
    metrics["recommend_accuracy"] = round(sum(r["ok"] for r in acted) / max(len(acted), 1), 4)
    metrics["recommend_abstention"] = round(sum(r["ok"] for r in nulls) / max(len(nulls), 1), 4)
    metrics["recommend_n"] = len(rrows)
    metrics["misses"] = misses
    metrics["recommend_misses"] = [
        {k: r[k] for k in ("id", "expected", "got", "got_group")} for r in rrows if not r["ok"]
    ]
    return metrics


def evaluate(m: Mimir, data: dict[str, Any], id_map: dict[str, str]) -> dict[str, Any]:
    """Every metric on the given queries and recommend cases (see :func:`restrict`)."""
    return summarise(run_queries(m, data, id_map), run_recommend(m, data, id_map))


def evaluate_parts(
    m: Mimir, data: dict[str, Any], id_map: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """:func:`evaluate` per part (``tune``, ``test``, ``all``), each query asked once."""
    qrows, rrows = run_queries(m, data, id_map), run_recommend(m, data, id_map)
    parts = part_map(data)
    out = {}
    for part in PARTS:
        keep = (lambda f: True) if part == "all" else (lambda f, p=part: parts[f] == p)
        out[part] = summarise(
            [q for q in qrows if keep(q["family"])], [r for r in rrows if keep(r["family"])]
        )
    return out


def chosen_group(evidence: list[str], id_map: dict[str, str], groups: dict[str, Any]) -> Any:
    """The labelled action group most of a recommendation's evidence belongs to."""
    votes: dict[Any, int] = {}
    for ident in evidence:
        group = groups.get(id_map.get(ident, ""))
        votes[group] = votes.get(group, 0) + 1
    return max(votes.items(), key=lambda kv: kv[1])[0] if votes else None


def gates(metrics: dict[str, Any]) -> dict[str, tuple[float, float, bool]]:
    """(value, threshold, passed) for each CI gate (pass the test part's metrics)."""
    return {k: (metrics.get(k, 0.0), t, metrics.get(k, 0.0) >= t) for k, t in GATES.items()}


# -- tuning ------------------------------------------------------------------------------------


def _grid_metrics(cached: list[Any], params: tuple[float, float, float, float]) -> dict[str, float]:
    """Recall's metrics with ``params`` = (vector floor, word floor, identifier weight, text
    weight), from cached candidate features, by the rules of :mod:`mimir_core.search.scoring`."""
    vf, wf, iw, tw = params
    per: dict[str, list[float]] = {}
    for q, feats, n_words in cached:
        kept = []
        for label, sim, icov, every_word, text in feats:
            relevant = sim >= vf or icov > 0 or (n_words >= 2 and every_word and sim >= wf)
            if relevant:
                kept.append((sim + iw * icov + (tw * text if n_words >= 2 else 0.0), label))
        kept.sort(key=lambda t: -t[0])
        got = [label for _s, label in kept[:5]]
        rel = set(q["relevant"])
        if rel:
            rank = next((i + 1 for i, g in enumerate(got) if g in rel), None)
            per.setdefault(q["kind"] + "@1", []).append(float(rank == 1))
            per.setdefault(q["kind"] + "@5", []).append(float(rank is not None))
        else:
            per.setdefault("abstain", []).append(float(not got))
    return {k: round(sum(v) / len(v), 3) for k, v in per.items()}


def _objective(met: dict[str, float]) -> float:
    return (
        min(met["paraphrase@5"] / 0.9, met["identifier@1"] / 0.95, met["abstain"] / 0.9, 1.03)
        + 0.1 * met["paraphrase@1"]
        + 0.05 * met.get("non_english@5", 0)
    )


def tune(m: Mimir, data: dict[str, Any], id_map: dict[str, str]) -> None:
    """Grid-search recall floors/weights (on cached features) and recommend thresholds on the
    tune part only; the best setting's held-out (test part) figures are printed once, after the
    choice, so they can report it but never steer it."""
    from mimir_core.search.recall import gather
    from mimir_core.search.scoring import Terms, text_scores
    from mimir_core.store.core import row_text

    parts = part_map(data)
    cached: dict[str, list[Any]] = {"tune": [], "test": []}
    for q in data["queries"]:
        qvec = m.embedder.embed_one(q["query"])
        cands = gather(m.store, qvec, q["query"], where="superseded_by IS NULL", limit=40)
        terms = Terms(q["query"])
        text = text_scores({c.row["id"]: c.bm25 for c in cands})
        feats = []
        for c in cands:
            idents, words = terms.match(row_text(c.row))
            icov = len(idents) / len(terms.idents) if terms.idents else 0.0
            every = bool(terms.words) and len(words) == len(terms.words)
            feats.append(
                (id_map.get(c.row["id"]), c.similarity, icov, every, text.get(c.row["id"], 0.0))
            )
        cached[parts[q["family"]]].append((q, feats, len(terms.words)))
    rows = []
    for params in itertools.product(
        [0.34, 0.38, 0.40, 0.42, 0.44, 0.46, 0.48],
        [0.0, 0.1, 0.2, 0.3, 1.0],
        [0.3, 0.45, 0.6, 0.8],
        [0.0, 0.06, 0.12, 0.2, 0.3],
    ):
        met = _grid_metrics(cached["tune"], params)
        rows.append((_objective(met), params, met))
    rows.sort(key=lambda r: -r[0])
    print(f"recall grid on the tune part ({len(cached['tune'])} queries)", flush=True)
    for objective, params, met in rows[:12]:
        print(f"recall {params} {objective:.3f} {met}", flush=True)
    t = m.recall_tuning
    current = (t.vector_floor, t.word_floor, t.ident_weight, t.text_weight)
    rank = next((i + 1 for i, r in enumerate(rows) if r[1] == current), None)
    print(f"recall current {current}: rank {rank} of {len(rows)} on the tune part", flush=True)
    best = rows[0][1]
    print(f"recall best {best} on the held-out test part: {_grid_metrics(cached['test'], best)}")
    base_c = m.recommend_tuning
    tune_data, test_data = restrict(data, "tune"), restrict(data, "test")
    rec_rows = []
    print(f"recommend grid on the tune part ({len(tune_data['recommend'])} cases)", flush=True)
    for tt, at in itertools.product([0.4, 0.45, 0.5, 0.55, 0.6], [0.7, 0.75, 0.8, 0.86, 0.9]):
        m.recommend_tuning = replace(base_c, topic_threshold=tt, action_threshold=at)
        met2 = summarise([], run_recommend(m, tune_data, id_map))
        acc, abst = met2["recommend_accuracy"], met2["recommend_abstention"]
        rec_rows.append((acc + 0.5 * abst, (tt, at)))
        print("recommend", (tt, at), acc, abst, flush=True)
    _score, (tt, at) = max(rec_rows, key=lambda r: r[0])
    m.recommend_tuning = replace(base_c, topic_threshold=tt, action_threshold=at)
    met3 = summarise([], run_recommend(m, test_data, id_map))
    print(
        f"recommend best {(tt, at)} on the held-out test part: accuracy "
        f"{met3['recommend_accuracy']}, abstention {met3['recommend_abstention']}",
        flush=True,
    )
    m.recommend_tuning = base_c


# -- the command -------------------------------------------------------------------------------


def print_table(per_part: dict[str, dict[str, Any]]) -> None:
    """Metric rows, one column per part."""
    names = sorted({k for met in per_part.values() for k in met if not k.endswith("misses")})
    print(f"{'metric':32}" + "".join(f"{p:>10}" for p in PARTS))
    for name in names:
        cells = []
        for part in PARTS:
            value = per_part[part].get(name, "")
            cells.append(f"{value:>10.4f}" if isinstance(value, float) else f"{value!s:>10}")
        print(f"{name:32}" + "".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tune", action="store_true", help="grid-search on the tune part")
    parser.add_argument("--json", type=Path, help="write the metrics here")
    parser.add_argument("--embedder", default="fastembed")
    parser.add_argument("--show-misses", action="store_true")
    parser.add_argument("--distractors", type=int, default=0, metavar="N")
    parser.add_argument("--quick", action="store_true", help="quick conversational part")
    parser.add_argument("--skip-conversations", action="store_true")
    parser.add_argument(
        "--write-split", action="store_true", help="recompute the family split into the JSON"
    )
    args = parser.parse_args(argv)
    data = load()
    if args.write_split:
        data["split"] = make_split(data)
        DATA.write_text(dump_set(data), encoding="utf-8")
        print(f"split: {len(data['split']['tune'])} tune / {len(data['split']['test'])} test")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        m, id_map = build_store(data, Path(tmp), args.embedder)
        add_distractors(m, args.distractors)
        build_s = time.perf_counter() - t0
        if args.tune:
            tune(m, data, id_map)
            return 0
        t0 = time.perf_counter()
        per_part = evaluate_parts(m, data, id_map)
        eval_s = time.perf_counter() - t0
    misses = {p: (met.pop("misses"), met.pop("recommend_misses")) for p, met in per_part.items()}
    print(
        f"labelled set: {len(data['split']['tune'])} tune / {len(data['split']['test'])} test "
        f"families; store of all {len(data['experiences'])} experiences "
        f"(+{args.distractors} distractors); build {build_s:.1f} s, eval {eval_s:.1f} s"
    )
    print_table(per_part)
    ok = True
    for name, (value, threshold, passed) in gates(per_part[GATE_PART]).items():
        ok &= passed
        print(
            f"gate ({GATE_PART}) {name:26} {value:.3f} >= {threshold:.2f}  "
            f"{'PASS' if passed else 'FAIL'}"
        )
    if args.show_misses:
        for miss in misses["all"][0] + misses["all"][1]:
            print("miss", json.dumps(miss, ensure_ascii=False))
    result: dict[str, Any] = {
        "split": {p: data["split"][p] for p in ("tune", "test")},
        "metrics": per_part,
        "gates": GATES,
        "gate_part": GATE_PART,
        "build_seconds": round(build_s, 2),
        "eval_seconds": round(eval_s, 2),
    }
    if not args.skip_conversations:
        from bench import quality_conversations as qc

        print()
        embedder = None
        if args.embedder == "hash":
            from mimir_core.embed.core import HashEmbedder

            embedder = HashEmbedder()
        conv = qc.run(quick=args.quick, embedder=embedder)
        qc.report(conv, args.show_misses and 8)
        conv = {k: v for k, v in conv.items() if k != "rows"}
        ok &= conv["gate"]["passed"]
        result["conversations"] = conv
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
