"""The learning benchmark's environment: task families met again and again (seeded, offline).

Each family has tasks phrased many ways (paraphrase templates x identifiers), four candidate
actions with hidden success rates that depend on the repository the task comes from (the same
fix works in one repo and fails in another), one trap (an action that looks right and always
fails) and, for two families, drift (rates that change halfway through the stream, so stale
knowledge must fade). Every arm meets the same stream and the same luck: task ``t`` succeeds
with action ``a`` iff ``stream[t].luck < rate(a)`` (common random numbers across arms).

This is the ``dev`` stream, the one Mimir's knobs were tuned on (``--stream dev``, the default).
:mod:`bench.learning_env_ops` is a structurally different, held-out stream (``--stream ops``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

NAME = "dev"
CONTEXT_KEY = "repo"
"""What the context tag is (the record's context key): here the repository."""

REPOS: tuple[str, ...] = ("payments-api", "web-app", "data-pipeline")


@dataclass(frozen=True)
class Action:
    """A candidate action: its command, hidden rate per repo (before, after drift), and why
    it fails."""

    command: str
    rates: dict[str, float]
    reason: str
    drift: dict[str, float] = field(default_factory=dict)
    trap: bool = False


@dataclass(frozen=True)
class Family:
    """A task family: how its tasks are phrased, the identifiers they mention, the actions."""

    name: str
    templates: tuple[str, ...]
    idents: tuple[str, ...]
    actions: tuple[Action, ...]

    @property
    def commands(self) -> list[str]:
        return [a.command for a in self.actions]


def _all(rate: float) -> dict[str, float]:
    return {r: rate for r in REPOS}


def _per(pay: float, web: float, data: float) -> dict[str, float]:
    return dict(zip(REPOS, (pay, web, data), strict=True))


FAMILIES: tuple[Family, ...] = (
    Family(
        "integration-tests",
        (
            "run the {x} integration tests",
            "get the {x} integration suite passing",
            "integration tests for {x} fail against the database",
            "execute the {x} end-to-end DB tests before merging",
            "the {x} integration test job is red, make it pass",
            "verify {x} against a real database with the integration suite",
        ),
        ("orders", "billing", "refunds", "ledger", "invoices", "accounts", "payouts", "carts"),
        (
            Action(
                "pytest tests/integration", _all(0.0), 'relation "orders" does not exist', trap=True
            ),
            Action(
                "alembic upgrade head && pytest tests/integration",
                _per(0.85, 0.2, 0.3),
                "alembic: Can't locate revision",
            ),
            Action(
                "docker compose up -d db && pytest tests/integration",
                _per(0.35, 0.85, 0.4),
                "connection refused on port 5432",
            ),
            Action("tox -e integration", _all(0.3), "tox: InterpreterNotFound"),
        ),
    ),
    Family(
        "import-error",
        (
            "ModuleNotFoundError: No module named '{x}' when running the app",
            "fix the import error for {x}",
            "python can't import {x} after checkout",
            "ImportError on {x} in the test run",
            "the {x} package is not found by the interpreter",
            "resolve 'No module named {x}' in CI",
        ),
        (
            "mimir_utils",
            "app.core",
            "payments",
            "etl.jobs",
            "common",
            "settings",
            "api.v2",
            "models",
        ),
        (
            Action(
                "pip install -e .", _per(0.8, 0.8, 0.25), "error: no setup.py or pyproject found"
            ),
            Action(
                "poetry install", _per(0.3, 0.3, 0.85), "Poetry could not find a pyproject.toml"
            ),
            Action(
                "export PYTHONPATH=src",
                _all(0.0),
                "ModuleNotFoundError persists in subprocess",
                trap=True,
            ),
            Action("pip install -r requirements.txt", _all(0.4), "ResolutionImpossible"),
        ),
    ),
    Family(
        "frontend-build",
        (
            "the frontend build fails with {x}",
            "npm build breaks: {x}",
            "fix the webpack bundle error {x}",
            "production bundle won't compile ({x})",
            "CI frontend job fails on {x}",
            "make the web build pass again after {x}",
        ),
        (
            "ERR_OSSL_EVP_UNSUPPORTED",
            "Module not found: Can't resolve 'react-dom'",
            "EINTEGRITY",
            "TS2307",
            "heap out of memory",
            "ELIFECYCLE",
            "Cannot find module 'sass'",
            "peer dependency conflict",
        ),
        (
            Action(
                "npm ci && npm run build",
                _all(0.8),
                "npm ERR! lockfile out of sync",
                drift=_all(0.15),
            ),
            Action(
                "rm -rf node_modules && npm install && npm run build",
                _all(0.45),
                "build failed again after reinstall",
                drift=_all(0.8),
            ),
            Action("npm run build -- --force", _all(0.0), "same error with --force", trap=True),
            Action("yarn build", _all(0.25), "yarn: lockfile mismatch"),
        ),
    ),
    Family(
        "flaky-test",
        (
            "{x} is flaky in CI",
            "the test {x} fails intermittently",
            "stabilise the flaky {x}",
            "{x} passes locally but randomly fails on the runner",
            "intermittent failure in {x}, fix it",
            "CI reruns keep failing on {x}",
        ),
        (
            "test_checkout_total",
            "test_refund_race",
            "test_login_redirect",
            "test_etl_window",
            "test_cache_expiry",
            "test_webhook_retry",
            "test_export_csv",
            "test_session_timeout",
        ),
        (
            Action("pytest --reruns 3", _all(0.45), "still failing after 3 reruns"),
            Action(
                "pytest -p no:randomly",
                _per(0.8, 0.75, 0.25),
                "order-independent failure",
            ),
            Action("pytest --lf -x", _all(0.0), "passes alone, fails in the suite", trap=True),
            Action("git bisect run pytest", _per(0.3, 0.3, 0.75), "bisect found no culprit"),
        ),
    ),
    Family(
        "deploy-staging",
        (
            "deploy {x} to staging",
            "ship the {x} service to the staging cluster",
            "roll out the new {x} build on staging",
            "staging deployment of {x} is stuck, redeploy",
            "push {x} to the staging environment",
            "release {x} on staging for QA",
        ),
        ("api", "worker", "frontend", "scheduler", "gateway", "auth", "search", "notifier"),
        (
            Action(
                "kubectl rollout restart deployment/api",
                _all(0.35),
                "deployment exceeded its progress deadline",
            ),
            Action(
                "helm upgrade --install api ./chart",
                _all(0.85),
                "Error: UPGRADE FAILED: another operation is in progress",
                drift=_all(0.3),
            ),
            Action("kubectl apply -f k8s/", _all(0.5), "field is immutable", drift=_all(0.85)),
            Action(
                "terraform apply -auto-approve",
                _all(0.0),
                "Error acquiring the state lock",
                trap=True,
            ),
        ),
    ),
    Family(
        "lint-ci",
        (
            "the lint job fails with {x}",
            "fix the {x} lint errors",
            "CI style check reports {x}",
            "clean up {x} warnings so the linter passes",
            "pre-merge lint is red because of {x}",
            "make the code pass linting ({x})",
        ),
        (
            "E501",
            "F401 unused import",
            "W291",
            "I001 import order",
            "E711",
            "B008",
            "UP006",
            "E402",
        ),
        (
            Action("ruff check --fix .", _all(0.85), "remaining errors need manual fixes"),
            Action("black .", _all(0.3), "black does not fix lint rules"),
            Action("pre-commit run --all-files", _all(0.55), "hooks modified files"),
            Action(
                "flake8 --extend-ignore E501", _all(0.0), "CI config overrides ignores", trap=True
            ),
        ),
    ),
)


@dataclass(frozen=True)
class Task:
    """One task of the stream."""

    index: int
    family: Family
    repo: str
    text: str
    luck: float
    drifted: bool
    context_key: str = CONTEXT_KEY
    """What ``repo`` holds: the repository here, the environment in the ops stream (the context
    tag the hidden rates depend on, and the scope the agents work in)."""


def rate(family: Family, command: str, repo: str, drifted: bool) -> float:
    """The hidden success rate of ``command`` for a task of ``family`` in ``repo`` (the task's
    context tag: its repo, or its environment in the ops stream)."""
    for a in family.actions:
        if a.command == command:
            rates = a.drift if drifted and a.drift else a.rates
            return rates[repo]
    return 0.0


def best_rate(family: Family, repo: str, drifted: bool) -> float:
    """What the oracle (who knows the hidden rates) gets on average."""
    return max(rate(family, c, repo, drifted) for c in family.commands)


def stream(seed: int, n: int) -> list[Task]:
    """The seeded task stream (drift from task ``n // 2`` on)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        fam = rng.choice(FAMILIES)
        text = rng.choice(fam.templates).format(x=rng.choice(fam.idents))
        out.append(Task(i, fam, rng.choice(REPOS), text, rng.random(), i >= n // 2))
    return out
