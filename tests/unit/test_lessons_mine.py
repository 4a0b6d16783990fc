"""Mining rules that need no store: where a candidate lesson is served (its scope)."""

from __future__ import annotations

import numpy as np

from mimir_core.lessons.evidence import Exp
from mimir_core.lessons.mine import placements
from mimir_core.search.action_clusters import ActionCluster

_VEC = np.zeros(4, dtype=np.float32)


def tries(scope: str, successes: int, n: int) -> list[Exp]:
    """``n`` tries of one action in ``scope``, the first ``successes`` of them successes."""
    return [
        Exp(
            id=f"{scope}-{i}",
            task="fix the import error",
            action="pip install -e .",
            outcome="success" if i < successes else "failure",
            score=1.0 if i < successes else 0.0,
            reason="",
            scope=scope,
            created_at=float(i),
            recalled=(),
            vec=_VEC,
            avec=_VEC,
        )
        for i in range(n)
    ]


def where(*parts: list[Exp], topic: tuple[str, ...] = ()) -> list[tuple[str, str, list[str]]]:
    """Where the lesson of these tries is served; ``topic``: the projects the topic came up in
    (default: only those the action was tried in)."""
    exps = [e for part in parts for e in part]
    cl = ActionCluster(_VEC, "pip install -e .", [e.as_row() for e in exps], [1.0] * len(exps))
    return placements(cl, topic or {e.scope for e in exps})


def test_a_lesson_is_global_only_when_no_project_contradicts_it() -> None:
    assert where(tries("api", 3, 3), tries("web", 2, 2)) == [("prefer", "", [])]
    assert where(tries("api", 3, 3)) == [("prefer", "api", [])]
    # It failed in the data project: served only where it worked, never globally.
    mixed = where(tries("api", 3, 3), tries("web", 3, 4), tries("data", 0, 1))
    assert mixed == [("prefer", "api", ["data"]), ("prefer", "web", ["data"])]
    # A project whose own tally is too thin for the lesson gets no copy of it.
    thin = where(tries("api", 3, 3), tries("web", 1, 1), tries("data", 0, 1))
    assert thin == [("prefer", "api", ["data"])]
    # avoid: contradicted where the action mostly worked.
    avoid = where(tries("api", 0, 4), tries("web", 0, 3), tries("data", 1, 1))
    assert avoid == [("avoid", "api", ["data"]), ("avoid", "web", ["data"])]
    assert where(tries("api", 0, 3), tries("web", 1, 2)) == [("avoid", "", [])]
    # One project's streak inside an unremarkable whole is not a lesson anywhere (more often
    # luck than context), even where another project contradicts it.
    assert where(tries("api", 2, 2), tries("web", 1, 2), tries("data", 1, 2)) == []
    assert where(tries("api", 3, 3), tries("data", 0, 3)) == []


def test_a_fix_is_global_only_once_tried_in_every_project_its_topic_came_up_in() -> None:
    # Worked in api and web, never tried in data, where the task came up too: not known to
    # work there, so it is served where it earned it (tested without data's evidence).
    assert where(tries("api", 3, 3), tries("web", 2, 2), topic=("api", "web", "data")) == [
        ("prefer", "api", ["data"]),
        ("prefer", "web", ["data"]),
    ]
    # Tried once in data (it worked): still unproven there; web's single success earns nothing.
    assert where(
        tries("api", 3, 3), tries("web", 1, 1), tries("data", 1, 1), topic=("api", "web", "data")
    ) == [("prefer", "api", ["data", "web"])]
    # Tried at least twice everywhere the topic came up: global.
    assert where(
        tries("api", 3, 3), tries("web", 2, 2), tries("data", 2, 2), topic=("api", "web", "data")
    ) == [("prefer", "", [])]
    # A fix tried in one project only stays scoped there, as before.
    assert where(tries("api", 3, 3), topic=("api", "web")) == [("prefer", "api", [])]
    # avoid lessons generalise from fewer projects: a trap is a trap everywhere until shown
    # otherwise (a project where it mostly worked contradicts it, as above).
    assert where(tries("api", 0, 3), tries("web", 0, 2), topic=("api", "web", "data")) == [
        ("avoid", "", [])
    ]
