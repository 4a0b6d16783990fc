"""The learning benchmark's second stream, ``ops``: a HELD-OUT stream of ops/infra/data work.

Held out: this stream is never used to tune Mimir's knobs (recommend's thresholds and priors,
the lesson gate, recall's weights, ...). Every tuned figure was chosen on the ``dev`` stream
(:mod:`bench.learning_env`); this one exists so that what we report is not what we fitted. Do
not change a default in ``mimir_core`` because of a figure measured here; when a change is
tuned, it is tuned on ``dev`` and this stream says whether it carries over.

It has the same interface as :mod:`bench.learning_env` (``FAMILIES``, ``REPOS``, ``stream(seed,
n)``, tasks with ``luck`` for common random numbers, ``rate(...)``, ``best_rate(...)``) and is
structurally different from it in every respect the agents could have been fitted to:

* families: eight ops/infra/data problems (disk full on a build agent, Node heap out of memory,
  flaky DNS in CI, a Terraform state lock, Kafka consumer lag, certificate expiry, a slow SQL
  query, a Python wheel build failure) instead of six coding chores;
* phrasing: mixed styles per family (terse ticket titles, error-message-led tasks, long user
  stories, and a tagged form that carries the environment in the text), five per family;
* identifiers: hostnames, ticket ids, package versions, consumer groups, domains (four per
  family), not module or test names;
* context: the hidden rates depend on the **environment** the task runs in (cloud and OS:
  ``aws-linux``, ``azure-windows``, ``gcp-linux``, ``onprem-linux``), in every family, with a
  different best action per environment in most; the tag is in the task's context field
  (``Task.repo``, the field the agents use as their scope, with ``context_key="env"``) and, for
  one phrasing in five, in the text too;
* frequencies: families and environments are drawn with unequal weights (a few common
  problems and environments, a long tail), where the dev stream draws them uniformly;
* drift: one family (``terraform-state-lock``) drifts halfway: the fix that worked (force-unlock)
  stops working and waiting for the running pipeline starts to (a lock bot now holds the lock
  for real runs);
* every family has one trap that never works anywhere and a best action near 0.9 in each
  environment.

Every arm meets the same stream and the same luck: task ``t`` succeeds with action ``a`` iff
``stream[t].luck < rate(a)``. The seeded generator is salted (``"ops:<seed>"``), so seed 0 of
this stream shares no draws with seed 0 of the dev stream.
"""

from __future__ import annotations

import random

# ``rate`` and ``best_rate`` are the dev stream's: they read an action's rate for the task's
# context tag (``Action.rates`` is keyed by environment here), before or after drift.
from .learning_env import Action, Family, Task, best_rate, rate

NAME = "ops"
CONTEXT_KEY = "env"
"""What the context tag is (the record's context key): here the environment."""

ENVS: tuple[str, ...] = ("aws-linux", "azure-windows", "gcp-linux", "onprem-linux")
REPOS = ENVS
"""The context tags the hidden rates depend on (named ``REPOS`` for the shared interface: the
agents use them as their scope, as they use the repo in the dev stream)."""

ENV_WEIGHTS: tuple[float, ...] = (0.4, 0.2, 0.25, 0.15)


def _env(aws: float, azure: float, gcp: float, onprem: float) -> dict[str, float]:
    return dict(zip(ENVS, (aws, azure, gcp, onprem), strict=True))


def _all(r: float) -> dict[str, float]:
    return _env(r, r, r, r)


