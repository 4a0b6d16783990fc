"""The learning benchmark's fourth arm, MIMIR_LEARN: the same agent on ``mimir-learn`` 0.1.5.

The previous generation (installed from the package index into its own cached venv, made by
:func:`bench.perf.ensure_learn_venv`) is driven through a worker process speaking JSON lines:
this file run as ``<side venv>/bin/python -I bench/learning_mimir_learn.py`` (it then imports
nothing from this repository; the module-level imports are stdlib only for that reason).

The agent's policy is WARM's without lessons (mimir-learn has none), so the comparison isolates
the memory library: ``recommend(explore=True)`` (Thompson sampling over recorded actions, seeded
``rng``); an untried plausible action gets a fair Beta(0.5, 0.5) draw against the recommended
one; ``recall`` of this repo's raw attempts (``context={"repo": ...}``), an action that only ever
failed here is not retried; every outcome recorded (``record`` / ``record_failure`` with the
task's reason). mimir-learn embeds with the same MiniLM model file Mimir uses (fastembed in its
venv, threads=1) for recall; its ``recommend`` is keyword aggregation by design.

The ``generic_learn`` arm (:class:`GenericLearnAgent`) is the generic policy of
:func:`bench.learning_agents.generic_choice` on mimir-learn: ``recommend(explore=True)`` only
(no recall), through the same worker. It opens its store without an embedder, as mimir-learn's
documented ``Mimir()`` does: its ``recommend`` never embeds (FTS5 keyword aggregation), so the
figures are the same with or without one and the model's cost is saved.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ARM = "mimir_learn"
GENERIC_ARM = "generic_learn"

# -- parent side (this repository's venv) -------------------------------------------------------


def learn_python(create: bool) -> Path | None:
    """The side venv's interpreter, or ``None`` when absent and ``create`` is false."""
    from .perf import ensure_learn_venv

    return ensure_learn_venv(create)


class MimirLearnAgent:
    """The MIMIR_LEARN arm: same interface as the agents of :mod:`bench.learning_agents`."""

    name = ARM

    def __init__(self, seed: int, home: Path, python: Path) -> None:
        import random

        from mimir_core.embed.core import prepare_model_dir

        self.seed = seed
        self.rng = random.Random(seed)
        home.mkdir(parents=True, exist_ok=True)
        model_dir = prepare_model_dir(home / "model")
        from .perf import LearnWorker

        self.worker = LearnWorker(python, Path(__file__).resolve())
        info = self.call(op="open", path=str(home / "learn.db"), model_dir=str(model_dir))
        self.version: str = info["version"]

    def call(self, **req: Any) -> dict[str, Any]:
        return self.worker.call(**req)

    def choose(self, task: Any) -> Any:
        from .learning_agents import Choice

        cands = task.family.commands
        out = self.call(
            op="choose",
            task=task.text,
            repo=task.repo,
            key=getattr(task, "context_key", "repo"),
            seed=self.rng.randrange(2**31),
        )
        rec = out["recommend"]
        known: dict[str, tuple[float, float]] = {}
        if rec is not None and rec["action"] in cands:
            known[rec["action"]] = (rec["successes"], rec["failures"])
        here: dict[str, list[bool]] = {}
        for act, success in out["recalled"]:
            if act in cands:
                here.setdefault(act, []).append(success)
        for act, outs in here.items():
            if not any(outs):
                known[act] = (0.0, float(len(outs)))
            else:
                known.setdefault(act, (float(sum(outs)), float(len(outs) - sum(outs))))
        allowed = [c for c in cands if not (c in known and known[c][0] <= 0)] or list(cands)
        untried = [c for c in allowed if c not in known]
        said = None
        if rec is not None:  # its posterior mean is mimir-learn's point estimate
            mean = (0.5 + rec["successes"]) / (1 + rec["successes"] + rec["failures"])
            said = (rec["action"], mean, rec["confidence"])
        if rec is not None and rec["action"] in allowed:
            s, f = rec["successes"], rec["failures"]
            draw = self.rng.betavariate(0.5 + s, 0.5 + f)
            if untried and max(self.rng.betavariate(0.5, 0.5) for _ in untried) > draw:
                return Choice(self.rng.choice(untried), "explore", recommended=said)
            return Choice(rec["action"], "recommend", rec["confidence"], [], said[1], said)
        return Choice(self.rng.choice(untried or allowed), "explore", recommended=said)

    def learn(self, task: Any, choice: Any, success: bool) -> None:
        _record(self, task, choice, success)

    def close(self) -> None:
        self.worker.close()


