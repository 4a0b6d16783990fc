"""Capture subcommands: ``mimir hook``, ``mimir ingest``, ``mimir setup``, ``mimir uninstall``.

``mimir hook`` is dispatched by :func:`mimir_integrations.cli.main` before the parser is built
(a hook runs on every tool call and must stay stdlib-only); it is registered here for ``--help``.
"""

from __future__ import annotations

import argparse
from typing import Any

from .cli import emit, open_mimir


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the capture subcommands."""
    from .hosts import hook_modules, setup_targets

    p = sub.add_parser(
        "hook",
        help="run a host hook: payload on stdin, answer on stdout (always exits 0)",
        description="Called by hosts, not by hand. Captures the event into the spool and prints "
        "the host's JSON answer (lessons to inject) when there is one.",
    )
    p.add_argument("host", nargs="?", choices=sorted(hook_modules()))
    p.add_argument(
        "--config", help="a JSON mapping for any other host (see mimir_core.ingest.capture)"
    )
    p.add_argument("--home", help="Mimir home directory")
    p.set_defaults(handler=cmd_hook)

    p = sub.add_parser("ingest", parents=[common], help="drain captured records into the store")
    p.add_argument("--consolidate", action="store_true", help="then consolidate lessons")
    p.set_defaults(handler=cmd_ingest)

    for name, verb in (("setup", "install"), ("uninstall", "remove")):
        p = sub.add_parser(name, parents=[common], help=f"{verb} Mimir's hooks and MCP server")
        p.add_argument("target", choices=sorted(setup_targets()))
        p.set_defaults(handler=cmd_setup, remove=name == "uninstall")


def cmd_hook(args: argparse.Namespace) -> int:
    from .hooks import main

    argv = [a for a in (args.host,) if a]
    for flag in ("config", "home"):
        if getattr(args, flag):
            argv += [f"--{flag}", getattr(args, flag)]
    return main(argv)


def cmd_ingest(args: argparse.Namespace) -> int:
    m = open_mimir(args)
    report = m.ingest()
    data: dict[str, Any] = {
        "ingested": report.ingested,
        "rejected": report.rejected,
        "batches": report.batches,
        "reasons": report.reasons,
        "spool": str(m.spool_dir),
        "lost": report.lost,
    }
    if args.consolidate:
        data["consolidation"] = m.consolidate()

    def human() -> str:
        line = f"ingested {report.ingested} record(s)"
        if report.rejected:
            line += (
                f"; set aside {report.rejected} bad line(s) in {m.spool_dir}/rejected.jsonl: "
                + "; ".join(report.reasons[:3])
            )
        if report.lost:
            line += f"\nwarning: {report.lost}; they cannot be recovered"
        if data.get("consolidation") is not None:
            line += f"\nconsolidated: {len(data['consolidation'].admitted)} lesson(s) admitted"
        return line

    emit(args, data, human)
    return 0


def cmd_setup(args: argparse.Namespace) -> int:
    from .setup_cmd import run

    lines = run(args.target, remove=args.remove, mimir_home=args.home)
    emit(args, lines, lambda: "\n".join(lines) or "nothing to do")
    return 0
