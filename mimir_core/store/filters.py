"""Typed row filters: the one vocabulary callers use to say which rows they want.

No module outside the store writes SQL. Callers build these small frozen values (compared and
hashed by value, printed readably), and :mod:`mimir_core.store.sql` compiles them to
LanceDB's SQL dialect in one place, where quoting, escaping and precedence are kept right once.
A test fails if a SQL-looking string literal appears anywhere else in the package.

Stdlib-only, so any layer may build a filter without importing the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: A value a column is compared with.
Value = str | int | float | bool


@dataclass(frozen=True)
class Eq:
    """``column`` equals ``value``; ``None`` means the column is null (``IS NULL``)."""

    column: str
    value: Value | None


@dataclass(frozen=True, init=False)
class In:
    """``column`` is one of ``values``; matches nothing when there are none."""

    column: str
    values: tuple[Value, ...]

    def __init__(self, column: str, values: Iterable[Value]) -> None:
        object.__setattr__(self, "column", column)
        object.__setattr__(self, "values", tuple(values))


@dataclass(frozen=True)
class Range:
    """``column`` within the given bounds (each optional): above ``gt`` / at least ``ge`` /
    below ``lt`` / at most ``le``."""

    column: str
    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None


@dataclass(frozen=True)
class Like:
    """``column`` matches the LIKE ``pattern`` (``%`` any run, ``_`` one character); with
    ``lower`` the column is lower-cased first."""

    column: str
    pattern: str
    lower: bool = False


@dataclass(frozen=True)
class StartsWith:
    """``column`` starts with ``prefix`` (taken literally, unlike a LIKE pattern)."""

    column: str
    prefix: str


@dataclass(frozen=True)
class Has:
    """The list column ``column`` holds ``value``."""

    column: str
    value: Value


@dataclass(frozen=True, init=False)
class And:
    """Every part holds (always true with no parts)."""

    parts: tuple[Filter, ...]

    def __init__(self, *parts: Filter) -> None:
        object.__setattr__(self, "parts", parts)


@dataclass(frozen=True, init=False)
class Or:
    """Some part holds (never true with no parts)."""

    parts: tuple[Filter, ...]

    def __init__(self, *parts: Filter) -> None:
        object.__setattr__(self, "parts", parts)


@dataclass(frozen=True)
class Not:
    """``part`` does not hold."""

    part: Filter


Filter = Eq | In | Range | Like | StartsWith | Has | And | Or | Not

#: Experiences no later record replaced: the default of every read.
LIVE: Filter = Eq("superseded_by", None)


def all_of(*parts: Filter | None) -> Filter | None:
    """The conjunction of the given parts, ``None`` ones dropped (``None`` when none are left,
    the part itself when one is): so an optional condition is just ``None``."""
    kept = [p for p in parts if p is not None]
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else And(*kept)
