"""Consolidation on the labelled set (376 realistic experiences, 24 labelled task families)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bench.lessons import quality
from bench.quality import load
from mimir_core.digest import render_context

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    home = tmp_path_factory.mktemp("labelled") / "home"
    return quality(home), home


def test_admitted_lessons_are_pure_specific_and_gated(result: tuple[dict, Path]) -> None:
    q, _home = result
    assert q["admitted"] >= 4 and q["pending"] >= q["admitted"]
    assert q["admitted_pure"] == q["admitted"]  # evidence from one labelled family each
    assert q["admitted_naming_their_action"] == q["admitted"]
    for le in q["lessons"]:
        assert le["lift"] - le["noise"] >= 0.05
    assert len(Counter(next(iter(le["families"])) for le in q["lessons"])) >= 3


def test_serving_abstains_on_unanswerable_queries(result: tuple[dict, Path]) -> None:
    from mimir_core import Mimir

    _q, home = result
    m = Mimir(home, embedder="fastembed", auto_consolidate=False)
    unanswerable = [x["query"] for x in load()["queries"] if not x["relevant"]]
    assert len(unanswerable) >= 30
    assert [u for u in unanswerable if m.lessons(u, scope="*")] == []
    assert [u for u in unanswerable if render_context(home, u)] == []
    served = m.lessons("tests can't find the new tables in the test database", scope="*")
    assert served and "alembic" in served[0].rule
