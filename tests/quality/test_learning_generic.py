"""Smoke test of the learning benchmark's generic arms on both streams (``bench.learning``).

The ``--generic-quick`` configuration (2 seeds x 160 tasks, real offline MiniLM, two processes)
on the ``dev`` stream and on the held-out ``ops`` stream: COLD, GENERIC (the policy most users
write, on Mimir's ``recommend``), GENERIC_LEARN (the same policy on mimir-learn 0.1.5, when its
side venv exists: the test home is sandboxed, so here it usually does not and the arm is left
out with a note) and CEILING (per-family Thompson sampling, told the family).

It asserts that the arms run and that the figures are present and sane; it does NOT assert that
Mimir beats mimir-learn or reaches 0.9 x the ceiling (the recommender is being changed): those
figures are printed, not gated. The fast tests check the held-out stream's structure and the
generic policy itself.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from bench import learning_env, learning_env_ops
from bench.learning import (
    DIAGS,
    GENERIC,
    GENERIC_LEARN,
    GENERIC_QUICK,
    STREAMS,
    main,
    run,
    table,
)
from bench.learning_agents import GENERIC_THRESHOLD, Ceiling, Choice, generic_choice
from bench.learning_mimir_learn import learn_python

# -- the benchmark itself (slow) -----------------------------------------------------------------


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, Any]]:
    py = learn_python(create=False)
    arms = GENERIC_QUICK.arms if py else tuple(a for a in GENERIC_QUICK.arms if a != GENERIC_LEARN)
    if py is None:
        print(f"{GENERIC_LEARN} left out: no mimir-learn 0.1.5 venv in the test home")
    out = {}
    for stream in STREAMS:
        cfg = dataclasses.replace(
            GENERIC_QUICK, embedder="fastembed", arms=arms, learn_python=py, stream=stream
        )
        res = run(cfg)
        print(table(res))
        out[stream] = res
    return out


@pytest.mark.slow
def test_the_arms_run_on_both_streams(results: dict[str, dict[str, Any]]) -> None:
    for stream, res in results.items():
        c = res["config"]
        assert c["stream"] == stream
        assert c["held_out"] is (stream == "ops")
        assert c["families"] == [f.name for f in STREAMS[stream].FAMILIES]
        for arm in c["arms"]:
            outcomes = [s["outcomes"][arm] for s in res["per_seed"]]
            assert [len(o) for o in outcomes] == [GENERIC_QUICK.tasks] * len(GENERIC_QUICK.seeds)
        assert {"cold", GENERIC, "ceiling"} <= set(c["arms"])


@pytest.mark.slow
def test_the_figures_are_present_and_sane(results: dict[str, dict[str, Any]]) -> None:
    for res in results.values():
        f = res["figures"]
        for arm in res["config"]["arms"]:
            for key in ("success", "second_half_success"):
                b = f["arms"][arm][key]
                assert 0.0 <= b["min"] <= b["mean"] <= b["max"] <= 1.0, (arm, key, b)
                assert b["ci_low"] <= b["mean"] <= b["ci_high"]
        cold, ceiling = f["arms"]["cold"], f["arms"]["ceiling"]
        # Told the family and counting per context, Thompson sampling learns: above the floor.
        assert ceiling["success"]["mean"] > cold["success"]["mean"]
        assert ceiling["second_half_success"]["mean"] >= cold["second_half_success"]["mean"]
        assert ceiling["success"]["mean"] <= f["oracle_success"]["mean"] + 0.05
        ratio = f["over_ceiling"][GENERIC]["second_half_ratio"]
        assert 0.0 < ratio < 2.0
        arms = res["config"]["arms"]
        assert ("generic_minus_generic_learn" in f) is (GENERIC_LEARN in arms)
        if GENERIC_LEARN in arms:
            d = f["generic_minus_generic_learn"]["second_half"]
            assert -1.0 <= d["ci_low"] <= d["mean"] <= d["ci_high"] <= 1.0
        for arm, dg in f["recommend_diagnostics"].items():
            for part in ("all", "second_half", "family_seen_often"):
                x = dg[part]
                shares = [x[f"{k}_share"] for k in ("recommend_none", *DIAGS[1:])]
                assert x["n"] > 0 and all(0.0 <= s <= 1.0 for s in shares), (arm, part, x)
                assert sum(shares) == pytest.approx(1.0, abs=1e-3), (arm, part, x)
            assert dg["threshold"] == GENERIC_THRESHOLD


# -- the held-out stream and the policies (fast) ------------------------------------------------


def test_the_ops_stream_differs_from_the_dev_stream() -> None:
    dev, ops = learning_env, learning_env_ops
    assert ops.NAME == "ops" and dev.NAME == "dev"
    assert "held-out" in (ops.__doc__ or "").lower()
    assert "never used to tune" in (ops.__doc__ or "")
    assert not {f.name for f in dev.FAMILIES} & {f.name for f in ops.FAMILIES}
    assert not set(dev.REPOS) & set(ops.REPOS)
    dev_cmds = {c for f in dev.FAMILIES for c in f.commands}
    ops_cmds = [c for f in ops.FAMILIES for c in f.commands]
    assert len(ops_cmds) == len(set(ops_cmds)) and not dev_cmds & set(ops_cmds)
    d, o = dev.stream(0, 200), ops.stream(0, 200)
    assert not {t.text for t in d} & {t.text for t in o}
    assert {t.family.name for t in o} == {f.name for f in ops.FAMILIES}
    assert {t.context_key for t in o} == {"env"} and {t.context_key for t in d} == {"repo"}
    assert ops.stream(3, 50) == ops.stream(3, 50)  # seeded


def test_the_ops_stream_structure() -> None:
    ops = learning_env_ops
    assert len(ops.FAMILIES) == 8
    drifting = [f.name for f in ops.FAMILIES if any(a.drift for a in f.actions)]
    assert drifting == ["terraform-state-lock"]
    for fam in ops.FAMILIES:
        assert 4 <= len(fam.templates) <= 5 and 4 <= len(fam.idents) <= 5
        traps = [a for a in fam.actions if a.trap]
        assert len(traps) == 1
        for env in ops.ENVS:
            for drifted in (False, True):
                assert ops.rate(fam, traps[0].command, env, drifted) == 0.0
                assert 0.85 <= ops.best_rate(fam, env, drifted) <= 0.9, (fam.name, env)
        # the context matters: the best action is not the same in every environment
        bests = {
            max(fam.commands, key=lambda c, e=env: ops.rate(fam, c, e, False)) for env in ops.ENVS
        }
        assert len(bests) >= 2, fam.name
    texts = [t.text for t in ops.stream(0, 400)]
    assert any(t.startswith("As ") for t in texts)  # user stories
    assert any(env in t for t in texts for env in ops.ENVS)  # the tag in the text, sometimes
    assert sum(any(env in t for env in ops.ENVS) for t in texts) < len(texts) / 2


def _task(text: str = "deploy api to staging") -> learning_env.Task:
    fam = next(f for f in learning_env.FAMILIES if f.name == "deploy-staging")
    return learning_env.Task(0, fam, "web-app", text, 0.5, False)


def test_the_generic_policy_follows_a_confident_plausible_recommendation() -> None:
    task = _task()
    helm = "helm upgrade --install api ./chart"
    c = generic_choice(random.Random(0), task, {}, (helm, GENERIC_THRESHOLD))
    assert (c.action, c.source, c.asked, c.rec) == (helm, "recommend", True, (helm, 0.3))


def test_the_generic_policy_explores_untried_actions_otherwise() -> None:
    task = _task()
    cmds = task.family.commands
    tried = {task.text: set(cmds[:3])}
    for rec in (None, (cmds[0], 0.29), ("ruff check --fix .", 0.95)):  # none, low, other family
        c = generic_choice(random.Random(1), task, tried, rec)
        assert (c.action, c.source, c.rec) == (cmds[3], "explore", rec)
    # every plausible action already run on this exact text: uniformly among all of them
    tried = {task.text: set(cmds)}
    picks = {generic_choice(random.Random(s), task, tried, None).action for s in range(40)}
    assert picks == set(cmds)
    # another text of the same family is "untried" again (the agent does not know families)
    other = _task("ship the worker service to the staging cluster")
    assert {generic_choice(random.Random(s), other, tried, None).action for s in range(40)} == set(
        cmds
    )


def test_the_ceiling_counts_per_family_and_context() -> None:
    task = _task()
    ceiling = Ceiling(0)
    helm = "helm upgrade --install api ./chart"
    for cmd in task.family.commands:
        for _ in range(20):
            ceiling.learn(task, Choice(cmd, "thompson"), success=cmd == helm)
    assert all(ceiling.choose(task).action == helm for _ in range(50))
    elsewhere = dataclasses.replace(task, repo="payments-api")  # its own counts: still uniform
    assert len({ceiling.choose(elsewhere).action for _ in range(50)}) == 4


def test_the_cli_rejects_unknown_streams_and_arms() -> None:
    with pytest.raises(SystemExit):
        main(["--stream", "prod", "--tasks", "10", "--seeds", "1"])
    with pytest.raises(SystemExit):
        main(["--arms", "cold,genius", "--tasks", "10", "--seeds", "1"])
    with pytest.raises(SystemExit):  # a block of seeds needs its size
        main(["--first-seed", "24", "--tasks", "10"])
    with pytest.raises(SystemExit):
        main(["--first-seed", "-1", "--seeds", "1", "--tasks", "10"])
