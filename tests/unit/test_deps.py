"""The dependencies object: internals run on a :class:`Deps` alone, and nothing outside the
facade reaches into a facade's (or a Deps') private state.

A :class:`Deps` is what the layers take instead of the facade (issue 29), so it must be usable
on its own: record through ``ingest/record.py`` and read back, with its clock pinned, opening
nothing until it is used.
"""

from __future__ import annotations

import ast
from datetime import datetime, timezone
from pathlib import Path

import pytest

from mimir_core.deps import AutoConsolidation, Deps
from mimir_core.errors import InvalidInputError, NotFoundError
from mimir_core.ingest import record
from mimir_core.lessons.api import audit_log
from mimir_core.memory import Mimir

ROOT = Path(__file__).resolve().parents[2]
PINNED = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def make(home: Path, **kw: object) -> Deps:
    return Deps(home, store_uri=str(home / "store"), embedder_spec="hash", **kw)  # type: ignore[arg-type]


def test_constructing_deps_opens_nothing(tmp_path: Path) -> None:
    deps = make(tmp_path / "home")
    assert deps.loaded == frozenset()
    assert not (tmp_path / "home").exists()  # not even the home is made
    assert deps.spool_dir.is_relative_to(tmp_path / "home")  # a path, still nothing opened
    assert deps.loaded == frozenset()
    _ = deps.store
    assert deps.loaded == {"store", "embedder"}  # the store decides the embedder's variant
    deps.close()
    assert deps.loaded == {"embedder"}


def test_a_deps_records_and_reads_back_without_a_facade(tmp_path: Path) -> None:
    deps = make(tmp_path / "home", scope="proj-a")
    try:
        stored, inserted = record.record_batch(
            deps,
            [
                {"task": "run the tests", "action": "pytest -x", "outcome": "failure"},
                {"task": "run the tests", "action": "make test", "outcome": "success"},
            ],
        )
        assert [e.id for e in stored] == inserted
        assert {e.scope for e in stored} == {"proj-a"}  # the handle's scope fills records
        got = {e.id: e for e in deps.get_many(inserted)}
        assert [got[i].action for i in inserted] == ["pytest -x", "make test"]
        assert record.get(deps, inserted[0]).outcome == "failure"
        with pytest.raises(NotFoundError):
            record.get(deps, "no-such-id")
        keyed = {"task": "lint", "action": "ruff check", "outcome": "success"}
        first = record.record_batch(deps, [dict(keyed, idempotency_key="k1")])
        again = record.record_batch(deps, [dict(keyed, idempotency_key="k1")])
        assert first[1] == [first[0][0].id] and again == ([first[0][0]], [])  # stored once
    finally:
        deps.close()


def test_the_pinned_clock_stamps_what_the_internals_write(tmp_path: Path) -> None:
    deps = make(tmp_path / "home", clock=lambda: PINNED)
    try:
        assert deps.now() == PINNED
        old, new = record.record_batch(
            deps,
            [
                {"task": "deploy", "action": "kubectl apply", "outcome": "failure"},
                {"task": "deploy", "action": "helm upgrade", "outcome": "success"},
            ],
        )[1]
        record.supersede(deps, old, new)
        (event,) = audit_log(deps.store, old, limit=10)
        assert (event.event, event.ts, event.detail) == ("superseded", PINNED, {"by": new})
        with pytest.raises(InvalidInputError, match="cycle"):
            record.supersede(deps, new, old)
    finally:
        deps.close()


def test_a_lesson_function_runs_on_a_deps_alone(tmp_path: Path) -> None:
    from mimir_core.lessons import api
    from mimir_core.lessons.lifecycle import insert
    from mimir_core.types import Lesson

    deps = make(tmp_path / "home", clock=lambda: PINNED)
    try:
        lesson = Lesson(
            id="les_deps",
            rule="Run `make test` before pushing.",
            status="active",
            trigger="run the test suite before pushing",
            kind="prefer",
            action="make test",
            confidence=0.7,
        )
        insert(deps, [lesson], actor="test", event="admitted")
        got = api.get_lesson(deps, "les_deps")
        assert (got.rule, got.status) == (lesson.rule, "active")
        assert api.list_lessons(deps, status="active", scope=None, limit=10) == [got]
        assert deps.state.signing_key_bytes is not None  # the handle's cache, not a facade's
        stopped = api.stop_lesson(deps, "les_deps", "retired", "superseded by CI", "test")
        assert stopped.status == "retired" and stopped.invalid_at == PINNED
    finally:
        deps.close()


def test_the_facade_keeps_its_settings_in_its_deps(tmp_path: Path) -> None:
    m = Mimir(tmp_path / "home", embedder="hash", scope="proj-a", auto_consolidate=False)
    assert (m.home, m.store_uri, m.scope) == (m.deps.home, m.deps.store_uri, "proj-a")
    assert m.deps.loaded == frozenset()  # a facade opens nothing either
    m.auto_consolidate_failures = 2  # benchmarks and tests tune a live handle
    assert m.deps.auto == AutoConsolidation(enabled=False, failures=2, hours=4.0)
    with pytest.raises(AttributeError):
        m.home = tmp_path  # type: ignore[misc]
    m.close()


def test_the_scope_rule_names_a_bad_scope(tmp_path: Path) -> None:
    deps = make(tmp_path / "home", scope="here")
    assert deps.scope_filter(None) == (None, "here")
    assert deps.scope_filter("*") == (None, None)
    with pytest.raises(InvalidInputError, match="scope"):
        deps.scope_filter(3)  # type: ignore[arg-type]


# -- nothing reaches into a facade -----------------------------------------------------------------

#: Names that hold a facade (or the dependencies object) in the code that serves one.
FACADE_NAMES = {"m", "mimir", "memory", "mem", "deps", "hash_mimir"}
#: The two modules that own that private state.
OWNERS = {ROOT / "mimir_core" / "memory.py", ROOT / "mimir_core" / "deps.py"}


def _facade_like(node: ast.expr) -> bool:
    """``m``, ``mimir``... or ``self._m``, ``self.mimir``, ``x.deps``: a facade-holding name."""
    if isinstance(node, ast.Name):
        return node.id in FACADE_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr.lstrip("_") in FACADE_NAMES
    return False


def private_reaches(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and _facade_like(node.value)
        ):
            found.append(f"{where}:{node.lineno}: .{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "setattr", "hasattr"}
            and len(node.args) >= 2
            and _facade_like(node.args[0])
            and isinstance(node.args[1], ast.Constant)
            and str(node.args[1].value).startswith("_")
        ):
            found.append(f"{where}:{node.lineno}: {node.func.id}({node.args[1].value!r})")
    return found


def test_no_module_reaches_into_a_facade_or_its_deps() -> None:
    files = [
        p
        for folder in ("mimir_core", "integrations", "hermes_plugin")
        for p in sorted((ROOT / folder).rglob("*.py"))
        if p not in OWNERS
    ]
    assert len(files) > 100
    offenders = [hit for path in files for hit in private_reaches(path)]
    assert offenders == []


def test_the_check_sees_a_reach(tmp_path: Path) -> None:
    bad = tmp_path / "probe.py"
    source = "def f(m, self):\n    m._now()\n    self._m._store\n    getattr(deps, '_x', 0)\n"
    bad.write_text(source + "    self._lock\n    m.__class__\n", encoding="utf-8")
    assert sorted(private_reaches(bad)) == [
        "probe.py:2: ._now",
        "probe.py:3: ._store",
        "probe.py:4: getattr('_x')",
    ]
