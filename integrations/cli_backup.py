"""Backup subcommands: ``mimir export`` and ``mimir import`` (thin: the work is in the core)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .cli import emit, open_mimir


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``export`` and ``import``."""
    p = sub.add_parser(
        "export",
        parents=[common],
        help="write the whole store (experiences, lessons, audit log, kv) to a JSONL file",
    )
    p.add_argument(
        "-o",
        "--output",
        help="file to write (mode 0600, atomically; default mimir-export-<UTC time>.jsonl), "
        "- for stdout, or an existing FIFO or device (written through)",
    )
    p.add_argument(
        "--with-vectors",
        action="store_true",
        help="include the embeddings, so that importing the file needs no re-embedding "
        "(by default import re-embeds)",
    )
    p.set_defaults(handler=cmd_export)

    p = sub.add_parser(
        "import",
        parents=[common],
        help="import a `mimir export` file (or a mimir-learn SQLite store); adds only what is "
        "missing",
    )
    p.add_argument("file", nargs="?", help="a file written by `mimir export`")
    p.add_argument("--from-mimir-learn", metavar="PATH.db", help="a mimir-learn SQLite store")
    p.add_argument(
        "--resign",
        action="store_true",
        help="trust the file: re-sign lessons whose signature does not verify with this "
        "store's key (otherwise they are imported quarantined)",
    )
    p.add_argument(
        "--scope", default="", help="project of mimir-learn records (default: every project)"
    )
    p.set_defaults(handler=cmd_import)


def _auto_off(args: argparse.Namespace) -> Any:
    return open_mimir(args, auto_consolidate=False)


def cmd_export(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from mimir_core.ops.backup import export_store

    m = _auto_off(args)
    target = args.output or datetime.now(timezone.utc).strftime("mimir-export-%Y%m%dT%H%M%SZ.jsonl")
    if target == "-":
        report = export_store(m.deps, sys.stdout.buffer, with_vectors=args.with_vectors)
    else:
        report = export_store(m.deps, target, with_vectors=args.with_vectors)
    counts = ", ".join(f"{n} {k}" for k, n in report.counts.items())
    text = f"exported {counts} to {report.path or 'stdout'} ({report.bytes} bytes)"
    if target == "-":  # stdout holds the export: the report goes to stderr
        print(text, file=sys.stderr)
    else:
        emit(args, report, lambda: text)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from mimir_core.errors import InvalidInputError

    if bool(args.file) == bool(args.from_mimir_learn):
        raise InvalidInputError(
            "file", "give either an export FILE or --from-mimir-learn PATH.db (exactly one)"
        )
    m = _auto_off(args)
    if args.from_mimir_learn:
        from mimir_core.ops.import_mimir_learn import import_mimir_learn

        ml = import_mimir_learn(m.deps, args.from_mimir_learn, scope=args.scope)
        emit(
            args,
            ml,
            lambda: (
                f"imported {ml.added} of {ml.read} mimir-learn experience(s) "
                f"({ml.present} already present, {ml.redacted} with secrets redacted)"
            ),
        )
        return 0
    from mimir_core.ops.backup import import_store

    report = import_store(m.deps, args.file, resign=args.resign)

    def human() -> str:
        added = ", ".join(f"{n} {k}" for k, n in report.added.items())
        present = sum(report.present.values())
        lines = [f"imported {added} ({present} already present)"]
        if report.quarantined:
            lines.append(
                f"{len(report.quarantined)} lesson(s) quarantined: their signature does not "
                "verify with this store's key (same MIMIR_SIGNING_KEY, or --resign to trust them)"
            )
        if report.resigned:
            lines.append(f"{len(report.resigned)} lesson(s) re-signed with this store's key")
        return "\n".join(lines)

    emit(args, report, human)
    return 0
