"""No module outside the store builds SQL: callers use the typed filters of
:mod:`mimir_core.store.filters`, compiled in one place (:mod:`mimir_core.store.sql`).

Read with ``ast``, so comments and docstrings may still talk about ``IS NULL``; every other string
literal (f-string parts joined, a placeholder for each formatted value) is checked."""

from __future__ import annotations

import ast
import re

from tests.conftest import ROOT

PACKAGES = ("mimir_core", "integrations", "hermes_plugin")
#: The store and the filter compiler are where SQL lives.
ALLOWED = {"mimir_core/store/core.py", "mimir_core/store/sql.py"}
HOLE = "\x00"  # stands for a formatted value in an f-string
SQL = re.compile(
    r"\bIS (?:NOT )?NULL\b|\bNOT LIKE\b|\bLIKE ['\x00]|\bIN \(|\barray_has\(|\bstarts_with\("
    r"|\b[a-z_]+ (?:=|!=|<>|<=|>=|<|>) ['\x00]"
)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are bare expression statements (docstrings)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            out.add(id(node.value))
    return out


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else HOLE
            for v in node.values
        )
    return None


def sql_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal in ``source`` that reads as SQL."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    inner = {
        id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values
    }  # an f-string is checked whole, not piece by piece
    found = []
    for node in ast.walk(tree):
        if id(node) in skip or id(node) in inner:
            continue
        text = _text(node)
        if text is not None and SQL.search(text):
            found.append((getattr(node, "lineno", 0), text.replace(HOLE, "{}")))
    return found


def test_the_check_sees_sql() -> None:
    """The check itself: it flags each kind of SQL string, and not docstrings or prose."""
    flagged = [
        "x = \"status = 'active'\"",
        'x = f"id = {x!r}"',
        'x = "superseded_by IS NULL"',
        'x = f"key IN ({keys})"',
        'x = "expires_at IS NOT NULL"',
        'x = f"lower(action) LIKE {p}"',
        'x = f"array_has(ids, {p})"',
    ]
    for source in flagged:
        assert sql_literals(source + "\n"), source
    quiet = (
        '"""A docstring: superseded_by IS NULL."""\n# id = \'x\'\nx = "a = b"\ny = f"{a} is null"\n'
    )
    assert sql_literals(quiet) == []


def test_no_sql_strings_outside_the_store() -> None:
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in ALLOWED:
                continue
            for line, text in sql_literals(path.read_text(encoding="utf-8")):
                offenders.append(f"{rel}:{line}: {text!r}")
    assert offenders == [], (
        "build a typed filter (mimir_core.store.filters) instead:\n" + "\n".join(offenders)
    )


def test_store_helpers_are_not_imported_outside_the_store() -> None:
    """``sql_str`` and ``sql_in`` build SQL text: only the store and the compiler use them."""
    users = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in ALLOWED:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom):
                    names = {a.name for a in node.names}
                    if names & {"sql_str", "sql_in", "compile_where"}:
                        users.append(f"{rel}:{node.lineno}")
    assert users == []