FAMILIES: tuple[Family, ...] = (
    Family(
        "disk-full",
        (
            "{x}: disk full",
            "ENOSPC: no space left on device on {x}",
            "build agent {x} at 100% disk usage, every job fails at checkout",
            "As the release manager I need {x} to stop failing builds with a full disk so that "
            "the nightly release goes out on time",
            "[{env}] {x} out of disk space",
        ),
        ("build-agent-07", "ci-runner-12", "jenkins-worker-3", "gha-runner-large-2"),
        (
            Action(
                "docker system prune -af --volumes",
                _env(0.9, 0.3, 0.85, 0.5),
                "disk full again within the hour: the space is held by the build cache",
            ),
            Action(
                "Remove-Item C:\\agent\\_work\\* -Recurse -Force",
                _env(0.05, 0.9, 0.05, 0.05),
                "pwsh: command not found",
            ),
            Action(
                "rm -rf ~/.cache/* /tmp/*",
                _env(0.4, 0.1, 0.4, 0.9),
                "freed 2 GB, still 98% used",
            ),
            Action(
                "resize2fs /dev/sda1",
                _all(0.0),
                "The filesystem is already 26214400 blocks long. Nothing to do!",
                trap=True,
            ),
        ),
    ),
    Family(
        "node-heap-oom",
        (
            "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory "
            "({x})",
            "webpack build OOM on {x}",
            "{x} build dies with heap out of memory in CI",
            "As a frontend developer I want the production bundle built with {x} to finish "
            "without running out of memory so that I can ship the release candidate",
            "[{env}] {x}: JS heap out of memory during build",
        ),
        ("node 18.19.0", "node 20.11.1", "node 16.20.2", "node 22.3.0"),
        (
            Action(
                "NODE_OPTIONS=--max-old-space-size=4096 npm run build",
                _env(0.9, 0.15, 0.9, 0.85),
                "'NODE_OPTIONS' is not recognized as an internal or external command",
            ),
            Action(
                "set NODE_OPTIONS=--max-old-space-size=4096 && npm run build",
                _env(0.1, 0.9, 0.1, 0.1),
                "heap limit unchanged: the variable was never exported",
            ),
            Action(
                "npm run build -- --no-source-maps",
                _all(0.45),
                "bundle still exceeds the heap limit",
            ),
            Action(
                "npm cache clean --force && npm run build",
                _all(0.0),
                "JavaScript heap out of memory (the cache was not the problem)",
                trap=True,
            ),
        ),
    ),
    Family(
        "ci-dns-flaky",
        (
            "getaddrinfo EAI_AGAIN {x}",
            "flaky DNS in CI: {x} intermittently fails to resolve",
            "CI: Temporary failure in name resolution ({x})",
            "As a platform engineer I need pipelines to stop failing on lookups of {x} so that "
            "developers stop pressing retry on every third build",
            "[{env}] DNS timeouts resolving {x}",
        ),
        ("registry.npmjs.org", "pypi.org", "ghcr.io", "api.github.com"),
        (
            Action(
                "echo 'options single-request-reopen' >> /etc/resolv.conf",
                _env(0.9, 0.05, 0.45, 0.85),
                "EAI_AGAIN again on the next run",
            ),
            Action(
                "enable NodeLocal DNSCache on the runner cluster",
                _env(0.4, 0.25, 0.9, 0.2),
                "lookups still time out under load",
            ),
            Action(
                "Clear-DnsClientCache; Set-DnsClientServerAddress -ServerAddresses 168.63.129.16",
                _env(0.05, 0.9, 0.05, 0.05),
                "Set-DnsClientServerAddress: not recognized on this runner",
            ),
            Action(
                "systemctl restart systemd-resolved",
                _all(0.0),
                "resolution fails again within minutes",
                trap=True,
            ),
        ),
    ),
    Family(
        "terraform-state-lock",
        (
            "{x}: terraform state lock stuck",
            "Error acquiring the state lock: ConditionalCheckFailedException ({x})",
            "{x} - plan blocked by state lock",
            "As an infra engineer I need the stale Terraform lock from the crashed pipeline "
            "cleared ({x}) so that the team can apply the network changes today",
            "[{env}] terraform apply hangs on the state lock, ticket {x}",
        ),
        ("OPS-4121", "OPS-4187", "INFRA-902", "INFRA-955"),
        (
            Action(
                "terraform force-unlock -force $LOCK_ID",
                _env(0.9, 0.35, 0.9, 0.85),
                "lock re-acquired immediately by the running pipeline",
                drift=_all(0.15),
            ),
            Action(
                "az storage blob lease break --blob-name terraform.tfstate",
                _env(0.05, 0.9, 0.05, 0.05),
                "az: the storage account does not exist in this subscription",
            ),
            Action(
                "wait for the running pipeline to finish, then rerun terraform apply",
                _all(0.3),
                "lock still held after 30 minutes",
                drift=_env(0.9, 0.35, 0.85, 0.85),
            ),
            Action(
                "terraform apply -lock=false",
                _all(0.0),
                "refused by policy: -lock=false is blocked in CI",
                trap=True,
            ),
        ),
    ),
    Family(
        "kafka-consumer-lag",
        (
            "consumer lag alert: {x}",
            "PagerDuty: {x} lag > 500k messages",
            "Kafka consumer group {x} falling behind",
            "As the data on-call I want {x} to catch up with its topic before the morning "
            "reports run so that the dashboards are not stale",
            "[{env}] {x} lag growing since the deploy",
        ),
        ("orders-consumer", "billing-events", "clickstream-etl", "audit-sink"),
        (
            Action(
                "kubectl scale deployment/consumer --replicas=12",
                _env(0.9, 0.4, 0.85, 0.3),
                "lag keeps growing: more replicas than partitions",
            ),
            Action(
                "raise max.poll.records to 2000 and restart the consumer",
                _env(0.5, 0.45, 0.5, 0.9),
                "rebalance storm after the restart",
            ),
            Action(
                "kafka-topics --alter --partitions 24",
                _env(0.3, 0.85, 0.3, 0.3),
                "per-key ordering broken, change reverted",
            ),
            Action(
                "kafka-consumer-groups --reset-offsets --to-latest --execute",
                _all(0.0),
                "skipped 3M messages: data loss flagged, offsets restored",
                trap=True,
            ),
        ),
    ),
    Family(
        "cert-expiry",
        (
            "SSL cert expiring in 3 days: {x}",
            "x509: certificate has expired or is not yet valid ({x})",
            "{x} cert expired",
            "As a security engineer I need the TLS certificate of {x} renewed before customers "
            "see browser warnings so that we stay compliant",
            "[{env}] renew the TLS certificate for {x}",
        ),
        ("api.example.com", "grafana.internal", "vpn.corp.example", "payments.example.com"),
        (
            Action(
                "certbot renew --force-renewal && systemctl reload nginx",
                _env(0.45, 0.2, 0.5, 0.9),
                "certbot: DNS-01 challenge failed",
            ),
            Action(
                "kubectl delete secret tls-cert -n ingress",
                _env(0.9, 0.35, 0.9, 0.2),
                "cert-manager: ACME order pending, secret not recreated",
            ),
            Action(
                "az network application-gateway ssl-cert update --key-vault-secret-id $SECRET",
                _env(0.05, 0.9, 0.05, 0.05),
                "az: resource not found",
            ),
            Action(
                "systemctl restart nginx",
                _all(0.0),
                "still serving the expired certificate",
                trap=True,
            ),
        ),
    ),
    Family(
        "slow-sql",
        (
            "slow query: {x}",
            "ERROR: canceling statement due to statement timeout ({x})",
            "{x} takes 40 s since the last release",
            "As a product analyst I want the {x} query to return in under a second so that the "
            "dashboard stops timing out during the weekly review",
            "[{env}] p99 latency regression on {x}",
        ),
        ("orders by customer_id", "daily revenue report", "search_products", "invoice lookup"),
        (
            Action(
                "CREATE INDEX CONCURRENTLY on the filtered column",
                _env(0.9, 0.9, 0.9, 0.5),
                "planner still chooses a sequential scan",
            ),
            Action(
                "ANALYZE the table to refresh planner statistics",
                _env(0.45, 0.4, 0.45, 0.9),
                "statistics refreshed, plan unchanged",
            ),
            Action(
                "rewrite the query with a CTE",
                _all(0.3),
                "the CTE is inlined: same plan",
            ),
            Action(
                "SET statement_timeout = '120s'",
                _all(0.0),
                "query still slow; the timeout change was rejected in review",
                trap=True,
            ),
        ),
    ),
    Family(
        "wheel-build-failure",
        (
            "pip wheel build failed: {x}",
            "error: subprocess-exited-with-error: Building wheel for {x} did not run successfully",
            "Failed building wheel for {x}",
            "As a data engineer I need {x} to install cleanly in the Docker image so that the "
            "ETL job can be deployed",
            "[{env}] cannot install {x}: compiler error",
        ),
        ("psycopg2 2.9.9", "numpy 1.26.4", "lxml 5.1.0", "grpcio 1.62.1"),
        (
            Action(
                "pip install --only-binary=:all: -r requirements.txt",
                _env(0.9, 0.45, 0.85, 0.3),
                "No matching distribution found (no wheel for this platform)",
            ),
            Action(
                "apt-get install -y build-essential python3-dev && pip install -r requirements.txt",
                _env(0.55, 0.0, 0.55, 0.9),
                "apt-get: command not found",
            ),
            Action(
                "install the Visual C++ Build Tools and retry pip install",
                _env(0.0, 0.9, 0.0, 0.0),
                "not a Windows host",
            ),
            Action(
                "pip install --no-cache-dir -r requirements.txt",
                _all(0.0),
                "same compiler error without the cache",
                trap=True,
            ),
        ),
    ),
)

FAMILY_WEIGHTS: tuple[float, ...] = (3.0, 2.5, 2.0, 1.5, 1.5, 1.0, 1.0, 0.75)
"""Unequal family frequencies (the dev stream's are uniform): common problems and a long tail."""

__all__ = [
    "CONTEXT_KEY",
    "ENVS",
    "FAMILIES",
    "NAME",
    "REPOS",
    "Task",
    "best_rate",
    "rate",
    "stream",
]


def stream(seed: int, n: int) -> list[Task]:
    """The seeded task stream (drift from task ``n // 2`` on). Its generator is salted with the
    stream's name: seed ``s`` here shares no draws with seed ``s`` of the dev stream."""
    rng = random.Random(f"{NAME}:{seed}")
    out = []
    for i in range(n):
        fam = rng.choices(FAMILIES, weights=FAMILY_WEIGHTS)[0]
        env = rng.choices(ENVS, weights=ENV_WEIGHTS)[0]
        text = rng.choice(fam.templates).format(x=rng.choice(fam.idents), env=env)
        out.append(Task(i, fam, env, text, rng.random(), i >= n // 2, CONTEXT_KEY))
    return out
