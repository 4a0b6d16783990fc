"""The scripted work :mod:`bench.hosts` replays through every host: task families, their
paraphrases and plausible commands with the truth about each (see that module's doc).

Everything is seeded: the schedule from ``(seed, "schedule")``, each command's outcome in a
session from ``(seed, session, command)``, so that every host lives the same sessions with the
same luck and only what it shows the agent differs.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Cmd:
    """A plausible command for a family: its success probability (``p_late`` from the family's
    halfway session on, for drift), exit code and error when it fails."""

    text: str
    p: float
    error: str
    code: int = 1
    p_late: float | None = None


@dataclass(frozen=True)
class Family:
    """A kind of task: how it is asked, what could be run for it, what success prints."""

    key: str
    asks: tuple[str, ...]
    cmds: tuple[Cmd, ...]
    done: str

    def cmd(self, text: str) -> Cmd | None:
        return next((c for c in self.cmds if c.text == text), None)

    def p(self, text: str, k: int, n: int) -> float:
        """The true success probability of ``text`` in the family's ``k``-th of ``n`` sessions."""
        c = self.cmd(text)
        if c is None:
            return 0.0
        return c.p_late if c.p_late is not None and k >= n // 2 else c.p


NO_RULE = "make: *** No rule to make target '{}'.  Stop."
FAMILIES = {
    f.key: f
    for f in (
        Family(
            "deploy",
            (
                "deploy the shopfront service to staging",
                "push the latest shopfront build to the staging environment",
                "ship shopfront to staging so QA can try it",
                "roll the current main branch of shopfront out to staging",
            ),
            (
                Cmd("./scripts/deploy.sh staging", 0.9, "error: rollout status timed out (120s)"),
                Cmd("make deploy-staging", 0.0, NO_RULE.format("deploy-staging"), 2),
                Cmd(
                    "kubectl apply -f k8s/staging/",
                    0.0,
                    "error: You must be logged in to the server (Unauthorized)",
                ),
            ),
            'deployment "shopfront" successfully rolled out',
        ),
        Family(
            "itest",
            (
                "run the integration tests",
                "check that the integration test suite passes",
                "make sure the integration tests are green before merging",
                "run the shopfront integration tests against the local database",
            ),
            (
                Cmd(
                    "pytest tests/integration -q",
                    0.9,
                    "FAILED tests/integration/test_checkout.py::test_refund - AssertionError",
                ),
                Cmd("make test-integration", 0.0, NO_RULE.format("test-integration"), 2),
                Cmd("npm run test:integration", 0.0, 'npm ERR! Missing script: "test:integration"'),
                Cmd(
                    "tox -e integration",
                    0.7,
                    "psycopg.OperationalError: connection to server at 127.0.0.1, port 5432 "
                    "failed: Connection refused",
                ),
            ),
            "42 passed in 18.31s",
        ),
        Family(
            "image",
            (
                "build the docker image for shopfront",
                "build the container image",
                "rebuild the docker image after the dependency bump",
                "produce a fresh docker image of the app",
            ),
            (
                Cmd(
                    "docker build -t shopfront:dev .",
                    0.9,
                    "ERROR: failed to solve: failed to fetch oauth token: 503 Service Unavailable",
                ),
                Cmd("docker compose build", 0.0, "no configuration file provided: not found", 14),
                Cmd("make image", 0.0, NO_RULE.format("image"), 2),
            ),
            "naming to docker.io/library/shopfront:dev done",
        ),
        Family(
            "migrate",  # drifts: the new wrapper script replaces a plain alembic upgrade
            (
                "migrate the database to the latest schema",
                "apply the pending database migrations",
                "bring the database schema up to date",
                "run the new migrations on the dev database",
            ),
            (
                Cmd(
                    "alembic upgrade head",
                    0.9,
                    "FAILED: Multiple head revisions are present for given argument 'head'; "
                    "please specify a specific target revision",
                    p_late=0.0,
                ),
                Cmd(
                    "./scripts/migrate.sh",
                    0.0,
                    "bash: ./scripts/migrate.sh: No such file or directory",
                    127,
                    p_late=0.9,
                ),
                Cmd(
                    "python manage.py migrate",
                    0.0,
                    "python: can't open file 'manage.py': [Errno 2] No such file or directory",
                    2,
                ),
            ),
            "INFO  [alembic.runtime.migration] Running upgrade 3f2a -> 9c1d, add refunds table",
        ),
        Family(
            "lint",
            (
                "lint the codebase",
                "run the linters and report the problems",
                "check the code style of the python sources",
                "run the static checks before I open the PR",
            ),
            (
                Cmd("ruff check .", 0.9, "src/shopfront/cart.py:88:5: F841 unused variable"),
                Cmd("flake8 src", 0.0, "bash: flake8: command not found", 127),
                Cmd(
                    "pre-commit run --all-files",
                    0.7,
                    "An unexpected error has occurred: CalledProcessError: command: "
                    "('/usr/bin/git', 'fetch', 'origin', '--tags') return code: 128",
                    3,
                ),
            ),
            "All checks passed!",
        ),
        Family(
            "notes",
            (
                "write the release notes for the next version",
                "draft the changelog for the upcoming release",
                "generate release notes from the merged pull requests",
                "prepare the release notes for v2.4",
            ),
            (
                Cmd(
                    "git cliff --unreleased --prepend CHANGELOG.md",
                    0.9,
                    "ERROR git_cliff > Template error: failed to render the changelog",
                ),
                Cmd(
                    "towncrier build --yes",
                    0.0,
                    "No configuration file found. Looked in: towncrier.toml, pyproject.toml",
                ),
                Cmd(
                    "gh release create v2.4.0 --generate-notes --draft",
                    0.0,
                    "HTTP 403: Resource not accessible by integration",
                ),
            ),
            "Prepended the unreleased changes to CHANGELOG.md",
        ),
    )
}
#: The second project: the integration tests there run another way (make works, pytest finds
#: no tests/integration, tox has no such environment).
OTHER = Family(
    "itest",
    FAMILIES["itest"].asks,
    (
        Cmd("make test-integration", 0.9, "FAILED tests/test_links.py::test_anchors"),
        Cmd(
            "pytest tests/integration -q",
            0.0,
            "ERROR: file or directory not found: tests/integration",
            4,
        ),
        Cmd("tox -e integration", 0.0, "ERROR: unknown environment 'integration'", 2),
    ),
    "12 passed in 3.02s",
)


