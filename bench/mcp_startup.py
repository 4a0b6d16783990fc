"""MCP server start-up: how long until a client gets its first ``tools/list`` answer.

    python -m bench.mcp_startup                 # 7 interleaved runs of each variant
    python -m bench.mcp_startup --runs 15 --json out.json
    python -m bench.mcp_startup --quick         # the CI smoke: one run, no ``mimir mcp`` variant

Each run starts a fresh process, writes the ``initialize`` request, the ``initialized``
notification and ``tools/list`` at once on its stdin (what a client does as fast as it can) and
times the first byte of each answer. The store is a fresh home with a few records (real MiniLM
embedder, unless ``--hash``). Variants, interleaved round-robin because the machine is shared:

* ``python -c pass``: the bare interpreter (the floor of any Python server);
* ``import mcp``, ``import mcp.server.mcpserver``: the SDK's own import (the floor of any server
  that answers with the SDK);
* ``mimir-mcp``: this server (``python -m mimir_integrations.cli_mcp``), whose stdlib front
  (``mimir_integrations.mcp_front``) answers ``initialize`` and ``tools/list`` from the SDK's
  recorded answers while the SDK imports (the cache is warmed by one run before measuring);
* ``mimir-mcp, no front``: the same with ``MIMIR_MCP_NO_FRONT=1``: the SDK answers everything
  (what a first start on a new install, or after an upgrade, costs);
* ``mimir mcp``: the front through the full CLI.

For the servers it also times the first ``tools/call`` (a recall) sent right after the listing:
that one waits for the store and the embedding model, which load in the background.
Figures are medians (and min/max) in milliseconds, as wall-clock time and as the process's CPU
time (user + system) at that point: on a busy shared machine the CPU time is the better guide to
what an idle machine's wall-clock time would be, since start-up is one thread.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PY = sys.executable
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
CALL_TOOL = "recall_experiences"
CALL = {
    "jsonrpc": "2.0",
    "id": 3,
    "method": "tools/call",
    "params": {"name": CALL_TOOL, "arguments": {"query": "run the test suite"}},
}


def _line(msg: dict[str, Any]) -> bytes:
    return (json.dumps(msg) + "\n").encode()


def _cpu_ms(pid: int) -> float:
    """User + system CPU time of a running process (Linux ``/proc``), in ms."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def time_plain(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = (time.perf_counter() - t0) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return {"exit": wall, "exit_cpu": cpu}


class ServerError(RuntimeError):
    """A server under measurement answered wrongly or exited early."""


