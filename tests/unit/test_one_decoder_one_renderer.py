"""One row decoder and one lesson renderer (issue 29).

A stored experience row is decoded in one place (:func:`mimir_core.store.core.experience_fields`):
the full :class:`~mimir_core.types.Experience` and consolidation's lighter
:class:`~mimir_core.lessons.evidence.Exp` must read the same values from the same row. A lesson
is rendered as text by one function (:func:`mimir_core.lessons.render.render_lesson`), for a
person or, fenced, for a model; both forms are pinned here as they were before the merge.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mimir_core.lessons.evidence import EXP_COLUMNS, Exp
from mimir_core.lessons.render import render_lesson
from mimir_core.observations.tally import evidence_source
from mimir_core.store.core import EXPERIENCE_COLUMNS, EXPERIENCES, arrow_rows, row_experience
from mimir_core.tools.specs import call_tool
from mimir_core.types import Experience, GateResult, Lesson

ROOT = Path(__file__).resolve().parents[2]


def same_values(e: Exp, x: Experience) -> None:
    """Every field the two shapes share holds the same value."""
    assert (e.id, e.task, e.action, e.outcome, e.score, e.reason, e.scope) == (
        x.id,
        x.task,
        x.action,
        x.outcome,
        x.score,
        x.reason,
        x.scope,
    )
    assert e.recalled == tuple(x.recalled_lesson_ids)
    assert e.created_at == pytest.approx(x.created_at.timestamp(), abs=1e-6)
    assert e.origin == evidence_source(x.model_dump())


def test_exp_and_experience_read_a_stored_row_alike(hash_mimir: Any) -> None:
    full = hash_mimir.record(
        "migrate the orders table",
        "alembic upgrade head",
        "partial",
        score=0.4,
        reason="two of three migrations applied",
        context={"branch": "main", "files": ["orders.py"]},
        scope="proj-a",
        source="claude-code",
        session_id="sess-1",
        thread_id="thr-1",
        recalled_lesson_ids=["les_one", "les_two"],
        idempotency_key="run-7",
    )
    bare = hash_mimir.record("run the api tests", "pytest tests/api", "failure")
    columns = sorted(set(EXPERIENCE_COLUMNS) | set(EXP_COLUMNS))
    rows = {r["id"]: r for r in arrow_rows(hash_mimir.store.column(EXPERIENCES, columns))}
    for recorded in (full, bare):
        row = rows[recorded.id]
        decoded = row_experience(row)
        assert decoded == recorded  # the one decoder reads back what was recorded
        same_values(Exp.from_row(row), decoded)
    exp = Exp.from_row(rows[full.id])
    assert exp.score == pytest.approx(0.4)  # a partial outcome keeps its score (float32)
    assert (exp.origin, exp.recalled) == ("s:sess-1", ("les_one", "les_two"))
    assert Exp.from_row(rows[bare.id]).origin is None  # the API without a session: unattributed


def test_exp_and_experience_read_an_old_or_odd_row_alike() -> None:
    """A row with the nulls older schemas left and a score out of range: the same defaults and
    the same clamp in both shapes."""
    import numpy as np

    row: dict[str, Any] = {
        "id": "exp_old",
        "task": "deploy",
        "action": "make deploy",
        "outcome": "success",
        "score": 1.7,
        "reason": None,
        "context": None,
        "scope": None,
        "source": None,
        "session_id": None,
        "thread_id": "thr-9",
        "recalled_lesson_ids": None,
        "created_at": 1764780000.123456,
        "superseded_by": None,
        "embed_model": None,
        "idem_key": "exp_old",
        "vector": np.ones(4, dtype=np.float32),
        "action_vector": np.zeros(4, dtype=np.float32),
    }
    exp = Exp.from_row(row)
    same_values(exp, row_experience(row))
    assert (exp.score, exp.reason, exp.scope, exp.origin) == (1.0, "", "", "s:thr-9")


def test_exp_reads_nothing_from_a_row_but_its_vectors() -> None:
    """Every other field comes from the store's decoder: a second decoder of experience rows
    (``row["task"]``, ``row.get("reason")`` here) fails this test."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(Exp.from_row)))
    read: set[str] = set()
    for node in ast.walk(tree):
        on_row = isinstance(getattr(node, "value", None), ast.Name) and node.value.id == "row"
        if on_row and isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            read.add(str(node.slice.value))
        elif on_row and isinstance(node, (ast.Subscript, ast.Attribute)):
            read.add(ast.unparse(node))  # row.get(...), row[name]: anything else it reads
    assert read == {"vector", "action_vector"}


LESSON = Lesson(
    id="les_abc123",
    rule="Run `alembic upgrade head` against the test database\nbefore running the api tests, "
    "every time the orders schema has changed in a migration file",
    trigger="run the api tests\x1b[31m",
    kind="prefer",
    status="active",
    successes=3.0,
    failures=0.5,
    confidence=0.5612,
    gate=GateResult(lift=0.31, noise=0.12, n_with=8, n_without=6, passed=True),
    pinned=True,
)


def test_a_lesson_for_a_model_is_three_fenceable_lines() -> None:
    assert render_lesson(LESSON, for_model=True) == (
        "[prefer] Run `alembic upgrade head` against the test database before running the api "
        "tests, every time the orders schema has changed in a migration file\n"
        "    when: run the api tests [31m\n"
        "    id les_abc123 · active · confidence 0.56 from 3✓ 0.5✗ · pinned"
    )


def test_a_lesson_for_a_person_has_its_head_wrapped_rule_and_gate() -> None:
    head = "✓ les_abc123 prefer · confidence 0.56 · 3 for, 0.5 against · active · pinned"
    gate = "    gate: lift +0.31 ± 0.12 on 8 vs 6 held out"
    assert render_lesson(LESSON) == (
        f"{head}\n    Run `alembic upgrade head` against the test database before running the "
        "api tests, every time\n    the orders schema has changed in a migration file\n" + gate
    )
    narrow = render_lesson(LESSON, width=40).splitlines()
    assert narrow[0] == head and narrow[-1] == gate and len(narrow) == 7
    assert all(len(line) <= 40 for line in narrow[1:-1])


def test_the_tools_show_a_lesson_as_the_one_renderer_does(hash_mimir: Any) -> None:
    from mimir_core.testing import seed_lesson

    lesson = seed_lesson(
        hash_mimir, rule="Pin numpy below 2 for the legacy image.", trigger="build the legacy image"
    )
    out = call_tool(hash_mimir, "pin_lesson", {"id": lesson.id})
    assert render_lesson(hash_mimir.get_lesson(lesson.id), for_model=True) in out.text
    out = call_tool(hash_mimir, "recall_lessons", {"query": "build the legacy image"})
    assert f"1. {render_lesson(hash_mimir.get_lesson(lesson.id), for_model=True)}" in out.text


def test_no_module_defines_a_second_lesson_renderer() -> None:
    """``render_lesson`` is defined once, in ``mimir_core/lessons/render.py``."""
    found = []
    for folder in ("mimir_core", "integrations"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef) and node.name == "render_lesson":
                    found.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert found == ["mimir_core/lessons/render.py:render_lesson"]
