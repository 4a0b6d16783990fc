"""Team memory subcommands: ``mimir trust init|whoami|add|remove|list|pin|revalidate``.

Thin: every decision (signing, the trust list, revocation) is in
:mod:`mimir_core.lessons.team`.
"""

from __future__ import annotations

import argparse
from typing import Any

from .cli import emit, open_mimir

VERBS = ("init", "whoami", "add", "remove", "list", "pin", "revalidate")
NEEDS_KEY = {"add": "KEY (a key id or public key)", "remove": "KEY", "pin": "ADMIN_ID"}


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``mimir trust``."""
    p = sub.add_parser(
        "trust",
        parents=[common],
        help="team memory: init (become admin), whoami, add/remove KEY, list, pin ADMIN_ID, "
        "revalidate",
    )
    p.add_argument("verb", choices=VERBS)
    p.add_argument("key", nargs="?", help="a key id (add, remove) or the admin key id (pin)")
    p.add_argument("--name", help="the name to show for the key (init, add)")
    p.add_argument("--reason", help="why a key is revoked (remove; kept in the audit log)")
    p.set_defaults(handler=cmd_trust)


def cmd_trust(args: argparse.Namespace) -> int:
    from mimir_core.errors import InvalidInputError
    from mimir_core.lessons import team

    verb = args.verb
    if verb in NEEDS_KEY and not args.key:
        raise InvalidInputError("key", f"mimir trust {verb} needs {NEEDS_KEY[verb]}")
    if verb == "remove" and not (args.reason or "").strip():
        raise InvalidInputError("reason", "mimir trust remove needs --reason (for the audit log)")
    m = open_mimir(args)
    if verb == "init":
        tl = team.init(m.deps, name=args.name)
        me = team.whoami(m.deps)
        out: Any = {"admin": tl.admin, "version": tl.version, "trusted": me}
        emit(
            args,
            out,
            lambda: (
                f"team admin key {tl.admin} (pin it on every machine: "
                f"mimir trust pin {tl.admin}); trusted {me['name']} ({me['id']})"
            ),
        )
    elif verb == "whoami":
        out = team.whoami(m.deps)
        emit(args, out, lambda: f"{out['name']} key {out['id']} (published in the store)")
    elif verb == "add":
        out = team.add(m.deps, args.key, name=args.name)
        emit(args, out, lambda: f"trusted {out['name']} ({out['id']})")
    elif verb == "remove":
        out = team.revoke(m.deps, args.key, reason=args.reason)
        emit(
            args,
            out,
            lambda: f"revoked {out['name']} ({out['id']}): {len(out['lessons'])} lesson(s) retired",
        )
    elif verb == "list":
        out = team.listing(m.deps)
        emit(
            args,
            out,
            lambda: (
                "\n".join(
                    f"{e['status']:9} {e['id']} {e.get('name', '')}"
                    + (f" ({e['reason']})" if e.get("reason") else "")
                    for e in out
                )
                or "no trust list (single-machine store): `mimir trust init` starts one"
            ),
        )
    elif verb == "pin":
        team.pin(m.deps, args.admin)
        out = {"pinned": args.admin}
        emit(args, out, lambda: f"pinned team admin key {args.admin}")
    else:
        from mimir_core.lessons.revalidate import revalidate

        out = revalidate(m.deps, force=True)
        emit(args, out, lambda: "\n".join(f"{k}: {v}" for k, v in out.items()) or "no change")
    return 0