def _record(agent: Any, task: Any, choice: Any, success: bool) -> None:
    """``record`` (success) or ``record_failure`` with the task's reason, context = the tag."""
    reason = next(a.reason for a in task.family.actions if a.command == choice.action)
    agent.call(
        op="record",
        task=task.text,
        action=choice.action,
        success=success,
        reason=None if success else reason,
        repo=task.repo,
        key=getattr(task, "context_key", "repo"),
    )


class GenericLearnAgent:
    """The ``generic_learn`` arm: the generic policy on mimir-learn's ``recommend``."""

    name = GENERIC_ARM

    def __init__(self, seed: int, home: Path, python: Path) -> None:
        import random

        from .perf import LearnWorker

        self.seed = seed
        self.rng = random.Random(seed)
        self.tried: dict[str, set[str]] = {}
        home.mkdir(parents=True, exist_ok=True)
        self.worker = LearnWorker(python, Path(__file__).resolve())
        info = self.call(op="open", path=str(home / "learn.db"), model_dir=None)
        self.version: str = info["version"]

    def call(self, **req: Any) -> dict[str, Any]:
        return self.worker.call(**req)

    def choose(self, task: Any) -> Any:
        from .learning_agents import generic_choice

        rec = self.call(op="recommend", task=task.text, seed=self.rng.randrange(2**31))["recommend"]
        if rec is None:
            return generic_choice(self.rng, task, self.tried, None)
        # its posterior mean is mimir-learn's point estimate (for calibration only)
        mean = (0.5 + rec["successes"]) / (1 + rec["successes"] + rec["failures"])
        return generic_choice(self.rng, task, self.tried, (rec["action"], rec["confidence"]), mean)

    def learn(self, task: Any, choice: Any, success: bool) -> None:
        self.tried.setdefault(task.text, set()).add(choice.action)
        _record(self, task, choice, success)

    def close(self) -> None:
        self.worker.close()


def calibration(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """mimir-learn's recommendations against what their action did on the task (followed or
    not), like WARM's: ``calibration`` of the posterior mean of the recommended action (the
    point estimate), and under ``lower_bound`` its stated confidence (also a 5% Beta lower
    bound: coverage, overconfidence)."""
    from .learning import _calibration

    said = [x["said"] for r in runs for x in r["log"].get(ARM, []) if x.get("said")]
    means = [(s["expected"], s["success"], s["rate"]) for s in said]
    bounds = [(s["confidence"], s["success"], s["rate"]) for s in said]
    return {**_calibration(means), "lower_bound": _calibration(bounds)}


# -- worker side (the side venv; stdlib + mimir-learn only) -------------------------------------


def _worker() -> None:  # pragma: no cover - runs in the side venv
    import random
    from importlib.metadata import version

    from fastembed import TextEmbedding
    from mimir import Mimir
    from mimir.embeddings import Embedder
    from mimir.storage import SQLiteStorage

    class MiniLM(Embedder):
        def __init__(self, model_dir: str) -> None:
            self.model = TextEmbedding(
                "sentence-transformers/all-MiniLM-L6-v2", specific_model_path=model_dir, threads=1
            )

        def embed(self, text: str) -> list[float]:
            return [float(x) for x in next(iter(self.model.embed([text])))]

    m: Any = None

    def recommend(req: dict[str, Any]) -> dict[str, Any] | None:
        rec = m.recommend(req["task"], explore=True, rng=random.Random(req["seed"]))
        if rec is None:
            return None
        return {
            "action": rec.recommended_action,
            "confidence": rec.confidence,
            "successes": rec.success_count + 0.5 * rec.partial_count,
            "failures": rec.failure_count + 0.5 * rec.partial_count,
        }

    def handle(req: dict[str, Any]) -> dict[str, Any]:
        nonlocal m
        op = req["op"]
        if op == "open":  # model_dir None: no embedder (mimir-learn's default, keyword recall)
            emb = MiniLM(req["model_dir"]) if req.get("model_dir") else None
            m = Mimir(storage=SQLiteStorage(req["path"]), embedder=emb)
            return {"version": version("mimir-learn"), "vec": m.storage.vec_enabled}
        if op == "choose":
            rec = recommend(req)
            hits = m.recall(req["task"], k=10, context={req.get("key", "repo"): req["repo"]})
            return {
                "recommend": rec,
                "recalled": [[e.action, e.outcome.value == "success"] for e in hits],
            }
        if op == "recommend":
            return {"recommend": recommend(req)}
        if op == "record":
            ctx = {req.get("key", "repo"): req["repo"]}
            if req["success"]:
                m.record(req["task"], req["action"], outcome="success", context=ctx)
            else:
                m.record_failure(req["task"], req["action"], reason=req["reason"], context=ctx)
            return {"count": m.count()}
        raise ValueError(f"unknown op {op!r}")

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # -I left the script's folder out
    from _mimir_learn_worker import serve

    serve(handle)


if __name__ == "__main__":
    _worker()
