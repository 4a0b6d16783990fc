"""``docs/configuration.md``'s table of settings, generated from :class:`MimirSettings`.

The page is written by hand around a block between two markers; the block is rendered here from
the settings class (each field's env var, type, default and docstring), so the documentation
cannot drift from the code. ``tests/unit/test_docs_config.py`` fails when the page is stale.

Run ``python -m mimir_core.settings_doc --write`` to update the page (``--check`` only checks,
no argument prints the block).
"""

from __future__ import annotations

import argparse
import sys
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .settings import ENV_PREFIX, MimirSettings

BEGIN = "<!-- BEGIN GENERATED SETTINGS: python -m mimir_core.settings_doc --write -->"
END = "<!-- END GENERATED SETTINGS -->"
PAGE = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
COMMAND = "python -m mimir_core.settings_doc --write"


def type_name(annotation: Any) -> str:
    """A reader's name for a field's type: what to write in the variable, not Python's name."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " or ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in args if a is not type(None))
    if origin is dict:
        return "JSON object"
    if origin is list:
        return "JSON list"
    names = {
        bool: "boolean (`1`/`0`, `true`/`false`)",
        int: "integer",
        float: "number",
        str: "text",
        Path: "path",
    }
    if annotation in names:
        return names[annotation]
    if getattr(annotation, "__name__", "") == "SecretStr":
        return "secret text"
    return str(getattr(annotation, "__name__", annotation))


def bounds(field: Any) -> str:
    """`` ≥ 1`` for a ``Field(ge=1)``: the limits pydantic enforces."""
    parts = []
    for meta in field.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(meta, attr, None)
            if value is not None:
                parts.append(f"{sign} {value:g}")
    return ", " + ", ".join(parts) if parts else ""


def default_text(field: Any) -> str:
    """The default as a user would write it; the same on every machine (``~`` for the home)."""
    value = field.default_factory() if field.default_factory is not None else field.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "`1`" if value else "`0`"
    if isinstance(value, Path):
        try:
            return f"`~/{value.relative_to(Path.home())}`"
        except ValueError:
            return f"`{value}`"
    if isinstance(value, dict) and not value:
        return "`{}`"
    if isinstance(value, list) and not value:
        return "`[]`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


def markdown_text(doc: str) -> str:
    """A docstring as one Markdown table cell: one line, reST literals as code, pipes escaped."""
    return " ".join(doc.split()).replace("``", "`").replace("|", "\\|")


def render_block() -> str:
    """The generated table, markers included."""
    rows = [
        BEGIN,
        "",
        "| variable | type | default | what it is for |",
        "|---|---|---|---|",
    ]
    for name, field in MimirSettings.model_fields.items():
        if not field.description:
            raise ValueError(f"MimirSettings.{name} has no docstring to document it")
        rows.append(
            f"| `{ENV_PREFIX}{name.upper()}` | {type_name(field.annotation)}{bounds(field)} "
            f"| {default_text(field)} | {markdown_text(field.description)} |"
        )
    rows += ["", END]
    return "\n".join(rows)


def updated_page(text: str) -> str:
    """``text`` (the page) with its generated block replaced by the current one."""
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"the page has no generated block: add the lines {BEGIN!r} and {END!r}")
    return head + render_block() + tail


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mimir_core.settings_doc", description=__doc__.split("\n\n")[0]
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="update the page in place")
    group.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    parser.add_argument("--page", type=Path, default=PAGE, help="default: docs/configuration.md")
    args = parser.parse_args(argv)
    if not (args.write or args.check):
        print(render_block())
        return 0
    text = args.page.read_text(encoding="utf-8")
    new = updated_page(text)
    if args.check:
        if new != text:
            print(f"{args.page} is stale: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    if new != text:
        args.page.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