@dataclass(frozen=True)
class Session:
    """One task in one session: where, which family, and its place among the family's."""

    index: int
    sid: str
    project: str
    cwd: str
    family: Family
    k: int  # the family's session number in this project, 0 for its first
    n: int  # the family's sessions in this project
    ask: str


@dataclass(frozen=True)
class Result:
    """What running a command did (what a shell would report)."""

    ok: bool
    code: int
    output: str


def schedule(
    families: list[str], per_family: int, other: int, seed: int, root: Path
) -> list[Session]:
    """The sessions every host replays: the other project's first, then this project's
    families interleaved at random, each session asked in one of its family's phrasings."""
    rng = random.Random(f"{seed}|schedule")
    main, side = root / "shopfront", root / "docs-site"
    for d in (main, side):
        (d / ".git").mkdir(parents=True, exist_ok=True)
    plan = [("docs-site", side, OTHER)] * other
    order = [k for k in families for _ in range(per_family)]
    rng.shuffle(order)
    plan += [("shopfront", main, FAMILIES[k]) for k in order]
    seen: dict[tuple[str, str], int] = defaultdict(int)
    out = []
    for i, (project, cwd, fam) in enumerate(plan):
        k = seen[(project, fam.key)]
        seen[(project, fam.key)] += 1
        n = other if project == "docs-site" else per_family
        ask = rng.choice(fam.asks)
        out.append(Session(i, f"bench-{seed}-{i:03d}", project, str(cwd), fam, k, n, ask))
    return out


def outcome(seed: int, s: Session, text: str) -> Result:
    """What running ``text`` does in session ``s`` (the same for every host)."""
    c = s.family.cmd(text)
    ok = random.Random(f"{seed}|{s.index}|{text}").random() < s.family.p(text, s.k, s.n)
    if ok or c is None:
        return Result(True, 0, s.family.done)
    return Result(False, c.code, c.error)
