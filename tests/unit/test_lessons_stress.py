"""Stress: 200 unrelated active lessons; new lessons that share their words and their very
actions (with the opposite verdict) on other topics must supersede none of them."""

from __future__ import annotations

import itertools
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from mimir_core import Mimir
from mimir_core.lessons.lifecycle import Write, write_batch
from mimir_core.search.actions import normalise_action
from mimir_core.types import Lesson

COMPONENTS = [
    "the payments API",
    "the React dashboard",
    "the Terraform AWS stack",
    "the Kafka consumer group",
    "the nightly Airflow ETL",
    "the Django admin",
    "the Go auth gateway",
    "the Rust indexer",
    "the iOS app build",
    "the Android release pipeline",
    "the Postgres replica",
    "the Redis session cache",
    "the Elasticsearch cluster",
    "the GraphQL gateway",
    "the Celery workers",
    "the Next.js storefront",
    "the Spark batch job",
    "the Helm chart of the billing service",
    "the GitHub Actions release workflow",
    "the Jenkins nightly build",
    "the S3 upload service",
    "the Lambda image resizer",
    "the gRPC inventory service",
    "the Nginx ingress",
    "the Vault secrets sync",
    "the Prometheus alerting rules",
    "the Grafana dashboards",
    "the Flutter mobile app",
    "the Unity game build",
    "the Rails monolith",
    "the Spring Boot orders service",
    "the .NET reporting service",
    "the Electron desktop app",
    "the Webpack bundle",
    "the Cypress e2e suite",
    "the MongoDB migration",
    "the RabbitMQ dead-letter queue",
    "the Snowflake sync",
    "the dbt models",
    "the Jupyter notebooks CI",
]
PROBLEMS = {
    "times out under load": "kubectl scale deployment --replicas=6",
    "fails with permission denied": "chmod -R g+w /srv/data",
    "breaks after upgrading its main dependency": "pip install --force-reinstall 'core-lib<2'",
    "runs out of memory": "raise the memory limit of the container to 2Gi",
    "returns wrong results after a timezone change": "export TZ=UTC in the service environment",
}
NEW_COMPONENTS = [
    "the Cassandra ring",
    "the Kotlin payroll service",
    "the Svelte admin panel",
    "the Fastly edge config",
    "the Ansible provisioning playbooks",
    "the Kubernetes cron jobs",
    "the BigQuery exports",
    "the Sentry relay",
    "the Keycloak realm",
    "the Temporal workflows",
]
ALTERNATIVE = "profile the hot path with py-spy and fix the slow query it shows"
T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def unrelated_lessons(m: Mimir | None = None) -> list[Lesson]:
    """200 lessons on distinct topics; with ``m``, each backed by a recorded experience that
    is its topic member (as consolidation records them), else without members."""
    grid = list(itertools.product(COMPONENTS, PROBLEMS.items()))
    evidence: list[str | None] = [None] * len(grid)
    if m is not None:
        stored = m.record_many(
            [
                dict(
                    task=f"{comp} {problem}",
                    action=action,
                    outcome="success",
                    reason="fixed",
                    created_at=T0 - timedelta(days=30),
                    idempotency_key=f"old-{i}",
                )
                for i, (comp, (problem, action)) in enumerate(grid)
            ]
        )
        evidence = [e.id for e in stored]
    out = []
    for i, ((comp, (problem, action)), exp_id) in enumerate(zip(grid, evidence, strict=True)):
        prov: dict[str, object] = {"action_key": normalise_action(action)}
        if exp_id:
            prov.update(topic_ids=[exp_id], evidence_until=(T0 - timedelta(days=30)).timestamp())
        out.append(
            Lesson(
                id=f"les_stress_{i:03d}",
                rule=f"When {comp} {problem}: `{action}` fixed it (3 of 3).",
                trigger=f"{comp} {problem}",
                kind="prefer",
                action=action,
                status="active",
                confidence=0.6,
                supporting_ids=[exp_id] if exp_id else [],
                provenance=prov,
            )
        )
    return out


def experiences(component: str, problem: str, action: str, n: int, start: datetime) -> list[dict]:
    phrasings = [
        f"{component} {problem}",
        f"Fix it: {component} {problem} again",
        f"Investigate why {component} {problem}",
        f"{component} {problem} in production",
    ]
    rows = []
    for i in range(n):
        task = phrasings[i % len(phrasings)]
        rows.append(
            dict(
                task=task,
                action=action,
                outcome="failure",
                reason="no change",
                created_at=start + timedelta(minutes=2 * i),
            )
        )
        rows.append(
            dict(
                task=task,
                action=ALTERNATIVE,
                outcome="success",
                reason="fixed",
                created_at=start + timedelta(minutes=2 * i + 1),
            )
        )
    for j, row in enumerate(rows):
        row["idempotency_key"] = f"{component}-{problem}-{j}"
    return rows


@pytest.fixture(scope="module", params=[False, True], ids=["by-trigger", "by-topic-members"])
def base(request: Any, tmp_path_factory: Any, fast_embedder: object) -> tuple[Path, list[Lesson]]:
    """A store with the 200 active lessons (built once per variant, copied per test)."""
    home = tmp_path_factory.mktemp("stress") / "home"
    m = Mimir(home, embedder=fast_embedder, auto_consolidate=False)  # type: ignore[arg-type]
    lessons = unrelated_lessons(m if request.param else None)
    write_batch(m.deps, [Write(le, "admitted") for le in lessons], actor="test")
    m.close()
    return home, lessons


def open_copy(base: tuple[Path, list[Lesson]], home: Path, embedder: object) -> Mimir:
    shutil.copytree(base[0], home)
    return Mimir(home, embedder=embedder, auto_consolidate=False)  # type: ignore[arg-type]


def test_200_unrelated_lessons_are_never_superseded(
    base: tuple[Path, list[Lesson]], home: Path, fast_embedder: object
) -> None:
    m = open_copy(base, home, fast_embedder)
    lessons = base[1]
    assert len(lessons) == 200
    # New topics share the problem words *and* the exact action of 20 old lessons each, with
    # the opposite verdict: only the subject differs.
    rows: list[dict] = []
    problems = list(PROBLEMS.items())
    for k, comp in enumerate(NEW_COMPONENTS):
        problem, action = problems[k % len(problems)]
        rows += experiences(comp, problem, action, 4, T0 + timedelta(hours=k))
    m.record_many(rows)
    report = m.consolidate()
    assert report.ran
    new_avoid = [le for le in report.candidates if le.kind == "avoid"]
    assert len(new_avoid) >= 5  # the new topics did produce contradicting verdicts...
    assert [i for i in report.admitted if m.get_lesson(i).kind == "avoid"]  # ...some admitted
    assert report.superseded == []  # ...and none of them touched an unrelated lesson
    active = {le.id for le in m.list_lessons(status="active", limit=1000)}
    assert {le.id for le in lessons} <= active


def test_the_same_topic_paraphrased_does_supersede(
    base: tuple[Path, list[Lesson]], home: Path, fast_embedder: object
) -> None:
    # The control: without it the test above could pass with supersession switched off.
    m = open_copy(base, home, fast_embedder)
    lessons = base[1]
    comp, problem = "the Kafka consumer group", "runs out of memory"
    target = next(le for le in lessons if le.trigger == f"{comp} {problem}")
    m.record_many(experiences(comp, problem, PROBLEMS[problem], 4, T0))
    report = m.consolidate()
    assert report.superseded == [target.id]
    assert m.get_lesson(target.id).status == "superseded"
