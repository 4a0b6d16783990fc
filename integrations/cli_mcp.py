"""``mimir mcp`` (and the ``mimir-mcp`` script): serve Mimir to MCP clients.

Over stdio by default (what Claude Code, Claude Desktop, Codex, Cursor and Cline launch), or over
streamable HTTP with ``--http`` on 127.0.0.1. Binding any other address needs ``--allow-remote``
and a bearer token (``--token`` or ``MIMIR_MCP_TOKEN``). Logs go to ``<home>/logs/mcp.log`` and
stderr, never to stdout (it carries the protocol).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

DEFAULT_PORT = 8765
TOKEN_ENV = "MIMIR_MCP_TOKEN"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``mimir mcp``."""
    p.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP port ({DEFAULT_PORT})")
    p.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --host (requires a bearer token)",
    )
    p.add_argument("--token", help=f"bearer token clients must send (or ${TOKEN_ENV})")
    p.add_argument(
        "--interval",
        type=float,
        default=30.0,
        help="seconds between background rounds (spool drain, auto-consolidation)",
    )
    p.add_argument("--no-background", action="store_true", help="no background upkeep")
    p.set_defaults(handler=cmd_mcp)


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``mimir mcp``."""
    p = sub.add_parser("mcp", parents=[common], help="serve Mimir to MCP clients (stdio or HTTP)")
    add_arguments(p)


def _setup_logging(home: os.PathLike[str] | str, level: str) -> None:
    """WARNING and up on stderr, INFO and up in ``<home>/logs/mcp.log`` (private)."""
    import logging
    from pathlib import Path

    root = logging.getLogger()
    if root.handlers:  # already configured by the embedding program
        return
    fmt = logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")
    err = logging.StreamHandler(sys.stderr)
    err.setLevel(level.upper() if level.upper() in logging._nameToLevel else "WARNING")
    err.setFormatter(fmt)
    root.addHandler(err)
    try:
        logs = Path(home).expanduser() / "logs"
        logs.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = logs / "mcp.log"
        os.close(os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600))
        file = logging.FileHandler(path, encoding="utf-8")
        file.setLevel(logging.INFO)
        file.setFormatter(fmt)
        root.addHandler(file)
    except OSError as exc:  # an unwritable home must not stop the server
        logging.getLogger("mimir.mcp").warning("no log file: %s", exc)
    root.setLevel(logging.INFO)
    for noisy in ("mcp", "httpx", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve until the client hangs up (stdio) or the process is interrupted (HTTP)."""
    front = None
    if not args.http and os.environ.get("MIMIR_MCP_NO_FRONT", "").strip() in ("", "0"):
        # Before any heavy import: answer the handshake and tools/list from the SDK's cached
        # answers while the SDK (and pydantic) load.
        from . import mcp_front

        early_home = getattr(args, "home", None) or os.environ.get("MIMIR_HOME") or "~/.mimir"
        front = mcp_front.start(os.path.expanduser(early_home))
    try:
        return _serve(args, front)
    finally:
        if front is not None:
            front.close()


def _serve(args: argparse.Namespace, front: Any) -> int:
    from pathlib import Path

    from mimir_core.errors import ConfigError
    from mimir_core.settings import MimirSettings, load_settings

    from .cli import open_mimir
    from .http_guard import check_bind

    token = args.token or os.environ.get(TOKEN_ENV) or None
    if args.http:
        check_bind(args.host, allow_remote=args.allow_remote, token=token)
    try:
        settings = load_settings()
        broken: ConfigError | None = None
    except ConfigError as exc:
        # A stdio client may already have its handshake and tools/list (the front answers them
        # from its cache): dying now would look like a crash on the first call. Serve instead,
        # with the defaults, and let every call and resource read say what is wrong.
        if args.http:
            raise
        env_home = os.environ.get("MIMIR_HOME", "").strip()
        defaults: dict[str, Any] = {"home": Path(env_home).expanduser()} if env_home else {}
        settings, broken = MimirSettings.model_construct(**defaults), exc
    home = Path(args.home).expanduser() if getattr(args, "home", None) else settings.home
    _setup_logging(home, settings.log_level)
    os.environ.setdefault("LANCE_LOG", "error")
    if broken is not None:
        import logging

        logging.getLogger("mimir.mcp").error("bad configuration (every call says so): %s", broken)

    from .mcp_server import build_server  # OptionalDependencyError without the mcp extra

    def factory() -> Any:
        if broken is not None:
            raise ConfigError(str(broken))
        return open_mimir(args)

    server = build_server(
        factory,
        background=not args.no_background and broken is None,
        interval=args.interval,
        log_level=settings.log_level,
    )
    try:
        if args.http:
            from .mcp_http import serve_http

            serve_http(server, host=args.host, port=args.port, path=args.path, token=token)
        else:
            if front is not None:
                front.sdk_ready()
            server.run("stdio")
    finally:
        server.maintainer.stop(timeout=10.0)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The ``mimir-mcp`` console script: ``mimir mcp`` without the rest of the CLI."""
    from .cli import private_files, run_handler

    private_files()

    parser = argparse.ArgumentParser(prog="mimir-mcp", description="Serve Mimir over MCP.")
    parser.add_argument("--home", help="Mimir home directory (default: $MIMIR_HOME or ~/.mimir)")
    add_arguments(parser)
    return run_handler("mimir-mcp", cmd_mcp, parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
