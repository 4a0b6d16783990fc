"""Bench-only data (coding-agent experiences, a synthetic text embedder) and timing helpers.

Used by ``bench.perf``.

Embedding a million texts with MiniLM is impossible on a laptop-class CPU (~150 texts/s), so the
scale benchmark uses :class:`SyntheticEmbedder`, which maps each text *deterministically* (from a
hash of the text) to a 384-d unit vector with text-embedding-like structure:

* 64 latent "topics", each with 64 "subtopics" (4,096 clusters) in a 48-d latent space; a text's
  subtopic is picked by its hash, its position is the subtopic centre plus per-text noise, and
  the 48-d latent is projected to 384-d (orthonormal projection) plus a little 384-d noise, then
  L2-normalised.
* Result (checked by :func:`vector_stats`): random-pair cosine ~0 +- 0.15, same-topic ~0.4,
  same-subtopic ~0.7-0.8 (the 10th nearest neighbour of a query at 100k+ rows has cosine ~0.75),
  like MiniLM on short task texts.

With ``model`` set and :attr:`SyntheticEmbedder.charge_model` on, every ``embed`` call **also
runs the real model** on the same texts and throws its vectors away, so a timed recall or
recommend pays the real query-embedding cost while searching the synthetic vector space the
store was loaded with. Identical texts always give identical vectors (the hash), so ground truth
for ANN recall is exact numpy search over the same vectors.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

LATENT_DIM = 48
TOPICS = 64
SUBTOPICS = 64
_NOISE_ROWS = 1 << 16
_WIDE_ROWS = 1 << 14
_STRUCTURE_SEED = 20261130


class SyntheticEmbedder:
    """Deterministic synthetic 384-d vectors; optionally charges the real model's cost too."""

    dim = 384

    def __init__(self, model: Any = None, *, name: str = "bench-synthetic-384") -> None:
        self.name = name
        self.model = model
        self.charge_model = False
        rng = np.random.default_rng(_STRUCTURE_SEED)
        topic = rng.standard_normal((TOPICS, LATENT_DIM))
        topic /= np.linalg.norm(topic, axis=1, keepdims=True)
        sub = rng.standard_normal((TOPICS, SUBTOPICS, LATENT_DIM))
        sub /= np.linalg.norm(sub, axis=2, keepdims=True)
        centres = topic[:, None, :] + 1.1 * sub
        centres /= np.linalg.norm(centres, axis=2, keepdims=True)
        self._centres = centres.reshape(TOPICS * SUBTOPICS, LATENT_DIM).astype(np.float32)
        self._noise = (rng.standard_normal((_NOISE_ROWS, LATENT_DIM)) / np.sqrt(LATENT_DIM)).astype(
            np.float32
        )
        self._wide = (rng.standard_normal((_WIDE_ROWS, self.dim)) / np.sqrt(self.dim)).astype(
            np.float32
        )
        q, _r = np.linalg.qr(rng.standard_normal((self.dim, LATENT_DIM)))
        self._proj = q.T.astype(np.float32)  # (48, 384), orthonormal rows

    def vectors(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """The synthetic vectors of ``texts`` (no model cost)."""
        n = len(texts)
        if n == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = np.frombuffer(
            b"".join(hashlib.blake2b(t.encode("utf-8"), digest_size=16).digest() for t in texts),
            dtype=np.uint16,
        ).reshape(n, 8)
        cluster = (keys[:, 0].astype(np.int64) << 16 | keys[:, 1]) % (TOPICS * SUBTOPICS)
        sign = np.where(keys[:, 6] & 1, 1.0, -1.0).astype(np.float32)[:, None]
        noise = (self._noise[keys[:, 2]] + sign * self._noise[keys[:, 3]]) / np.sqrt(2.0)
        latent = self._centres[cluster] + 0.55 * noise
        wide = (
            self._wide[keys[:, 4] % _WIDE_ROWS] - self._wide[keys[:, 5] % _WIDE_ROWS]
        ) / np.sqrt(2.0)
        out = latent @ self._proj + 0.3 * wide
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out.astype(np.float32)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """The ``Embedder`` protocol: synthetic vectors (plus the real model's cost if charged)."""
        if self.charge_model and self.model is not None and texts:
            self.model.embed(list(texts))
        return self.vectors(texts)


# -- experiences ------------------------------------------------------------------------------

_VERBS = [
    "Fix",
    "Debug",
    "Speed up",
    "Refactor",
    "Add retries to",
    "Migrate",
    "Upgrade",
    "Investigate",
    "Resolve",
    "Harden",
    "Profile",
    "Stabilise",
    "Document",
    "Rewrite",
    "Parallelise",
    "Cache",
]
_SUBJECTS = [
    "authentication latency",
    "the flaky integration test",
    "a memory leak",
    "the database migration",
    "the CI pipeline",
    "the docker build",
    "the websocket reconnect logic",
    "token refresh",
    "the search endpoint",
    "CSV export",
    "the nightly backup job",
    "rate limiting",
    "the payment webhook handler",
    "image thumbnail generation",
    "session storage",
    "the GraphQL resolver",
    "log rotation",
    "the Kafka consumer",
    "PDF rendering",
    "the cron scheduler",
    "email delivery",
    "the feature flag client",
    "dependency resolution",
    "the ORM query for orders",
    "TLS certificate renewal",
    "the React hydration error",
    "the mobile push notifications",
    "the S3 upload path",
    "the Redis connection pool",
    "timezone handling",
    "the password reset flow",
    "the autocomplete widget",
    "the Terraform plan",
    "the Helm chart",
    "pagination of the audit log",
    "the gRPC client",
    "the Celery worker",
    "the GPU inference batcher",
    "unicode normalisation",
    "the billing invoice totals",
]
_PLACES = [
    "in the payments service",
    "for the billing API",
    "in the admin dashboard",
    "on the staging cluster",
    "in the mobile app backend",
    "in the data pipeline",
    "for the public REST API",
    "in the monorepo tooling",
    "on the ARM build agents",
    "in the analytics warehouse loader",
    "in the user profile service",
    "in the notification service",
    "in the legacy PHP app",
    "in the Go gateway",
    "in the Rust indexer",
    "in the Python SDK",
    "in the TypeScript client",
    "for the EU region",
    "in the checkout flow",
    "in the CLI",
]
_DETAILS = [
    "when many users sign in at once",
    "after the upgrade to Python 3.12",
    "under load",
    "only on Mondays",
    "since the last deploy",
    "when the cache is cold",
    "for large tenants",
    "behind the corporate proxy",
    "with the new ORM version",
    "when two workers race",
    "on machines with little memory",
    "in the nightly run",
    "for non-ASCII input",
    "when the network is flaky",
    "after the schema change",
    "on the first request",
    "with pytest-xdist",
    "inside the container",
    "during blue/green deploys",
    "on Windows runners",
]
_ERRORS = [
    "E11000 duplicate key error",
    "ModuleNotFoundError: No module named 'yaml'",
    "ECONNRESET",
    "OOMKilled",
    "HTTP 429 Too Many Requests",
    "psycopg2.errors.DeadlockDetected",
    "TimeoutError after 30s",
    "SSL: CERTIFICATE_VERIFY_FAILED",
    "segfault in libvips",
    "KeyError: 'user_id'",
    "UnicodeDecodeError",
    "ENOSPC no space left on device",
    "java.lang.OutOfMemoryError",
    "ImportError: cannot import name 'soft_unicode'",
    "panic: assignment to entry in nil map",
    "ERR max number of clients reached",
]
_ACTION_VERBS = [
    "Added",
    "Removed",
    "Pinned",
    "Replaced",
    "Tuned",
    "Wrapped",
    "Split",
    "Batched",
    "Cached",
    "Retried",
    "Moved",
    "Rewrote",
    "Disabled",
    "Enabled",
    "Upgraded",
    "Downgraded",
]
_ACTION_OBJECTS = [
    "a Redis cache in front of the session store",
    "urllib3 below 2 in requirements",
    "the slow query with an index on created_at",
    "exponential backoff around the HTTP call",
    "the connection pool size to 50",
    "the test into smaller isolated cases",
    "the writes into one transaction",
    "the markupsafe version to 2.0.1",
    "the job to a dedicated worker queue",
    "the N+1 query with a join",
    "the retry decorator with jitter",
    "the lock around the cache fill",
    "the feature flag for the new path",
    "the base image to python:3.12-slim",
    "the timeout from 5 to 30 seconds",
    "the mutex with a channel",
    "ulimit -n to 65536",
    "the fixture to session scope",
    "the CDN in front of thumbnails",
    "the dataclass with a pydantic model",
    "the memory limit of the pod to 2Gi",
    "the certificate bundle path",
    "the unique index and an upsert",
    "the cron schedule to off-peak hours",
    "the websocket heartbeat every 20s",
    "a circuit breaker around the payment provider",
    "the regex with a parser",
    "the queue consumer prefetch to 1",
    "the GC settings of the JVM",
    "the Terraform state lock",
    "the ORM eager loading",
    "the locale to C.UTF-8",
]


def make_experiences(n: int, seed: int, start: int = 0) -> list[dict[str, Any]]:
    """``n`` deterministic coding-agent experiences (task 10-30 words, one of ~500 actions)."""
    rng = np.random.default_rng([seed, start])
    pick = rng.integers(0, 1 << 30, size=(n, 10))
    out = []
    for i in range(n):
        p = pick[i]
        task = (
            f"{_VERBS[p[0] % len(_VERBS)]} {_SUBJECTS[p[1] % len(_SUBJECTS)]} "
            f"{_PLACES[p[2] % len(_PLACES)]} {_DETAILS[p[3] % len(_DETAILS)]}"
        )
        if p[4] % 3 == 0:
            task += f" ({_ERRORS[p[5] % len(_ERRORS)]})"
        task += f", ticket OPS-{start + i}"
        action = f"{_ACTION_VERBS[p[6] % len(_ACTION_VERBS)]} {_ACTION_OBJECTS[p[7] % 32]}"
        roll = p[8] % 100
        outcome = "success" if roll < 60 else "failure" if roll < 85 else "partial"
        reason = (
            f"still failing with {_ERRORS[p[9] % len(_ERRORS)]}" if outcome != "success" else ""
        )
        out.append(
            {
                "task": task,
                "action": action,
                "outcome": outcome,
                "reason": reason,
                "context": {"repo": f"repo-{p[2] % 50}", "branch": "main"},
            }
        )
    return out


def make_queries(n: int, seed: int) -> list[str]:
    """``n`` short query texts (a new task phrasing, 6-16 words), distinct for each seed."""
    rng = np.random.default_rng([seed, 7])
    pick = rng.integers(0, 1 << 30, size=(n, 5))
    out = []
    for i in range(n):
        p = pick[i]
        q = f"{_VERBS[p[0] % len(_VERBS)].lower()} {_SUBJECTS[p[1] % len(_SUBJECTS)]}"
        q += f" {_DETAILS[p[2] % len(_DETAILS)]}"
        if p[3] % 4 == 0:
            q += f" {_ERRORS[p[4] % len(_ERRORS)]}"
        out.append(f"{q} (q{seed}-{i})")
    return out


def vector_stats(emb: SyntheticEmbedder, n: int = 20000, seed: int = 1) -> dict[str, float]:
    """Random-pair cosine mean/std and the mean cosine of a query's 1st and 10th neighbour."""
    texts = [e["task"] for e in make_experiences(n, seed)]
    mat = emb.vectors(texts)
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, n, 4000), rng.integers(0, n, 4000)
    pair = np.einsum("ij,ij->i", mat[a], mat[b])
    qv = emb.vectors(make_queries(200, seed))
    sims = np.sort(qv @ mat.T, axis=1)[:, ::-1]
    return {
        "rows": float(n),
        "random_pair_cos_mean": round(float(pair.mean()), 3),
        "random_pair_cos_std": round(float(pair.std()), 3),
        "nn1_cos_mean": round(float(sims[:, 0].mean()), 3),
        "nn10_cos_mean": round(float(sims[:, 9].mean()), 3),
    }


