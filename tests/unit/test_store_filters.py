"""The typed filters and their one compiler: the SQL text, its quoting, and the rows it selects
in a real LanceDB store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mimir_core import Mimir
from mimir_core.errors import InvalidInputError, MimirError
from mimir_core.store.core import EXPERIENCES, null_columns
from mimir_core.store.filters import (
    LIVE,
    And,
    Eq,
    Has,
    In,
    Like,
    Not,
    Or,
    Range,
    StartsWith,
    all_of,
)
from mimir_core.store.sql import compile_where, to_sql


def test_strings_are_quoted_with_quotes_doubled() -> None:
    assert to_sql(Eq("action", "it's")) == "action = 'it''s'"
    assert to_sql(Eq("action", "''; DROP TABLE x; --")) == "action = '''''; DROP TABLE x; --'"
    assert to_sql(Like("key", "a'b%")) == "key LIKE 'a''b%'"
    assert to_sql(StartsWith("ns", "o'k.")) == "starts_with(ns, 'o''k.')"
    assert to_sql(Has("ids", "x'y")) == "array_has(ids, 'x''y')"


def test_unicode_passes_and_a_lone_surrogate_is_replaced() -> None:
    assert to_sql(Eq("task", "café ✓ 日本")) == "task = 'café ✓ 日本'"
    assert to_sql(Eq("task", "a\ud800b")) == "task = 'a?b'"  # UTF-8 cannot carry it


def test_none_is_a_null_test_and_its_negation() -> None:
    assert to_sql(Eq("superseded_by", None)) == "superseded_by IS NULL"
    assert to_sql(Not(Eq("superseded_by", None))) == "superseded_by IS NOT NULL"
    assert to_sql(LIVE) == "superseded_by IS NULL"


def test_empty_in_matches_nothing_and_values_keep_their_order() -> None:
    assert to_sql(In("id", [])) == "false"
    assert to_sql(In("id", iter(["b", "a'"]))) == "id IN ('b', 'a''')"
    assert In("id", ["a"]) == In("id", ("a",))  # compared by value, hashable
    assert len({In("id", ["a"]), In("id", ("a",))}) == 1


def test_numbers_booleans_and_ranges() -> None:
    assert to_sql(Eq("n", 3)) == "n = 3"
    assert to_sql(Eq("flag", True)) == "flag = TRUE"
    assert to_sql(Range("created_at", ge=1700000000.25)) == "created_at >= 1700000000.25"
    assert to_sql(Range("t", gt=1.0, le=2.0)) == "t > 1.0 AND t <= 2.0"


def test_precedence_is_explicit_and_a_conjunction_is_flat() -> None:
    scoped = And(Eq("status", "active"), Or(Eq("scope", "k"), Eq("scope", "")))
    assert to_sql(scoped) == "status = 'active' AND (scope = 'k' OR scope = '')"
    either = Or(Eq("action", "x"), And(Like("action", "%a%", lower=True), Eq("n", 1)))
    assert to_sql(either) == "action = 'x' OR (lower(action) LIKE '%a%' AND n = 1)"
    assert to_sql(Or(Range("t", gt=1.0, lt=2.0), Eq("t", None))) == (
        "(t > 1.0 AND t < 2.0) OR t IS NULL"
    )
    assert to_sql(And(And(LIVE, Eq("a", "1")), Eq("b", "2"))) == (
        "superseded_by IS NULL AND a = '1' AND b = '2'"
    )
    assert to_sql(Not(In("action", ["a"]))) == "NOT (action IN ('a'))"
    assert to_sql(Not(Like("payload", "%x%"))) == "payload NOT LIKE '%x%'"
    assert to_sql(And()) == "true"
    assert to_sql(Or()) == "false"


def test_the_store_still_reads_a_conjunction_of_null_tests() -> None:
    """The store post-filters ``IS NULL`` conjunctions itself: the compiled text must keep the
    shape it recognises."""
    assert null_columns(to_sql(And(LIVE, Eq("expires_at", None)))) == [
        "superseded_by",
        "expires_at",
    ]
    assert null_columns(to_sql(And(LIVE, Eq("scope", "x")))) is None


def test_all_of_drops_the_absent_parts() -> None:
    assert all_of() is None
    assert all_of(None, None) is None
    assert all_of(None, LIVE) == LIVE
    assert all_of(Eq("a", "1"), None, LIVE) == And(Eq("a", "1"), LIVE)


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        (Eq("id; DROP", "x"), "id; DROP"),
        (Eq("", "x"), "''"),
        (Eq("created_at", float("nan")), "nan"),
        (Range("created_at", ge=float("inf")), "inf"),
        (Range("created_at"), "created_at"),
        (Eq("id", [1]), "[1]"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_filter_is_an_invalid_input_error_naming_the_value(bad: object, named: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        to_sql(bad)  # type: ignore[arg-type]
    assert isinstance(err.value, MimirError)
    assert named in str(err.value)


def test_compile_where_keeps_none_and_raw_text() -> None:
    assert compile_where(None) is None
    assert compile_where("n = 1") == "n = 1"  # tests and benchmarks only
    assert compile_where(Eq("n", 1)) == "n = 1"


@pytest.fixture
def m(home: Path) -> Iterator[Mimir]:
    mim = Mimir(home, embedder="hash", scope="proj", auto_consolidate=False)
    yield mim
    mim.close()


def test_filters_select_the_right_rows_in_a_real_store(m: Mimir) -> None:
    """Quoting end to end: a value with a quote, unicode and LIKE wildcards selects exactly its
    own rows, and a forgotten quote would have failed the query."""
    ids = {
        action: m.record(task="deploy the app", action=action, outcome=outcome).id
        for action, outcome in [
            ("echo 'it''s done'", "failure"),
            ("café ✓ 日本", "success"),
            ("run 100%_fast", "failure"),
        ]
    }
    store = m.store

    def actions(where: object) -> list[str]:
        rows = store.select(EXPERIENCES, where, ["action"])  # type: ignore[arg-type]
        return sorted(r["action"] for r in rows)

    assert actions(Eq("action", "echo 'it''s done'")) == ["echo 'it''s done'"]
    assert actions(Eq("action", "café ✓ 日本")) == ["café ✓ 日本"]
    assert actions(In("id", [ids["café ✓ 日本"], "nope"])) == ["café ✓ 日本"]
    assert actions(In("id", [])) == []
    assert actions(And(LIVE, Eq("outcome", "failure"))) == ["echo 'it''s done'", "run 100%_fast"]
    assert actions(Not(In("action", ["run 100%_fast"]))) == ["café ✓ 日本", "echo 'it''s done'"]
    assert actions(Like("action", "%ÉCHO%", lower=False)) == []
    assert actions(Like("action", "%'it''s%", lower=True)) == ["echo 'it''s done'"]
    assert store.count(EXPERIENCES, Or(Eq("outcome", "success"), Eq("action", "x"))) == 1
