"""Team memory subcommands: ``mimir trust init|whoami|add|remove|list|pin|revalidate``.

Thin: every decision (signing, the trust list, revocation) is in
:mod:`mimir_core.lessons.team`.
"""

from __future__ import annotations

import argparse
from typing import Any

from .cli import emit, open_mimir


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``mimir trust``."""
    p = sub.add_parser("trust", parents=[common], help="team memory: whose lessons are served")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    v = verbs.add_parser("init", parents=[common], help="become the team admin of this store")
    v.add_argument("--name", help="this installation's name on the list")
    verbs.add_parser("whoami", parents=[common], help="this installation's key (published)")
    v = verbs.add_parser("add", parents=[common], help="trust a key (id or public key)")
    v.add_argument("key")
    v.add_argument("--name", help="the name to show for it")
    v = verbs.add_parser("remove", parents=[common], help="revoke a key: retire its lessons")
    v.add_argument("key")
    v.add_argument("--reason", required=True, help="why (kept in the audit log)")
    verbs.add_parser("list", parents=[common], help="the trust list and published keys")
    v = verbs.add_parser("pin", parents=[common], help="accept only this admin key's lists")
    v.add_argument("admin")
    verbs.add_parser(
        "revalidate", parents=[common], help="judge other authors' lessons on local evidence"
    )
    p.set_defaults(handler=cmd_trust)


def cmd_trust(args: argparse.Namespace) -> int:
    from mimir_core.lessons import team

    m = open_mimir(args)
    verb = args.verb
    if verb == "init":
        tl = team.init(m, name=args.name)
        me = team.whoami(m)
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
        out = team.whoami(m)
        emit(args, out, lambda: f"{out['name']} key {out['id']} (published in the store)")
    elif verb == "add":
        out = team.add(m, args.key, name=args.name)
        emit(args, out, lambda: f"trusted {out['name']} ({out['id']})")
    elif verb == "remove":
        out = team.revoke(m, args.key, reason=args.reason)
        emit(
            args,
            out,
            lambda: f"revoked {out['name']} ({out['id']}): {len(out['lessons'])} lesson(s) retired",
        )
    elif verb == "list":
        out = team.listing(m)
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
        team.pin(m, args.admin)
        out = {"pinned": args.admin}
        emit(args, out, lambda: f"pinned team admin key {args.admin}")
    else:
        from mimir_core.lessons.revalidate import revalidate

        out = revalidate(m, force=True)
        emit(args, out, lambda: "\n".join(f"{k}: {v}" for k, v in out.items()) or "no change")
    return 0