# -- measuring ----------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """``10k`` -> 10000, ``1m`` -> 1000000."""
    t = text.strip().lower().replace("_", "")
    mult = 1_000_000 if t.endswith("m") else 1000 if t.endswith("k") else 1
    return int(float(t.rstrip("km")) * mult)


def size_label(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


Sample = tuple[float, float]  # (wall ms, process CPU ms: every thread of the process)


def pct(values: Sequence[float] | Sequence[Sample]) -> dict[str, float]:
    """p50 / p95 / mean / n of milliseconds (wall), plus the CPU p50 for (wall, cpu) samples."""
    if not values:
        return {"p50": float("nan"), "p95": float("nan"), "mean": float("nan"), "n": 0}
    arr = np.asarray(values, dtype=np.float64)
    wall = arr[:, 0] if arr.ndim == 2 else arr
    out = {
        "p50": round(float(np.percentile(wall, 50)), 3),
        "p95": round(float(np.percentile(wall, 95)), 3),
        "mean": round(float(wall.mean()), 3),
        "n": len(values),
    }
    if arr.ndim == 2:
        out["cpu_p50"] = round(float(np.percentile(arr[:, 1], 50)), 3)
    return out


def pct_rounds(rounds: Sequence[Sequence[Sample]]) -> dict[str, Any]:
    """:func:`pct` of every sample of every round, plus each round's own p50 / p95 and their
    medians (``p50_round_median`` / ``p95_round_median``): a burst of load from another tenant
    that slows one round moves the pooled p95 but not the median over rounds."""
    out: dict[str, Any] = pct([s for r in rounds for s in r])
    per = [pct(r) for r in rounds if r]
    if per:
        out["p50_rounds"] = [p["p50"] for p in per]
        out["p95_rounds"] = [p["p95"] for p in per]
        out["p50_round_median"] = round(float(np.median(out["p50_rounds"])), 3)
        out["p95_round_median"] = round(float(np.median(out["p95_rounds"])), 3)
    return out


def timed(fn: Callable[[], Any]) -> float:
    """Wall milliseconds of ``fn()``."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def timed2(fn: Callable[[], Any]) -> Sample:
    """(wall ms, process CPU ms) of ``fn()``: CPU time is less hurt by other jobs' load."""
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0, (time.process_time() - c0) * 1000.0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "mem_gib": mem,
        "os": platform.platform(),
        "python": platform.python_version(),
        "loadavg_at_start": load,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
    }
