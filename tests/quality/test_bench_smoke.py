"""Every bench part with a command line runs, as a real subprocess, at its smallest size.

A benchmark nobody runs rots: ``python -m bench.mcp_startup`` crashed for weeks on a constant
tool count. Each part in :data:`SMOKE` runs here as ``python -m bench.<part> ...`` in a fresh
temporary HOME (``tests/conftest.py`` already keeps the real one out; each part also gets its own),
with a timeout, and must exit 0 and write the JSON its callers (``bench.run``, the scoreboard)
read. A bench module with a ``__main__`` entry that is in none of the lists below fails
:func:`test_every_entry_point_is_accounted_for`.

Smoke-tested elsewhere (:data:`ELSEWHERE`, not repeated here): ``ab`` (and its worker
``_ab_worker``), ``live``, ``hosts``, ``perf``, ``redaction``, ``quality`` and
``quality_conversations`` (their gates, in process), ``scoreboard`` (in Chromium; here only
against the committed results, which is cheap and catches a result schema it no longer reads).

Skipped (:data:`SKIPPED`): ``_mimir_learn_worker`` and ``learning_mimir_learn`` run inside
mimir-learn 0.1.5's own venv, which ``pip`` makes from the package index (not offline); the
perf and learning benchmarks drive them whenever that venv exists.

Libraries, no entry, covered through their callers (:data:`LIBRARIES`): ``hosts_drivers`` and
``hosts_scenario`` (``bench.hosts``), ``learning_agents``, ``learning_env`` and
``learning_env_ops`` (``bench.learning``), ``live_tasks`` (``bench.live``), ``peer`` (mem0
beside Mimir) and ``pin`` (``bench.perf``), ``synthetic`` (``bench.perf``, ``bench.soak``,
``bench.lessons``, ``bench.run``) and ``versions`` (``bench.run``, ``bench.soak``).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"
TIMEOUT = 240  # seconds per part; they take 1-15 s on an idle 2-core machine


@dataclass(frozen=True)
class Part:
    """One smoke run: ``python -m <module> <args>`` (``{tmp}`` is the test's directory)."""

    entry: str  # the bench module whose ``__main__`` it covers
    args: tuple[str, ...]
    result: str | None  # the JSON it writes, relative to tmp; None: JSON on stdout
    check: Callable[[Any, Path], None]
    module: str = ""  # what ``-m`` runs, when not ``bench.<entry>``
    extra_entries: tuple[str, ...] = field(default_factory=tuple)


def _hook_cost(r: dict[str, Any], _tmp: Path) -> None:
    for variant in ("bare", "capture", "failure", "inject", "guard-new", "guard-hit"):
        assert r[variant]["p50_ms"] > 0, variant
    assert r["inject_answered"] and r["guard_answered"], r
    assert r["rounds"] == 2 and r["records_spooled"] > 0


def _mcp_startup(r: dict[str, Any], _tmp: Path) -> None:
    tools = r["meta"]["tools"]  # what the server listed, not a constant
    assert "recall_experiences" in tools and len(tools) == len(set(tools)) >= 10, tools
    for name in ("mimir-mcp", "mimir-mcp, no front"):
        assert {"initialize", "tools_list", "first_call"} <= r["results"][name].keys(), name
    assert r["results"]["python -c pass"]["exit"]["median"] > 0


def _hermes(r: dict[str, Any], _tmp: Path) -> None:
    assert r["prefetch_warm_ms"]["n"] == 24 and r["sync_turn_ms"]["n"] == 6
    assert r["extra"] == 0 and r["rounds"] == 1 and r["store"]["experiences"] > 0, r["store"]
    assert r["captured_experiences"] > 0
    assert {"first_turn_ms", "context_direct_ms", "target_met"} <= r.keys()


def _lessons(r: dict[str, Any], _tmp: Path) -> None:
    (cost,) = r["cost"]
    assert cost["experiences"] == 200 and cost["full_seconds"] > 0
    assert {"topics", "candidates", "admitted", "incremental_seconds_10_new"} <= cost.keys()


def _soak(_r: None, tmp: Path) -> None:
    (out,) = (tmp / "soak").glob("soak-*.json")
    r = json.loads(out.read_text())
    assert [p["records"] for p in r["checkpoints"]] == [250, 500]
    assert r["integrity"]["stored"] == r["integrity"]["appended"] == 500, r["integrity"]
    assert "recall_p95_last_over_first_indexed" in r["flat"] and "partial" not in r


def _pooling(r: dict[str, Any], _tmp: Path) -> None:
    assert r["test"]["asked"] == r["keywords_only"]["test"]["asked"] == 12
    assert 0 < r["test"]["found"] <= 1 and "tune" not in r


def _learning(r: dict[str, Any], _tmp: Path) -> None:
    assert r["config"]["seeds"] == [0] and r["config"]["tasks"] == 16
    assert {"cold", "warm"} <= r["figures"]["arms"].keys(), r["figures"]["arms"]


def _learning_generic(_r: None, tmp: Path) -> None:
    for stream in ("dev", "ops"):  # one JSON per stream
        r = json.loads((tmp / f"generic-{stream}.json").read_text())
        assert r["config"]["stream"] == stream and r["mode"] == "generic-quick"
        assert r["config"]["arms"] == ["cold", "generic", "ceiling"], r["config"]
        assert r["config"]["seeds"] == [5] and r["notes"][0] == "plan written first", r["notes"]
        # at this size a stream's ceiling can go without a success: no ratio then, no crash
        assert {"cold", "generic"} <= r["figures"]["over_ceiling"].keys()


def _runner(r: dict[str, Any], _tmp: Path) -> None:
    part = r["parts"]["spool_drain"]  # bench.run ran it as its own process
    assert part["exit"] == 0 and part["result"]["ingested"] == 200, part
    assert r["summary"]["spool_drain_records_per_s"] > 0 and r["mode"] == "quick"


def _lessons_latency(r: dict[str, Any], _tmp: Path) -> None:
    size = r["sizes"]["300"]
    assert size["rows"] == 300 and size["lessons_ms"]["n"] == size["context_ms"]["n"] == 3


def _conversations(_r: None, tmp: Path) -> None:
    stale = tmp / "stale.json"
    stale.write_text("{}\n")
    proc = _run(["-m", "bench.make_conversations", "--check", "--out", str(stale)], tmp)
    assert proc.returncode == 1 and "not what" in proc.stderr  # --check can fail


def _scoreboard(_r: None, tmp: Path) -> None:
    page = (tmp / "scoreboard.html").read_text()
    assert "<svg" in page and "learning-" in page and "perf-" in page


SMOKE: dict[str, Part] = {
    "hook_cost": Part("hook_cost", ("--rounds", "2", "--lessons", "5", "--json"), None, _hook_cost),
    "mcp_startup": Part(
        "mcp_startup", ("--quick", "--hash", "--json", "{tmp}/mcp.json"), "mcp.json",
        _mcp_startup,
    ),
    "hermes_prefetch": Part(
        "hermes_prefetch", ("--quick", "--json", "{tmp}/hermes.json"), "hermes.json", _hermes
    ),
    "lessons": Part(
        "lessons", ("--skip-quality", "--sizes", "200", "--json", "{tmp}/lessons.json"),
        "lessons.json", _lessons,
    ),
    "soak": Part(
        "soak",
        ("--n", "500", "--every", "250", "--batch", "50", "--queries", "5", "--out-dir",
         "{tmp}/soak"),
        None, _soak,
    ),
    "quality_pooling": Part(
        "quality_pooling", ("--quick", "--json", "{tmp}/pooling.json"), "pooling.json", _pooling
    ),
    "make_conversations": Part("make_conversations", ("--check",), None, _conversations),
    "learning": Part(
        "learning",
        ("--quick", "--seeds", "1", "--tasks", "16", "--embedder", "hash", "--quiet", "--json",
         "{tmp}/learning.json"),
        "learning.json", _learning,
    ),
    "learning --generic-quick": Part(
        "learning",
        ("--generic-quick", "--seeds", "1", "--first-seed", "5", "--tasks", "16", "--embedder",
         "hash", "--quiet", "--note", "plan written first", "--json", "{tmp}/generic.json"),
        None, _learning_generic,
    ),
    "python -m bench": Part(
        "__main__", ("--quick", "--only", "spool_drain", "-o", "{tmp}/run.json"), "run.json",
        _runner, module="bench", extra_entries=("run",),
    ),
    "run --part lessons_latency": Part(
        "run",
        ("--part", "lessons_latency", "--sizes", "300", "--queries", "3", "--json",
         "{tmp}/latency.json"),
        "latency.json", _lessons_latency,
    ),
    "scoreboard": Part(
        "scoreboard", ("--results", str(BENCH / "results"), "-o", "{tmp}/scoreboard.html"), None,
        _scoreboard,
    ),
}  # fmt: skip

#: Entry points smoke-tested by another test file (which must name the part, or its caller).
ELSEWHERE = {
    "ab": "tests/quality/test_ab_smoke.py",
    "_ab_worker": "tests/quality/test_ab_smoke.py",  # bench.ab starts it for both sides
    "live": "tests/quality/test_bench_live.py",
    "hosts": "tests/quality/test_hosts_bench.py",
    "perf": "tests/quality/test_perf_smoke.py",
    "redaction": "tests/security/test_redaction_oracle.py",
    "quality": "tests/quality/test_quality_gates.py",
    "quality_conversations": "tests/quality/test_conversations.py",
}

#: Entry points no CI run can reach, with the reason.
SKIPPED = {
    "_mimir_learn_worker": "runs in mimir-learn 0.1.5's venv, made by pip from the package index",
    "learning_mimir_learn": "its __main__ is the worker inside mimir-learn 0.1.5's venv (pip)",
    "_mem0_worker": "runs in mem0's venv, made by pip from the package index (bench.peer)",
    "_mimir_peer_worker": "bench.peer starts it beside the mem0 worker, when mem0's venv exists",
}

#: Modules without an entry, and the part whose runs cover them.
LIBRARIES = {
    "__init__": "-",
    "hosts_drivers": "hosts",
    "hosts_scenario": "hosts",
    "learning_agents": "learning",
    "learning_env": "learning",
    "learning_env_ops": "learning",
    "live_tasks": "live",
    "peer": "perf",
    "pin": "perf",
    "synthetic": "perf",
    "versions": "run",
}


def _run(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env = dict(os.environ, HOME=str(home), MIMIR_HOME=str(home / ".mimir"), HF_HUB_OFFLINE="1")
    # ``bench`` is not installed: found through PYTHONPATH, while the working directory is the
    # test's own, so that a stray relative write never lands in the checkout.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    for name in ("MIMIR_STORE_URI", "MIMIR_EMBEDDER", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=TIMEOUT
    )


def _has_main(path: Path) -> bool:
    """``if __name__ == "__main__":`` at the module's top level (or the package's __main__)."""
    if path.name == "__main__.py":
        return True
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        test = node.test if isinstance(node, ast.If) else None
        if (
            isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name)
            and test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
        ):
            return True
    return False


