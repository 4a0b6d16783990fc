"""Core subcommands: demo, record, recall, recommend, attempts, stats, doctor, reindex."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .cli import emit, open_mimir


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the core subcommands."""
    demo_common = argparse.ArgumentParser(add_help=False)  # its --home has another default
    demo_common.add_argument(
        "--home",
        help="store to run the demo in (default: a fresh temporary store, "
        "$TMPDIR/mimir-demo-<uid>, emptied by the next run)",
    )
    demo_common.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p = sub.add_parser(
        "demo", parents=[demo_common], help="run the whole loop on a temporary store"
    )
    p.set_defaults(handler=cmd_demo)

    p = sub.add_parser("record", parents=[common], help="record one experience")
    p.add_argument("--task", required=True)
    p.add_argument("--action", required=True)
    p.add_argument("--outcome", required=True, help="success, failure or partial")
    p.add_argument("--score", type=float)
    p.add_argument("--reason")
    p.add_argument("--context", help="a JSON object")
    p.add_argument("--scope")
    p.add_argument("--source", default="cli")
    p.add_argument("--session-id")
    p.add_argument("--key", dest="idempotency_key", help="idempotency key")
    p.set_defaults(handler=cmd_record)

    p = sub.add_parser("recall", parents=[common], help="recall relevant past attempts")
    p.add_argument("query")
    p.add_argument("-k", type=int, default=5)
    p.add_argument("--outcome")
    p.add_argument("--scope", help="a project, or * for every project")
    p.add_argument("--since", help="ISO time or epoch seconds")
    p.add_argument("--include-superseded", action="store_true")
    p.set_defaults(handler=cmd_recall)

    p = sub.add_parser("recommend", parents=[common], help="the best-supported action")
    p.add_argument("task")
    p.add_argument("--explore", action="store_true", help="Thompson sampling")
    p.add_argument("--scope")
    p.add_argument("--seed", type=int)
    p.set_defaults(handler=cmd_recommend)

    p = sub.add_parser("attempts", parents=[common], help="earlier tries of one action")
    p.add_argument("action")
    p.add_argument("--task", help="leave out attempts on unrelated tasks")
    p.add_argument("--match", default="exact", help="exact or signature")
    p.add_argument("-k", type=int, default=20)
    p.add_argument("--scope", help="a project, or * for every project")
    p.set_defaults(handler=cmd_attempts)

    p = sub.add_parser("stats", parents=[common], help="summarise the store")
    p.set_defaults(handler=cmd_stats)

    p = sub.add_parser("doctor", parents=[common], help="check the installation and the store")
    p.add_argument(
        "--repair",
        action="store_true",
        help="back the store up, then repair what can be repaired (damaged tables, file modes, "
        "an interrupted drain or reindex, missing indexes, fragmentation)",
    )
    p.set_defaults(handler=cmd_doctor)

    p = sub.add_parser("reindex", parents=[common], help="re-embed everything")
    p.set_defaults(handler=cmd_reindex)


def cmd_record(args: argparse.Namespace) -> int:
    from mimir_core.errors import InvalidInputError

    context = None
    if args.context:
        try:
            context = json.loads(args.context)
        except json.JSONDecodeError as exc:
            raise InvalidInputError("context", f"is not valid JSON ({exc.msg})") from exc
        except RecursionError:
            raise InvalidInputError("context", "is nested too deeply to parse") from None
    m = open_mimir(args)
    exp = m.record(
        args.task,
        args.action,
        args.outcome,
        score=args.score,
        reason=args.reason,
        context=context,
        scope=args.scope,
        source=args.source,
        session_id=args.session_id,
        idempotency_key=args.idempotency_key,
    )
    emit(args, exp, lambda: f"recorded {exp.outcome} {exp.id}")
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    from mimir_core.tools.render import render_hits

    m = open_mimir(args)
    hits = m.recall(
        args.query,
        args.k,
        outcome=args.outcome,
        scope=args.scope,
        since=_since(args.since),
        include_superseded=args.include_superseded,
    )
    emit(args, hits, lambda: render_hits(hits, args.query))
    return 0


def _since(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return value


def cmd_recommend(args: argparse.Namespace) -> int:
    from mimir_core.tools.render import render_recommendation

    m = open_mimir(args)
    rec = m.recommend(args.task, explore=args.explore, scope=args.scope, seed=args.seed)
    emit(args, rec, lambda: render_recommendation(rec, args.task))
    return 0


def cmd_attempts(args: argparse.Namespace) -> int:
    from mimir_core.tools.render import render_attempts

    m = open_mimir(args)
    hits = m.attempts(args.action, task=args.task, scope=args.scope, match=args.match, k=args.k)
    emit(args, hits, lambda: render_attempts(hits, args.action, args.k))
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from mimir_core.tools.render import render_stats

    stats = open_mimir(args).stats()
    emit(args, stats, lambda: render_stats(stats))
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    m = open_mimir(args)
    n = m.reindex()
    emit(
        args,
        {"reindexed": n, "embedder": m.embedder.name},
        lambda: f"re-embedded {n} experience(s) with {m.embedder.name}",
    )
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from mimir_core.ops.doctor import repair, run_checks

    if args.repair:
        report = repair(open_mimir(args))

        def summary() -> str:
            lines = [f"backed up to {report['backup']}"] if report["backup"] else []
            lines += [f"repaired: {a}" for a in report["actions"]]
            lines += [f"not repaired: {p}" for p in report["problems"]]
            lines += [f"note: {n}" for n in report["notes"]]
            if not report["actions"] and not report["problems"]:
                lines.append("nothing to repair")
            return "\n".join(lines)

        emit(args, report, summary)
        return 1 if report["problems"] else 0
    checks = run_checks(open_mimir(args))
    ok = all(c["ok"] for c in checks)

    def human() -> str:
        lines = [f"{'✓' if c['ok'] else '✗'} {c['check']}: {c['detail']}" for c in checks]
        lines.append("all good" if ok else "problems found")
        return "\n".join(lines)

    emit(args, {"ok": ok, "checks": checks}, human)
    return 0 if ok else 1


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(args)
