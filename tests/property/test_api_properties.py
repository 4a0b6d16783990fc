"""The public API on arbitrary input: a result or a ``MimirError`` naming the problem, never any
other exception (text, unicode, surrogates, NULs, huge inputs, wrong types, missing fields)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mimir_core import Mimir
from mimir_core.errors import MimirError
from tests.property.conftest import PROPS, texts, values


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mimir]:
    m = Mimir(tmp_path_factory.mktemp("props") / "home", embedder="hash", auto_consolidate=False)
    m.record("run the payments integration tests", "pytest tests/integration", "failure")
    yield m
    m.close()


def total(call: Callable[[], Any]) -> Any:
    """Run ``call``: its result, or ``None`` after a MimirError with a message."""
    try:
        return call()
    except MimirError as exc:
        assert str(exc).strip(), "a MimirError without a message"
        return None


outcomes = st.one_of(st.sampled_from(["success", "failure", "partial"]), values)
maybe = st.one_of(st.just(...), values)  # ``...``: leave the argument out


def kwargs(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not ...}


@PROPS
@given(
    task=st.one_of(texts, values),
    action=st.one_of(texts, values),
    outcome=outcomes,
    reason=maybe,
    context=maybe,
    score=maybe,
    scope=maybe,
)
def test_record(mem: Mimir, **a: Any) -> None:
    extra = kwargs(reason=a["reason"], context=a["context"], score=a["score"], scope=a["scope"])
    exp = total(lambda: mem.record(a["task"], a["action"], a["outcome"], **extra))
    if exp is not None:
        assert exp.id and mem.get(exp.id).id == exp.id


@PROPS
@given(
    items=st.lists(
        st.one_of(
            values,
            st.fixed_dictionaries(
                {"task": texts},
                optional={
                    "action": texts,
                    "outcome": outcomes,
                    "reason": values,
                    "context": values,
                },
            ),
        ),
        max_size=3,
    )
)
def test_record_many(mem: Mimir, items: list[Any]) -> None:
    total(lambda: mem.record_many(items))


@PROPS
@given(query=st.one_of(texts, values), k=maybe, outcome=maybe, scope=maybe, since=maybe)
def test_recall(mem: Mimir, query: Any, **a: Any) -> None:
    hits = total(lambda: mem.recall(query, **kwargs(**a)))
    assert hits is None or isinstance(hits, list)


@PROPS
@given(task=st.one_of(texts, values), explore=maybe, scope=maybe)
def test_recommend(mem: Mimir, task: Any, **a: Any) -> None:
    total(lambda: mem.recommend(task, **kwargs(**a)))


@PROPS
@given(query=st.one_of(texts, values), k=maybe, budget=maybe, min_confidence=maybe)
def test_lessons_and_context(mem: Mimir, query: Any, k: Any, budget: Any, **a: Any) -> None:
    total(lambda: mem.lessons(query, **kwargs(k=k, **a)))
    total(lambda: mem.context(query, **kwargs(budget_chars=budget)))
    total(lambda: mem.list_lessons(**kwargs(status=k, limit=budget)))


@PROPS
@given(ident=st.one_of(texts, values), flag=maybe, reason=st.one_of(texts, values))
def test_forget_and_lesson_calls(mem: Mimir, ident: Any, flag: Any, reason: Any) -> None:
    total(lambda: mem.forget(ident, **kwargs(with_experiences=flag)))
    total(lambda: mem.get(ident))
    total(lambda: mem.get_lesson(ident))
    total(lambda: mem.pin_lesson(ident, **kwargs(pinned=flag)))
    total(lambda: mem.quarantine_lesson(ident, reason))
    total(lambda: mem.lesson_feedback(ident, flag if flag is not ... else True))