def _modules() -> dict[str, bool]:
    return {p.stem: _has_main(p) for p in sorted(BENCH.glob("*.py"))}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SMOKE))
def test_part_runs_at_its_smallest_size(name: str, tmp_path: Path) -> None:
    part = SMOKE[name]
    args = [a.replace("{tmp}", str(tmp_path)) for a in part.args]
    started = time.perf_counter()
    proc = _run(["-m", part.module or f"bench.{part.entry}", *args], tmp_path)
    seconds = time.perf_counter() - started
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    if part.result is not None:
        result: Any = json.loads((tmp_path / part.result).read_text())
    elif proc.stdout.lstrip().startswith("{"):
        result = json.loads(proc.stdout)
    else:
        result = None
    part.check(result, tmp_path)
    print(f"{name}: {seconds:.1f} s", file=sys.stderr)


def test_every_entry_point_is_accounted_for() -> None:
    entries = {name for name, has in _modules().items() if has}
    smoked = {p.entry for p in SMOKE.values()} | {
        e for p in SMOKE.values() for e in p.extra_entries
    }
    listed = smoked | ELSEWHERE.keys() | SKIPPED.keys()
    missing = sorted(entries - listed)
    assert not missing, (
        f"bench modules with a __main__ entry but no smoke test: {missing}; add them to SMOKE "
        "in tests/quality/test_bench_smoke.py (or to ELSEWHERE / SKIPPED with the reason)"
    )
    assert not listed - entries, f"listed but no longer an entry point: {sorted(listed - entries)}"
    assert not smoked & (ELSEWHERE.keys() | SKIPPED.keys())  # each part in one list only


def test_libraries_are_listed_with_their_callers() -> None:
    libraries = {name for name, has in _modules().items() if not has}
    odd = sorted(libraries ^ LIBRARIES.keys())
    assert not odd, f"update LIBRARIES and the module docstring for {odd}"
    doc = __doc__ or ""
    for name in libraries - {"__init__"}:
        assert f"``{name}``" in doc, name


def test_elsewhere_names_a_test_that_runs_the_part() -> None:
    for part, test_file in ELSEWHERE.items():
        text = (REPO / test_file).read_text(encoding="utf-8")
        name = {"_ab_worker": "ab"}.get(part, part)  # started by bench.ab, for both sides
        assert f"bench.{name}" in text or f"bench import {name}" in text, (part, test_file)
