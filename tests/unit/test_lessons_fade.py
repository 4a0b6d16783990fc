"""Stale lessons fade (``mimir_core.lessons.fade``): back to candidate when the action turns,
re-admitted only on evidence gathered since, never for pinned lessons, quarantine first."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from mimir_core import Mimir
from mimir_core.lessons.fade import ADMITTED_UNTIL, FADED_AT
from mimir_core.types import Lesson

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=timezone.utc)
HELM = "helm upgrade --install api ./chart"
TASKS = [
    "deploy the api service to staging",
    "ship the api build to the staging cluster",
    "roll out the new api release on staging",
    "push the api service to the staging environment",
]


def tries(m: Mimir, action: str, outcomes: list[str], *, day: int, **extra: Any) -> None:
    m.record_many(
        [
            {
                "task": TASKS[i % len(TASKS)],
                "action": action,
                "outcome": o,
                "reason": "rolled out" if o == "success" else "UPGRADE FAILED: timed out",
                "created_at": T0 + timedelta(days=day, minutes=10 * i),
                "idempotency_key": f"{action}-{day}-{i}",
                **extra,
            }
            for i, o in enumerate(outcomes)
        ]
    )


@pytest.fixture
def learned(home: Path, fast_embedder: object) -> tuple[Mimir, Lesson]:
    """A store whose history taught "prefer helm" (10 of 10) over two failing alternatives."""
    m = Mimir(home, embedder=fast_embedder, auto_consolidate=False)  # type: ignore[arg-type]
    tries(m, HELM, ["success"] * 10, day=0)
    tries(m, "kubectl rollout restart deployment/api", ["failure"] * 4, day=1)
    tries(m, "terraform apply -auto-approve", ["failure"] * 3, day=1)
    m.consolidate()
    lesson = next(le for le in m.list_lessons(status="active") if le.action == HELM)
    assert lesson.kind == "prefer" and ADMITTED_UNTIL in lesson.provenance
    return m, lesson


def test_a_lesson_whose_action_turned_fades_and_returns_only_on_fresh_evidence(
    learned: tuple[Mimir, Lesson],
) -> None:
    m, lesson = learned
    tries(m, HELM, ["failure"] * 3, day=5)
    report = m.consolidate()
    assert report.faded == [lesson.id] and lesson.id not in report.quarantined
    faded = m.get_lesson(lesson.id)
    assert faded.status == "candidate" and FADED_AT in faded.provenance
    event = next(e for e in m.audit_log(lesson.id) if e.event == "faded")
    assert event.actor == "consolidate" and event.detail["status"] == "candidate"
    assert "worked 0 of its last 3 tries" in event.detail["reason"]
    assert lesson.id not in [le.id for le in m.lessons(TASKS[0])]
    # Its whole tally (10 of 13) still mines the same draft, but does not bring it back.
    again = m.consolidate(force=True)
    assert lesson.id not in again.admitted and m.get_lesson(lesson.id).status == "candidate"
    # Two successes since it faded are not enough; a third (3 of 3) is.
    tries(m, HELM, ["success"] * 2, day=8)
    m.consolidate()
    assert m.get_lesson(lesson.id).status == "candidate"
    tries(m, HELM, ["success"], day=9)
    back = m.consolidate()
    assert lesson.id in back.admitted
    returned = m.get_lesson(lesson.id)
    assert returned.status == "active" and FADED_AT not in returned.provenance
    assert lesson.id in [le.id for le in m.lessons(TASKS[0])]


def test_a_mixed_record_since_admission_does_not_fade_it(
    learned: tuple[Mimir, Lesson],
) -> None:
    m, lesson = learned
    tries(m, HELM, ["failure", "success", "success", "failure", "success", "success"], day=5)
    report = m.consolidate()
    assert report.faded == [] and m.get_lesson(lesson.id).status == "active"


def test_failures_elsewhere_do_not_fade_a_scoped_lesson(home: Path, fast_embedder: Any) -> None:
    m = Mimir(home, embedder=fast_embedder, auto_consolidate=False)
    tries(m, HELM, ["success"] * 6, day=0, scope="payments")
    tries(m, "kubectl rollout restart deployment/api", ["failure"] * 4, day=1, scope="payments")
    m.consolidate()
    lesson = next(le for le in m.list_lessons(status="active") if le.action == HELM)
    assert lesson.scope == "payments"
    tries(m, HELM, ["failure"] * 4, day=5, scope="web")
    m.consolidate()
    assert m.get_lesson(lesson.id).status == "active"
    tries(m, HELM, ["failure"] * 3, day=6, scope="payments")
    assert m.consolidate().faded == [lesson.id]


def test_pinned_lessons_never_fade(learned: tuple[Mimir, Lesson]) -> None:
    m, lesson = learned
    m.pin_lesson(lesson.id)
    tries(m, HELM, ["failure"] * 4, day=5)
    report = m.consolidate()
    assert report.faded == [] and m.get_lesson(lesson.id).status == "active"


def test_a_lesson_that_hurts_is_quarantined_not_faded(learned: tuple[Mimir, Lesson]) -> None:
    m, lesson = learned
    tries(m, HELM, ["failure"] * 5, day=5, recalled_lesson_ids=[lesson.id])
    report = m.consolidate()
    assert lesson.id in report.quarantined and report.faded == []
    assert m.get_lesson(lesson.id).status == "quarantined"


def test_a_candidate_whose_action_just_turned_is_not_admitted(
    home: Path, fast_embedder: object
) -> None:
    # 15 of 20 passes the gate on the whole history; 1 of the newest 6 worked (the last 5
    # failed): it would fade at once.
    m = Mimir(home, embedder=fast_embedder, auto_consolidate=False)  # type: ignore[arg-type]
    tries(m, HELM, ["success"] * 15, day=0)
    tries(m, "kubectl rollout restart deployment/api", ["failure"] * 8, day=1)
    tries(m, "terraform apply -auto-approve", ["failure"] * 3, day=1)
    tries(m, HELM, ["failure"] * 5, day=2)
    report = m.consolidate()
    helm = next(le for le in m.list_lessons() if le.action == HELM and le.kind == "prefer")
    assert helm.status == "candidate" and helm.id not in report.admitted
    assert helm.gate is not None and not helm.gate.passed
    assert "but lately its action worked 1 of its last 6 tries" in helm.gate.detail
    # The avoid lessons of the same run are admitted as usual.
    assert {le.action for le in m.list_lessons(status="active")} >= {
        "kubectl rollout restart deployment/api"
    }
    # Fresh successes make it again: admitted.
    tries(m, HELM, ["success"] * 4, day=3)
    assert helm.id in m.consolidate().admitted


def test_a_fix_that_stopped_working_is_not_narrowed_to_the_projects_that_have_not_noticed(
    home: Path, fast_embedder: object
) -> None:
    # Helm worked everywhere, then an upgrade broke it: web noticed first (4 failures), payments
    # once. Web now contradicts "prefer helm", so the miner narrows it to the projects whose own
    # tally still makes it (payments, data); their old successes alone would admit it there.
    m = Mimir(home, embedder=fast_embedder, auto_consolidate=False)  # type: ignore[arg-type]
    tries(m, HELM, ["success"] * 8, day=0, scope="payments")
    tries(m, HELM, ["success"] * 8, day=1, scope="data")
    tries(m, HELM, ["success"] * 2, day=2, scope="web")
    for day, scope in ((3, "payments"), (4, "data"), (5, "web")):
        tries(m, "kubectl rollout restart deployment/api", ["failure"] * 2, day=day, scope=scope)
    tries(m, HELM, ["failure"] * 4, day=6, scope="web")
    tries(m, HELM, ["failure"], day=7, scope="payments")
    report = m.consolidate()
    helm = [le for le in m.list_lessons() if le.action == HELM and le.kind == "prefer"]
    assert {le.scope for le in helm} >= {"payments", "data"}, helm
    assert not [le for le in helm if le.status == "active"], helm
    assert not set(report.admitted) & {le.id for le in helm}
    assert all("but lately" in (le.gate.detail if le.gate else "") for le in helm)
    # Fresh successes in payments: the break was web's own, not an upgrade everywhere. The
    # lesson is admitted where its project's tally makes it, never in web.
    tries(m, HELM, ["success"] * 4, day=8, scope="payments")
    m.consolidate()
    active = [le for le in m.list_lessons(status="active") if le.action == HELM]
    assert {le.scope for le in active if le.kind == "prefer"} == {"payments", "data"}, active


def test_a_faded_rule_is_not_narrowed_to_projects_without_fresh_evidence(
    home: Path, fast_embedder: object
) -> None:
    # "Prefer helm" was learned everywhere, then faded when helm broke in web. The miner now
    # narrows it to the projects whose old tallies still make it; only payments has fresh
    # evidence that it still works there.
    m = Mimir(home, embedder=fast_embedder, auto_consolidate=False)  # type: ignore[arg-type]
    for day, scope in ((0, "payments"), (1, "data"), (2, "web")):
        tries(m, HELM, ["success"] * 6, day=day, scope=scope)
    for day, scope in ((3, "payments"), (4, "data"), (5, "web")):
        tries(m, "kubectl rollout restart deployment/api", ["failure"] * 3, day=day, scope=scope)
    m.consolidate()
    (rule,) = [le for le in m.list_lessons(status="active") if le.action == HELM]
    assert rule.scope == "" and rule.kind == "prefer"
    tries(m, HELM, ["failure"] * 7, day=6, scope="web")
    assert rule.id in m.consolidate().faded
    tries(m, HELM, ["success"] * 3, day=7, scope="payments")
    m.consolidate()
    helm = [le for le in m.list_lessons() if le.action == HELM and le.kind == "prefer"]
    assert {le.scope for le in helm if le.status == "active"} == {"payments"}, helm
    (data,) = [le for le in helm if le.scope == "data"]
    assert data.status == "candidate" and data.gate is not None
    assert "faded lately" in data.gate.detail
