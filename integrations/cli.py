"""The ``mimir`` command: a thin adapter from the command line to :class:`mimir_core.Mimir`.

Every subcommand takes ``--home`` (which store) and ``--json`` (machine-readable output). Errors
print one line on stderr and exit non-zero. Later features register their subcommands by adding
a module to :data:`COMMAND_MODULES` (each has ``register(subparsers, common)``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # argparse, json and pathlib load lazily: ``mimir hook`` runs on every tool call
    import argparse

#: Modules that add subcommands: ``register(subparsers, common_parser)``.
COMMAND_MODULES: list[str] = [
    "mimir_integrations.cli_core",
    "mimir_integrations.cli_capture",
    "mimir_integrations.cli_mcp",
    "mimir_integrations.cli_lessons",
    "mimir_integrations.ui.cli",
    "mimir_integrations.cli_backup",
    "mimir_integrations.cli_trust",
]

Handler = Callable[["argparse.Namespace"], int]


def open_mimir(args: argparse.Namespace, **overrides: Any) -> Any:
    """A :class:`Mimir` for the parsed arguments (``--home``), scoped to the current project."""
    from mimir_core.errors import InvalidInputError
    from mimir_core.memory import Mimir
    from mimir_core.scope import scope_for
    from mimir_core.settings import load_settings

    settings = load_settings()
    home = getattr(args, "home", None)
    if home is not None:
        from pathlib import Path

        if not home.strip():  # Path("") would be the current directory
            raise InvalidInputError("--home", "must not be empty (omit it for $MIMIR_HOME)")
        settings.home = Path(home).expanduser()
        if not os.environ.get("MIMIR_STORE_URI"):
            settings.store_uri = None
    kwargs: dict[str, Any] = {"scope": settings.scope or scope_for(os.getcwd())}
    kwargs.update(overrides)
    return Mimir.from_settings(settings, **kwargs)


def emit(args: argparse.Namespace, data: Any, human: Callable[[], str]) -> None:
    """Print ``data`` as JSON with ``--json``, else the human rendering."""
    if getattr(args, "json", False):
        import json

        from mimir_core.errors import MimirError

        try:  # strict JSON: NaN and Infinity are not JSON
            text = json.dumps(to_jsonable(data), ensure_ascii=False, indent=2, allow_nan=False)
        except ValueError as exc:
            raise MimirError(f"cannot print JSON: {exc}") from exc
        print(text)
    else:
        print(printable(human()))


def printable(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` safe for a terminal: control characters (ESC, BEL, CR, ...; newlines and tabs
    too unless ``keep_newlines``) are shown escaped (``\\x1b``) instead of acting on it."""
    import re

    pattern = r"[\x00-\x08\x0b-\x1f\x7f-\x9f]" if keep_newlines else r"[\x00-\x1f\x7f-\x9f]"
    return re.sub(pattern, lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def to_jsonable(data: Any) -> Any:
    """Pydantic models and containers of them as plain JSON data."""
    if hasattr(data, "model_dump"):
        return data.model_dump(mode="json")
    if isinstance(data, (list, tuple)):
        return [to_jsonable(d) for d in data]
    if isinstance(data, dict):
        return {k: to_jsonable(v) for k, v in data.items()}
    return data


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every registered subcommand."""
    import argparse

    class OneLineParser(argparse.ArgumentParser):
        """Usage errors (``--score abc``, a missing argument) are one line on stderr, exit 1,
        like every other error (``-h`` still shows the usage)."""

        def error(self, message: str) -> NoReturn:
            self.exit(1, f"{self.prog}: error: {printable(message, keep_newlines=False)}\n")

    import importlib

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", help="Mimir home directory (default: $MIMIR_HOME or ~/.mimir)")
    common.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser = OneLineParser(
        prog="mimir",
        description="Experience-driven memory for agents.",
    )
    from mimir_core import __version__

    parser.add_argument("--version", action="version", version=f"mimir {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub, common)
    return parser


def private_files() -> None:
    """Make every file this process creates private to its user (umask 077 on top of the
    user's own). Mimir writes its own files 0600 whatever the umask; LanceDB's store files
    take the process umask. Only Mimir's own processes do this (this command, hence the
    background ingest a hook starts, and the MCP server; hook processes never open the store):
    a host that embeds Mimir keeps its umask (the store directory is 0700)."""
    os.umask(os.umask(0o077) | 0o077)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``mimir`` command; returns the exit code."""
    private_files()
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["hook"] and not {"-h", "--help"} & set(args_list):
        # A hook runs on every tool call: dispatch before any command module is imported.
        from .hooks import main as hook_main

        return hook_main(args_list[1:])
    # LanceDB's native logger prints warnings on stderr by default; a CLI user wants only errors.
    os.environ.setdefault("LANCEDB_LOG", "error")
    parser = build_parser()
    args = parser.parse_args(argv)
    return run_handler("mimir", args.handler, args)


def run_handler(prog: str, handler: Handler, args: argparse.Namespace) -> int:
    """Run a command's handler: a :class:`MimirError` or a crash is one line on stderr, exit 1."""
    from mimir_core.errors import MimirError

    try:
        return handler(args)
    except MimirError as exc:
        print(f"{prog}: error: {printable(str(exc), keep_newlines=False)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # one clear line, never a stack trace (MIMIR_DEBUG=1 shows it)
        if os.environ.get("MIMIR_DEBUG"):
            raise
        from pydantic import ValidationError
        from pydantic_settings import SettingsError

        if isinstance(exc, (ValidationError, SettingsError)):  # MimirSettings() built elsewhere
            from mimir_core.settings import settings_error

            msg = printable(str(settings_error(exc)), keep_newlines=False)
            print(f"{prog}: error: {msg}", file=sys.stderr)
            return 1
        msg = printable(f"{type(exc).__name__}: {exc}", keep_newlines=False)
        print(f"{prog}: unexpected error: {msg}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
