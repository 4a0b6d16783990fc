"""``mimir ui``: serve the web app on 127.0.0.1 (a free port unless ``--port``), printed on stdout.

Binding a non-loopback address needs ``--allow-remote`` and an access token (``--token`` or
``MIMIR_UI_TOKEN``, at least 16 characters, no spaces) that every request must carry; only the
bind address, loopback names and the ``--allowed-host`` names are accepted as Host headers. The
web stack (the ``ui`` extra) loads only when the command runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``mimir ui``."""
    p = sub.add_parser("ui", parents=[common], help="a local web app: what was learned, and why")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    p.add_argument("--open", action="store_true", help="open the page in a browser")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --host (needs --token: every request must carry it)",
    )
    p.add_argument(
        "--token",
        help=f"access token remote clients must present (or ${TOKEN_ENV}); at least "
        f"{MIN_TOKEN} characters, no spaces; open the UI once as /?token=<token>",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name clients use to reach a remote UI (repeatable; the bind address and "
        "loopback names are always allowed)",
    )
    p.add_argument("--bench-dir", default="bench/results", help="where learning*.json live")
    p.add_argument("--poll", type=float, default=3.0, help="seconds between live updates")
    p.set_defaults(handler=cmd_ui)


TOKEN_ENV = "MIMIR_UI_TOKEN"
MIN_TOKEN = 16


def check_token(token: str | None) -> str:
    """The access token of a remote UI: required, at least :data:`MIN_TOKEN` characters, no
    whitespace (:class:`ConfigError` otherwise)."""
    from mimir_core.errors import ConfigError

    if not token:
        raise ConfigError(
            f"--allow-remote needs an access token: pass --token or set {TOKEN_ENV} (anyone who "
            f"can reach the port could otherwise read and delete memory)"
        )
    if len(token) < MIN_TOKEN or any(c.isspace() for c in token):
        raise ConfigError(
            f"the access token must be at least {MIN_TOKEN} characters long, without spaces"
        )
    return token


def remote_hosts(host: str, extra: list[str]) -> list[str]:
    """Host headers a remote UI accepts: loopback names, the bind address (unless it is a
    wildcard) and the names the user gave."""
    from .app import LOOPBACK_HOSTS

    bound = [] if host.strip("[]") in ("0.0.0.0", "::", "") else [host, f"[{host.strip('[]')}]"]
    return list(dict.fromkeys([*LOOPBACK_HOSTS, *bound, *extra]))


def check_host(host: str, allow_remote: bool) -> None:
    """Refuse a non-loopback bind address unless explicitly allowed (:class:`InvalidInputError`)."""
    import ipaddress

    from mimir_core.errors import InvalidInputError

    if host == "localhost" or allow_remote:
        return
    try:
        loopback = ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise InvalidInputError(
            "host", f"{host!r} is not a loopback address; pass --allow-remote to serve it"
        )


def cmd_ui(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
    import json
    import logging
    import os
    import socket
    import webbrowser

    from mimir_core.errors import InvalidInputError
    from mimir_core.hosting.background import Maintainer

    from ..cli import open_mimir
    from .app import LOOPBACK_HOSTS, create_app

    check_host(args.host, args.allow_remote)
    token = None
    if args.allow_remote:
        token = check_token(args.token or os.environ.get(TOKEN_ENV) or None)
    if not 0 <= args.port <= 65535:
        raise InvalidInputError("port", f"must be from 0 to 65535; got {args.port}")
    from mimir_core.extras import requires_extra

    with requires_extra("mimir ui", "ui"):
        import uvicorn
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    m = open_mimir(args)
    m.stats()  # open (and migrate) the store before serving: errors are one line, not a page
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host.strip("[]"), args.port))
    except OSError as exc:
        raise InvalidInputError("port", f"cannot bind {args.host}:{args.port}: {exc}") from exc
    port = sock.getsockname()[1]
    hosts = remote_hosts(args.host, args.allowed_host) if args.allow_remote else LOOPBACK_HOSTS
    app = create_app(
        m,
        bench_dir=args.bench_dir,
        allowed_hosts=hosts,
        poll_seconds=args.poll,
        access_token=token,
    )
    shown = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    url = f"http://{shown}:{port}/"
    if args.json:
        print(json.dumps({"url": url, "host": args.host, "port": port}), flush=True)
    else:
        print(f"Mimir UI on {url} (Ctrl-C to stop)", flush=True)
    if args.allow_remote:
        print(
            f"mimir ui: warning: serving beyond loopback; open {url}?token=<your token> once, "
            f"Host headers accepted: {', '.join(hosts)}",
            file=sys.stderr,
        )
    if args.open:
        webbrowser.open(url)
    # Load the model now and drain hooks' spool so captured records show up live.
    upkeep = Maintainer(lambda: m, interval=max(args.poll, 5.0), consolidate=False)
    upkeep.start()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        upkeep.stop()
    return 0
