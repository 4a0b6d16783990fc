"""Lesson subcommands: consolidate, lessons, show, forget, pin, quarantine, retire.

The adapter reads the environment for the LLM judge (``ANTHROPIC_API_KEY``,
``ANTHROPIC_BASE_URL``, ``MIMIR_LLM_MODEL`` and the ``MIMIR_LLM_MAX_*`` caps) and hands explicit
values to the core.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from .cli import emit, open_mimir


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the lesson subcommands."""
    p = sub.add_parser(
        "consolidate", parents=[common], help="learn evidence-gated lessons from experiences"
    )
    p.add_argument("--dry-run", action="store_true", help="show what would change, write nothing")
    p.add_argument("--llm", action="store_true", help="let an LLM judge word the rules")
    p.add_argument("--force", action="store_true", help="re-examine every experience")
    p.add_argument("--auto", action="store_true", help="only if due (enough new failures and time)")
    p.set_defaults(handler=cmd_consolidate)

    p = sub.add_parser("lessons", parents=[common], help="list lessons, or those relevant to QUERY")
    p.add_argument("query", nargs="?")
    p.add_argument(
        "--status", help="candidate, active, quarantined, superseded, retired or untrusted"
    )
    p.add_argument("--scope", help="a project, or * for every project")
    p.add_argument("-k", type=int, default=5, help="at most this many relevant lessons")
    p.add_argument("--limit", type=int, default=50)
    p.set_defaults(handler=cmd_lessons)

    p = sub.add_parser("show", parents=[common], help="a lesson, its evidence and audit trail")
    p.add_argument("id")
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser("forget", parents=[common], help="really delete a lesson or experience")
    p.add_argument("id")
    p.add_argument(
        "--with-experiences", action="store_true", help="also delete the lesson's evidence"
    )
    p.set_defaults(handler=cmd_forget)

    p = sub.add_parser("pin", parents=[common], help="pin a lesson (never auto-quarantined)")
    p.add_argument("id")
    p.add_argument("--unpin", action="store_true")
    p.set_defaults(handler=cmd_pin)

    for name, help_text in (
        ("quarantine", "stop serving a lesson (kept on record)"),
        ("retire", "retire a lesson for good (kept on record)"),
    ):
        p = sub.add_parser(name, parents=[common], help=help_text)
        p.add_argument("id")
        p.add_argument("--reason", required=True, help="why (goes to the audit log)")
        p.set_defaults(handler=cmd_quarantine if name == "quarantine" else cmd_retire)


def _judge() -> Any:
    from mimir_core.errors import ConfigError
    from mimir_core.lessons.judge import AnthropicChat, LLMJudge
    from mimir_core.settings import load_settings

    key = os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        raise ConfigError("ANTHROPIC_API_KEY: set it to use --llm (or drop --llm)")
    settings = load_settings()
    chat = AnthropicChat(
        api_key=key, base_url=os.environ.get("ANTHROPIC_BASE_URL") or None, model=settings.llm_model
    )
    return LLMJudge(chat, max_calls=settings.llm_max_calls, max_tokens=settings.llm_max_tokens)


def cmd_consolidate(args: argparse.Namespace) -> int:
    from mimir_core.lessons.auto import due
    from mimir_core.lessons.render import render_report
    from mimir_core.settings import load_settings

    # No background run from inside this one (capture drained by consolidate() records).
    m = open_mimir(args, auto_consolidate=False)
    if args.auto:
        m.auto_consolidate = load_settings().auto_consolidate  # MIMIR_AUTO_CONSOLIDATE=0: never
        if not due(m.deps):
            emit(args, {"ran": False, "reason": "not due"}, lambda: "Consolidation not due yet.")
            return 0
    report = m.consolidate(
        dry_run=args.dry_run, judge=_judge() if args.llm else None, force=args.force
    )
    emit(args, report, lambda: render_report(report))
    return 0


def cmd_lessons(args: argparse.Namespace) -> int:
    from mimir_core.lessons.render import render_lessons

    m = open_mimir(args)
    if args.query:
        found = m.lessons(args.query, args.k, scope=args.scope)
        emit(args, found, lambda: render_lessons(found, f"relevant lessons for {args.query!r}"))
    elif args.status == "untrusted":  # with the reason each is not served
        from mimir_core.lessons.team import untrusted

        held = untrusted(m.deps)[: args.limit]
        out = [{"lesson": u.lesson, "reason": u.reason} for u in held]
        emit(args, out, lambda: render_untrusted(held))
    else:
        found = m.list_lessons(status=args.status, scope=args.scope, limit=args.limit)
        what = f"{args.status} lessons" if args.status else "lessons (try: mimir consolidate)"
        emit(args, found, lambda: render_lessons(found, what))
    return 0


def render_untrusted(held: list[Any]) -> str:
    from mimir_core.lessons.render import render_lesson

    if not held:
        return "no untrusted lessons"
    return "\n".join(f"{render_lesson(u.lesson)}\n    not served: {u.reason}" for u in held)


def cmd_show(args: argparse.Namespace) -> int:
    from mimir_core.lessons.render import render_detail

    detail = open_mimir(args).lesson_detail(args.id)
    emit(args, detail, lambda: render_detail(detail))
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    m = open_mimir(args)
    m.forget(args.id, with_experiences=args.with_experiences)
    extra = " and its experiences" if args.with_experiences else ""
    emit(args, {"forgotten": args.id}, lambda: f"forgot {args.id}{extra}")
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    lesson = open_mimir(args).pin_lesson(args.id, pinned=not args.unpin, actor="cli")
    emit(args, lesson, lambda: f"{'pinned' if lesson.pinned else 'unpinned'} {lesson.id}")
    return 0


def cmd_quarantine(args: argparse.Namespace) -> int:
    lesson = open_mimir(args).quarantine_lesson(args.id, args.reason, actor="cli")
    emit(args, lesson, lambda: f"quarantined {lesson.id}: {args.reason}")
    return 0


def cmd_retire(args: argparse.Namespace) -> int:
    lesson = open_mimir(args).retire_lesson(args.id, args.reason, actor="cli")
    emit(args, lesson, lambda: f"retired {lesson.id}: {args.reason}")
    return 0
