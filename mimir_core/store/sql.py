"""Typed filters (:mod:`mimir_core.store.filters`) compiled to LanceDB SQL: the one place that
quotes.

The store compiles every ``where`` it is given here, so no other module builds SQL. The text
produced is stable (the same filter, the same string): the store keys its memory of selective
filters by it and reads a conjunction of ``IS NULL`` tests itself (:func:`store.null_columns`),
so a conjunction is written flat, ``a AND b``, with parentheses only around an ``OR``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from ..errors import InvalidInputError
from .filters import And, Eq, Filter, Has, In, Like, Not, Or, Range, StartsWith, Value

_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BOUNDS = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))


def sql_str(value: str) -> str:
    """A SQL string literal (single quotes doubled; lone surrogates, which UTF-8 cannot carry,
    become ``?``, so the query runs instead of failing to encode)."""
    value = value.encode("utf-8", "replace").decode("utf-8")
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    """``column IN ('a', 'b')``; ``false`` for no values."""
    vals = list(values)
    if not vals:
        return "false"
    return f"{column} IN ({', '.join(sql_str(v) for v in vals)})"


def _column(name: str) -> str:
    if not isinstance(name, str) or not _COLUMN.fullmatch(name):
        raise InvalidInputError("filter column", f"not a column name: {name!r}", name)
    return name


def _literal(value: Value) -> str:
    """A SQL literal of ``value``: a quoted string, ``TRUE``/``FALSE``, or a finite number
    (``repr`` of a float: it round-trips exactly)."""
    if isinstance(value, str):
        return sql_str(value)
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    raise InvalidInputError("filter value", f"not a string or finite number: {value!r}", value)


def _range(f: Range) -> str:
    tests = [
        f"{_column(f.column)} {op} {_literal(bound)}"
        for bound, op in ((getattr(f, name), op) for name, op in _BOUNDS)
        if bound is not None
    ]
    if not tests:
        raise InvalidInputError("filter range", f"no bound on {f.column!r}", f)
    return " AND ".join(tests)


def _not(part: Filter) -> str:
    if isinstance(part, Eq) and part.value is None:
        return f"{_column(part.column)} IS NOT NULL"
    if isinstance(part, Like):
        return _like(part, "NOT LIKE")
    return f"NOT ({to_sql(part)})"


def _like(f: Like, op: str) -> str:
    column = f"lower({_column(f.column)})" if f.lower else _column(f.column)
    return f"{column} {op} {sql_str(f.pattern)}"


def _inner(part: Filter, parent: type[And] | type[Or]) -> str:
    """``part`` as an operand of ``parent``: a nested ``OR`` (or an ``AND`` under an ``OR``) is
    parenthesised, so the text reads as the tree does whatever the precedence."""
    text = to_sql(part)
    if isinstance(part, Or) or (isinstance(part, (And, Range)) and parent is Or):
        return f"({text})"
    return text


def to_sql(f: Filter) -> str:
    """The LanceDB SQL of ``f``. Raises :class:`InvalidInputError` for a bad column name, a
    value that is not a string or finite number, or a range without bounds."""
    if isinstance(f, Eq):
        if f.value is None:
            return f"{_column(f.column)} IS NULL"
        return f"{_column(f.column)} = {_literal(f.value)}"
    if isinstance(f, In):
        if not f.values:
            return "false"
        return f"{_column(f.column)} IN ({', '.join(_literal(v) for v in f.values)})"
    if isinstance(f, Range):
        return _range(f)
    if isinstance(f, Like):
        return _like(f, "LIKE")
    if isinstance(f, StartsWith):
        return f"starts_with({_column(f.column)}, {sql_str(f.prefix)})"
    if isinstance(f, Has):
        return f"array_has({_column(f.column)}, {_literal(f.value)})"
    if isinstance(f, And):
        return " AND ".join(_inner(p, And) for p in f.parts) if f.parts else "true"
    if isinstance(f, Or):
        return " OR ".join(_inner(p, Or) for p in f.parts) if f.parts else "false"
    if isinstance(f, Not):
        return _not(f.part)
    raise InvalidInputError("filter", f"not a filter: {f!r}", f)


def compile_where(where: Filter | str | None) -> str | None:
    """The SQL a store method runs: a typed filter compiled, ``None`` (every row) kept. A raw
    string passes through: only tests and benchmarks hand one in (no package module may; a
    test checks)."""
    if where is None or isinstance(where, str):
        return where
    return to_sql(where)