def time_server(
    cmd: list[str], env: dict[str, str], cwd: str, tools: list[str]
) -> dict[str, float]:
    """Times of the first answers (ms from the process start) for one fresh server.

    ``tools``: the tool names the reference run listed, which this run must list too (the front
    answers from a recording, so a stale one shows here); empty, it is filled with this run's.
    The server's own list is the reference, never a constant: the constant went stale (and the
    bench crashed) each time the server gained a tool."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(_line(INIT) + _line(INITIALIZED) + _line(LIST))
    proc.stdin.flush()
    out: dict[str, float] = {}
    try:
        while "first_call" not in out:
            raw = proc.stdout.readline()
            if not raw:
                raise ServerError(f"server exited early: {cmd}")
            msg = json.loads(raw)
            now = (time.perf_counter() - t0) * 1000
            if msg.get("id") == 1:
                out["initialize"] = now
            elif msg.get("id") == 2:
                out["tools_list"] = now
                out["tools_list_cpu"] = _cpu_ms(proc.pid)
                _check_tools(msg, tools)
                proc.stdin.write(_line(CALL))
                proc.stdin.flush()
            elif msg.get("id") == 3:
                if "result" not in msg or msg["result"].get("isError"):
                    raise ServerError(f"the first tools/call failed: {msg}")
                out["first_call"] = now
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    return out


def _check_tools(msg: dict[str, Any], tools: list[str]) -> None:
    """The ``tools/list`` answer lists the reference tools (or becomes the reference)."""
    names = [str(t.get("name")) for t in msg.get("result", {}).get("tools", [])]
    if CALL_TOOL not in names:
        raise ServerError(f"tools/list lacks {CALL_TOOL} (the timed call): {names}")
    if not tools:
        tools.extend(names)
    elif names != tools:
        raise ServerError(f"tools/list changed between runs: {tools} then {names}")


def measure(
    runs: int, hash_embedder: bool, tmp: Path, tools: list[str], cli: bool = True
) -> dict[str, list[dict[str, float]]]:
    """Every variant's timings, ``runs`` interleaved rounds, in a fresh home under ``tmp``
    (``cli=False``: without ``mimir mcp``, the front again behind the console script)."""
    env = dict(os.environ, MIMIR_HOME=str(tmp / "home"), HF_HUB_OFFLINE="1", HOME=str(tmp))
    if hash_embedder:
        env["MIMIR_EMBEDDER"] = "hash"
    seed = (
        "from mimir_core import Mimir\n"
        "m = Mimir()\n"
        "m.record('run the test suite', 'pytest -x', 'failure', reason='ImportError')\n"
        "m.record('run the test suite', 'pip install -e . && pytest -x', 'success')\n"
    )
    subprocess.run([PY, "-c", seed], env=env, check=True, cwd=tmp)
    mimir_bin = str(Path(PY).parent / "mimir")
    server = [PY, "-m", "mimir_integrations.cli_mcp", "--interval", "3600"]
    no_front = dict(env, MIMIR_MCP_NO_FRONT="1")
    variants: dict[str, tuple[str, list[str], dict[str, str]]] = {
        "python -c pass": ("plain", [PY, "-c", "pass"], env),
        "import mcp": ("plain", [PY, "-c", "import mcp"], env),
        "import mcp.server.mcpserver": ("plain", [PY, "-c", "import mcp.server.mcpserver"], env),
        "mimir-mcp": ("server", server, env),
        "mimir-mcp, no front": ("server", server, no_front),
    }
    if cli and Path(mimir_bin).exists():
        variants["mimir mcp"] = ("server", [mimir_bin, "mcp", "--interval", "3600"], env)
    time_server(server, env, str(tmp), tools)  # records the SDK's answers for the front
    results: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    for r in range(runs):
        names = list(variants)
        names = names[r % len(names) :] + names[: r % len(names)]
        for name in names:
            kind, cmd, run_env = variants[name]
            if kind == "plain":
                results[name].append(time_plain(cmd, run_env))
            else:
                results[name].append(time_server(cmd, run_env, str(tmp), tools))
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--hash", action="store_true", help="hash embedder instead of MiniLM")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--quick", action="store_true", help="one run, without the mimir mcp variant")
    args = ap.parse_args(argv)
    if args.quick:
        args.runs = 1

    tools: list[str] = []  # the reference run's tool names
    with tempfile.TemporaryDirectory(prefix="mimir-mcp-bench-") as tmp:
        results = measure(args.runs, args.hash, Path(tmp), tools, cli=not args.quick)

    summary: dict[str, dict[str, dict[str, float]]] = {}
    print(f"{'variant':32} {'measure':12} {'median ms':>10} {'min':>7} {'max':>7}")
    for name, runs in results.items():
        summary[name] = {}
        for key in runs[0]:
            vals = [run[key] for run in runs]
            row = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
            summary[name][key] = row
            print(f"{name:32} {key:12} {row['median']:10.0f} {row['min']:7.0f} {row['max']:7.0f}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"({args.runs} runs each, {os.cpu_count()} CPUs, load average {load:.1f})")
    print(f"{len(tools)} tools listed: {', '.join(tools)}")
    if args.json:
        meta = {
            "runs": args.runs,
            "cpus": os.cpu_count(),
            "load": load,
            "hash": args.hash,
            "tools": tools,
        }
        Path(args.json).write_text(json.dumps({"meta": meta, "results": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
