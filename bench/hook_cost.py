"""What a host pays per hook call: ``mimir hook`` processes against a bare ``python -c pass``.

    python -m bench.hook_cost [--rounds 30] [--lessons 200] [--json] [--check]

Runs, interleaved round-robin so that machine load hits every variant alike, fresh processes of

* ``bare``: ``python -c pass`` with the same interpreter (the floor the issue compares against);
* ``bare-S``: ``python -I -S -c pass``, the same interpreter without ``site`` (the floor of the
  command ``mimir setup`` installs);
* the hook exactly as ``mimir setup claude-code`` installs it (``python -I -S -c <bootstrap>
  hook claude-code``, see ``mimir_integrations.setup_cmd.hook_launcher``) for:
* ``capture``: the hook on a ~1 KB successful ``Bash`` ``PostToolUse``, the
  commonest event (normalise, redact, cap, one ``O_APPEND`` write to the session's steps);
* ``capture-noise``: a successful ``Read`` (recognised as noise and skipped);
* ``failure``: a ``PostToolUseFailure`` (the failure spooled at once, plus a lessons lookup for
  the error, answered as ``additionalContext`` when one matches);
* ``inject``: ``mimir hook claude-code`` on a ``UserPromptSubmit`` whose prompt matches lessons in
  a signed digest of ``--lessons`` lessons (read, verify, match, render the fenced block);
* ``inject-script``: the same through the ``mimir`` console script (``mimir hook claude-code``,
  what the Claude Code plugin's ``hooks.json`` runs), for comparison;
* ``guard-new``: a ``PreToolUse`` of a ``Bash`` command never tried in this project (the repeat
  guard's usual answer: nothing), with a full attempts digest (400 tasks) and 200 records in
  the spool's tail;
* ``guard-hit``: a ``PreToolUse`` of a command that failed here (the guard reads and verifies
  the digest, folds the spool's tail in and answers with the fenced warning);

and reports wall-clock p50 / p95 and the median CPU time (user + system) of the process, which
a busy machine inflates less than wall time. Targets: capture p50 within 2x of bare, inject and
failure p50 under 100 ms, ``guard-new`` p50 within 2x of bare, ``guard-hit`` p50 under 100 ms
(``--check`` exits 1 when missed). Everything runs in a temporary home.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PY = sys.executable
MIMIR = str(Path(PY).parent / "mimir")


def _payloads() -> dict[str, bytes]:
    base = {"session_id": "bench", "transcript_path": "/t.jsonl", "cwd": os.getcwd()}
    failure = {
        **base,
        "hook_event_name": "PostToolUseFailure",
        "permission_mode": "default",
        "tool_name": "Bash",
        "tool_input": {"command": "pytest tests/integration -x -q", "description": "run tests"},
        "tool_use_id": "toolu_bench",
        "error": "Exit code 1\n"
        + 'E   sqlalchemy.exc.ProgrammingError: relation "orders" does not exist\n' * 10,
        "is_interrupt": False,
    }
    step = {
        **base,
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "npm run build -- --prod", "description": "build the app"},
        "tool_response": {"stdout": "built in 2.1s\n" * 20, "stderr": "", "interrupted": False},
        "tool_use_id": "toolu_step",
    }
    read = {
        **base,
        "hook_event_name": "PostToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": "/repo/app/models.py"},
        "tool_response": {"type": "text", "file": {"content": "x = 1\n" * 100}},
        "tool_use_id": "toolu_read",
    }
    prompt = {
        **base,
        "hook_event_name": "UserPromptSubmit",
        "permission_mode": "default",
        "prompt": "the payments integration tests fail: relation orders does not exist",
    }
    new = {
        **base,
        "hook_event_name": "PreToolUse",
        "permission_mode": "default",
        "tool_name": "Bash",
        "tool_input": {"command": "npm run build -- --prod", "description": "build the app"},
        "tool_use_id": "toolu_pre",
    }
    hit = {**new, "tool_input": {"command": GUARDED, "description": "deploy"}}
    pairs = (("s", step), ("f", failure), ("r", read), ("p", prompt), ("n", new), ("h", hit))
    return {k: json.dumps(v).encode() for k, v in pairs}


_WORDS = [
    "api",
    "auth",
    "billing",
    "build",
    "cache",
    "celery",
    "certificate",
    "ci",
    "cluster",
    "cron",
    "database",
    "deploy",
    "docker",
    "dns",
    "email",
    "flaky",
    "gateway",
    "gradle",
    "helm",
    "image",
    "index",
    "ingress",
    "invoice",
    "job",
    "kafka",
    "kubernetes",
    "lambda",
    "latency",
    "lint",
    "login",
    "memory",
    "migration",
    "mobile",
    "monorepo",
    "nginx",
    "node",
    "oauth",
    "orm",
    "pagination",
    "pipeline",
    "pod",
    "postgres",
    "proxy",
    "pytest",
    "queue",
    "quota",
    "rabbitmq",
    "react",
    "redis",
    "release",
    "replica",
    "rollback",
    "rust",
    "s3",
    "schema",
    "search",
    "secret",
    "sentry",
    "session",
    "shard",
    "signup",
    "sitemap",
    "snapshot",
    "spark",
    "sql",
    "ssl",
    "staging",
    "storage",
    "stripe",
    "swagger",
    "terraform",
    "timeout",
    "token",
    "tracing",
    "typescript",
    "upload",
    "vault",
    "vpn",
    "webhook",
    "webpack",
    "worker",
    "yaml",
    "zookeeper",
]


def _seed_digest(home: Path, n: int) -> None:
    """A signed digest of ``n`` lessons on varied topics; one matches the benchmark prompt."""
    import random

    from mimir_core.lessons.sign import load_or_create_key
    from mimir_core.tools.digest import write_digest

    rng = random.Random(7)
    lessons: list[dict[str, Any]] = [
        {
            "id": "0" * 16,
            "rule": "Run the migrations (alembic upgrade head) before the payments tests.",
            "trigger": "payments integration tests fail: relation orders does not exist",
            "kind": "procedure",
            "scope": "",
            "confidence": 0.8,
        }
    ]
    for i in range(1, n):
        words = rng.sample(_WORDS, 6)
        lessons.append(
            {
                "id": f"{i:016x}",
                "rule": f"When {words[0]} {words[1]} breaks, check {words[2]} {words[3]} first.",
                "trigger": f"{' '.join(words)} error E{1000 + i}",
                "kind": "procedure",
                "scope": "",
                "confidence": 0.5 + (i % 5) / 10,
            }
        )
    write_digest(home, lessons, load_or_create_key(home))


GUARDED = "make deploy-staging"


def _seed_attempts(home: Path, tasks: int = 400, pending: int = 200) -> int:
    """A full attempts digest for the benchmark's project (``tasks`` distinct tasks, three
    actions each; the guarded command failed on one of them) and ``pending`` spooled records
    not yet drained, as a busy project's hooks would find them."""
    import random

    from mimir_core.ingest import spool
    from mimir_core.lessons.sign import load_or_create_key
    from mimir_core.observations.attempt_digest import update
    from mimir_core.scope import scope_for

    rng = random.Random(11)
    scope = scope_for(os.getcwd())
    spool_dir = spool.spool_dir(home)
    records: list[dict[str, Any]] = []
    for i in range(tasks):
        words = rng.sample(_WORDS, 5)
        task = f"fix the {' '.join(words)} problem #{i}"
        for j, action in enumerate((f"pytest tests/{words[0]}", f"make {words[1]}", "npm ci")):
            records.append(
                {
                    "task": task,
                    "action": action,
                    "outcome": "success" if (i + j) % 3 else "failure",
                    "reason": f"Exit code 1\n{words[2]} error E{i}",
                    "scope": scope,
                    "session_id": f"s{i % 40}",
                    "created_at": 1_700_000_000.0 + i,
                    "idempotency_key": f"bench:{i}:{j}",
                }
            )
    newest = 1_700_000_000.0 + tasks  # the guarded command failed last (nothing faded it)
    guarded = {"action": GUARDED, "outcome": "failure", "created_at": newest}
    records.append({**records[0], **guarded, "idempotency_key": "g"})
    update(spool_dir, scope, records, load_or_create_key(home))
    for k in range(pending):
        spool.append(spool_dir, {**records[k], "idempotency_key": f"pending:{k}"})
    return pending


