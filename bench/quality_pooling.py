"""How well the hooks find a task's past attempts without a model: the attempts digest's
keyword match plus its topics (``mimir_core.observations``), on the labelled set's split.

    python -m bench.quality_pooling          # tune and test parts, the shipped constants
    python -m bench.quality_pooling --grid   # the grid the constants were chosen from (tune)
    python -m bench.quality_pooling --quick  # the CI smoke: the test part, 12 prompts

Leave one task out: a digest holds every other task of the part (each with its topic, assigned
from its MiniLM vector as the stored experiences get it), and the left-out task is the prompt.
``found`` is the share of tasks (of families with two or more tasks) for which the pool holds a
task of the same family; ``wrong`` the share of pooled tasks from another family. The hooks'
constants (``attempt_digest.MATCH_FLOOR``, ``LOOSE_FLOOR``, ``from_store.TOPIC_JOIN``) were
chosen on the tuning part; the test part is reported as held out.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from mimir_core.observations import attempt_digest as ad
from mimir_core.observations import from_store

from .quality import load


class _Memo:
    """An embedder that embeds a list of texts once: each part is evaluated twice (shipped
    constants, keywords alone) on the same texts, and the grid many times."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._seen: dict[tuple[str, ...], Any] = {}

    def embed(self, texts: list[str]) -> Any:
        key = tuple(texts)
        if key not in self._seen:
            self._seen[key] = self.inner.embed(texts)
        return self._seen[key]


def _tasks(data: dict[str, Any], part: str) -> list[tuple[str, str]]:
    families = set(data["split"][part])
    return sorted(
        {(e["family"], e["task"]) for e in data["experiences"] if e["family"] in families}
    )


def evaluate(
    data: dict[str, Any],
    part: str,
    embedder: Any,
    *,
    join: float = from_store.TOPIC_JOIN,
    floor: float = ad.MATCH_FLOOR,
    loose: float = ad.LOOSE_FLOOR,
    prompts: int | None = None,
) -> dict[str, float]:
    """``found``, ``wrong`` and the mean number of tasks pooled, for one part (over its first
    ``prompts`` left-out tasks when given: the smoke's size, since each prompt rebuilds the pool).
    """
    tasks = _tasks(data, part)
    texts = [t for _f, t in tasks]
    vectors = dict(zip((ad.normalise_task(t) for t in texts), embedder.embed(texts), strict=True))
    family = {ad.normalise_task(t): f for f, t in tasks}
    size: dict[str, int] = defaultdict(int)
    for f, _t in tasks:
        size[f] += 1
    found = asked = wrong = pooled = 0
    saved = (from_store.TOPIC_JOIN, ad.LOOSE_FLOOR, ad.AttemptDigest.match.__kwdefaults__)
    try:
        from_store.TOPIC_JOIN, ad.LOOSE_FLOOR = join, loose
        ad.AttemptDigest.match.__kwdefaults__ = {**(saved[2] or {}), "floor": floor}
        with tempfile.TemporaryDirectory() as tmp:
            for fam, query in tasks:
                if size[fam] < 2:
                    continue
                if prompts is not None and asked >= prompts:
                    break
                digest = ad.AttemptDigest("bench")
                topics = from_store.Topics(Path(tmp), "bench", fresh=True)
                for _f, task in tasks:
                    if task != query:
                        digest.add_record({"task": task, "action": "x", "outcome": "failure"})
                for entry in digest.tasks.values():
                    entry.group = topics.assign(vectors[entry.text])
                got = [family[e.text] for e in digest.pool(query)]
                asked += 1
                found += fam in got
                wrong += sum(f != fam for f in got)
                pooled += len(got)
    finally:
        from_store.TOPIC_JOIN, ad.LOOSE_FLOOR = saved[0], saved[1]
        ad.AttemptDigest.match.__kwdefaults__ = saved[2]
    return {
        "found": round(found / max(asked, 1), 3),
        "wrong": round(wrong / max(pooled, 1), 3),
        "pooled": round(pooled / max(asked, 1), 2),
        "asked": asked,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quality_pooling", description=__doc__)
    parser.add_argument("--grid", action="store_true", help="the grid, on the tuning part")
    parser.add_argument("--embedder", default="fastembed")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--quick", action="store_true", help="the test part's first 12 prompts")
    args = parser.parse_args(argv)
    parts = ("test",) if args.quick else ("tune", "test")
    prompts = 12 if args.quick else None
    from mimir_core.embed.core import make_embedder

    with tempfile.TemporaryDirectory() as tmp:
        embedder = _Memo(make_embedder(args.embedder, Path(tmp) / "models"))
        data = load()
        if args.grid:
            for join in (0.5, 0.55, 0.6, 0.65):
                for floor, loose in ((0.5, 9.0), (0.5, 0.3), (0.4, 0.3), (0.4, 0.2), (0.3, 0.2)):
                    r = evaluate(data, "tune", embedder, join=join, floor=floor, loose=loose)
                    print(f"join {join} floor {floor} loose {loose}: {r}")
            return 0
        result: dict[str, Any] = {
            part: evaluate(data, part, embedder, prompts=prompts) for part in parts
        }
        result["keywords_only"] = {
            part: evaluate(data, part, embedder, floor=0.5, loose=9.0, join=2.0, prompts=prompts)
            for part in parts
        }
    print("hooks' pooling (leave one task out; test part held out from tuning)")
    for part in parts:
        r, k = result[part], result["keywords_only"][part]
        print(
            f"  {part}: found {r['found']:.2f} (keywords alone {k['found']:.2f}), "
            f"wrong {r['wrong']:.2f}, pooled {r['pooled']:.1f} tasks, {r['asked']} prompts"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