def installed_hook() -> list[str]:
    """The hook command ``mimir setup claude-code`` writes into ``settings.json``."""
    from mimir_integrations.setup_cmd import SetupEnv

    return shlex.split(SetupEnv().hook_command("claude-code"))


def _variants(home: Path) -> dict[str, tuple[list[str], bytes]]:
    p = _payloads()
    hook = installed_hook()
    return {
        "bare": ([PY, "-c", "pass"], b""),
        "bare-S": ([PY, "-I", "-S", "-c", "pass"], b""),
        "capture": (hook, p["s"]),
        "capture-noise": (hook, p["r"]),
        "failure": (hook, p["f"]),
        "inject": (hook, p["p"]),
        "inject-script": ([MIMIR, "hook", "claude-code"], p["p"]),
        "guard-new": (hook, p["n"]),
        "guard-hit": (hook, p["h"]),
    }


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(rounds: int, lessons: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mimir-hook-bench-") as tmp:
        home = Path(tmp)
        _seed_digest(home, lessons)
        seeded = _seed_attempts(home)
        env = {**os.environ, "MIMIR_HOME": str(home), "MIMIR_AUTO_CONSOLIDATE": "0"}
        variants = _variants(home)
        times: dict[str, list[float]] = {name: [] for name in variants}
        cpu: dict[str, list[float]] = {name: [] for name in variants}
        for cmd, data in variants.values():  # warm the page cache and .pyc files
            subprocess.run(cmd, input=data, capture_output=True, env=env, check=True)
        injected = subprocess.run(
            variants["inject"][0],
            input=variants["inject"][1].replace(b'"bench"', b'"bench-check"'),
            capture_output=True,
            env=env,
        ).stdout
        for i in range(rounds):
            for name, (cmd, data) in variants.items():
                # A new session each round: a repeated payload would be skipped as a duplicate,
                # and a lessons block already given to a session is not given again.
                data = data.replace(b'"bench"', f'"bench-{i}"'.encode())
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run(cmd, input=data, capture_output=True, env=env, check=True)
                times[name].append((time.perf_counter() - start) * 1000)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                cpu[name].append(used * 1000)
        guarded = subprocess.run(
            variants["guard-hit"][0],
            input=variants["guard-hit"][1].replace(b'"bench"', b'"bench-guard"'),
            capture_output=True,
            env=env,
        ).stdout
        pending = home / "spool" / "local" / "pending.jsonl"
        spooled = pending.read_bytes().count(b"\n") - seeded
    result: dict[str, Any] = {
        name: {
            "p50_ms": round(statistics.median(v), 1),
            "p95_ms": round(_pct(v, 0.95), 1),
            "cpu_p50_ms": round(statistics.median(cpu[name]), 1),
        }
        for name, v in times.items()
    }
    bare = result["bare"]["p50_ms"]
    result["capture_over_bare"] = round(result["capture"]["p50_ms"] / bare, 2)
    result["capture_over_bare_cpu"] = round(
        result["capture"]["cpu_p50_ms"] / result["bare"]["cpu_p50_ms"], 2
    )
    result["capture_over_bare_S"] = round(
        result["capture"]["p50_ms"] / result["bare-S"]["p50_ms"], 2
    )
    result["guard_new_over_bare"] = round(result["guard-new"]["p50_ms"] / bare, 2)
    result["guard_answered"] = b"failed here before" in guarded
    result["hook_command"] = shlex.join(installed_hook())
    result["rounds"] = rounds
    result["lessons_in_digest"] = lessons
    result["inject_answered"] = b"additionalContext" in injected
    result["records_spooled"] = spooled  # by the measured hooks (not the seeded tail)
    result["targets_met"] = bool(
        result["capture_over_bare"] <= 2.0
        and result["inject"]["p50_ms"] <= 100.0
        and result["failure"]["p50_ms"] <= 100.0
        and result["inject_answered"]
        and result["guard_new_over_bare"] <= 2.0
        and result["guard-hit"]["p50_ms"] <= 100.0
        and result["guard_answered"]
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hook_cost", description=__doc__)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--lessons", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args(argv)
    res = measure(args.rounds, args.lessons)
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print(f"hook cost, {args.rounds} interleaved rounds ({args.lessons} lessons in digest)")
        print(f"{'variant':<15} {'p50 ms':>8} {'p95 ms':>8} {'CPU p50 ms':>11}")
        for name in (
            "bare",
            "bare-S",
            "capture",
            "capture-noise",
            "failure",
            "inject",
            "inject-script",
            "guard-new",
            "guard-hit",
        ):
            r = res[name]
            print(f"{name:<15} {r['p50_ms']:>8} {r['p95_ms']:>8} {r['cpu_p50_ms']:>11}")
        print(
            f"capture / bare = {res['capture_over_bare']}x wall, "
            f"{res['capture_over_bare_cpu']}x CPU (target <= 2x), "
            f"{res['capture_over_bare_S']}x over bare -I -S; "
            f"inject p50 {res['inject']['p50_ms']} ms (target <= 100); "
            f"guard-new / bare = {res['guard_new_over_bare']}x (target <= 2x), "
            f"guard-hit p50 {res['guard-hit']['p50_ms']} ms (target <= 100); "
            f"targets met: {res['targets_met']}"
        )
    return 0 if res["targets_met"] or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
