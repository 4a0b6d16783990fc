"""Make ``mimir_learn_0.1.5.db``: a small real mimir-learn 0.1.5 store for the import tests.

Run with mimir-learn 0.1.5's own interpreter (not this repository's venv)::

    ~/.cache/mimir-bench/mimir-learn-0.1.5/bin/python -I tests/data/make_mimir_learn_db.py

It records through mimir-learn's public API (``record``, ``record_failure``, ``write``,
``supersede``) with a tiny deterministic embedder, so the file has every table a real store
has (``experiences``, its FTS index and the sqlite-vec index), then folds the WAL into the file.
"""

from __future__ import annotations

import hashlib
import sqlite3
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from mimir import Mimir
from mimir.embeddings import Embedder
from mimir.models import Experience, Outcome

OUT = Path(__file__).with_name("mimir_learn_0.1.5.db")
#: A fake (but well-formed) AWS key and a GitHub token: Mimir must redact both on import.
SECRET_AWS = "AKIAIOSFODNN7EXAMPLE"
SECRET_GH = "ghp_" + "x1Y2z3W4v5U6t7S8r9Q0p1O2n3M4l5K6j7I8"


class TinyEmbedder(Embedder):
    def embed(self, text: str) -> list[float]:
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        return [b / 255.0 for b in digest[:4]]


def main() -> int:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{OUT}{suffix}").unlink(missing_ok=True)
    m = Mimir(str(OUT), embedder=TinyEmbedder())
    base = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)
    tasks = [
        ("run the payments integration tests", "pytest tests/integration"),
        ("build the docs", "make -C docs html"),
        ("deploy the staging stack", "terraform apply -auto-approve"),
        ("lint the frontend", "npm run lint"),
        ("migrate the database", "alembic upgrade head"),
        ("restart the worker pool", "systemctl restart worker@*"),
    ]
    n = 0
    for round_ in range(4):
        for task, action in tasks:
            n += 1
            when = base + timedelta(hours=n)
            if (n + round_) % 3 == 0:
                exp = Experience(
                    task=task,
                    action=action,
                    outcome=Outcome.FAILURE,
                    score=0.0,
                    context={"failure_reason": f"exit code {n % 5 + 1}", "round": round_},
                    created_at=when,
                )
            elif n % 5 == 0:
                exp = Experience(
                    task=task,
                    action=action,
                    outcome=Outcome.PARTIAL,
                    score=0.5,
                    context={"round": round_},
                    created_at=when,
                )
            else:
                exp = Experience(
                    task=task,
                    action=action,
                    outcome=Outcome.SUCCESS,
                    score=1.0,
                    context={"round": round_, "agent_id": "bench"},
                    created_at=when,
                )
            m.write(exp)
    # The public convenience calls (timestamps: now).
    m.record_failure(
        "push the release tag",
        f"git push https://{SECRET_GH}@github.com/acme/app.git v1.2.0",
        reason="remote: Permission to acme/app.git denied",
        context={"env": {"AWS_ACCESS_KEY_ID": SECRET_AWS}, "note": f"key {SECRET_AWS} used"},
    )
    m.record("compiler le projet (été)", "cargo build --release", "success", context={"lang": "fr"})
    m.record("テストを実行する", "pytest -q", "success", context={"lang": "ja", "emoji": "✅🚀"})
    m.record("score contradicts outcome", "make check", "failure", score=0.8)
    old = m.record(
        "install dependencies",
        "pip install -r requirements.txt",
        "failure",
        score=0.1,
        context={"failure_reason": "resolver conflict"},
    )
    new = m.record("install dependencies", "uv pip sync requirements.lock", "success")
    m.supersede(old.id, new.id)
    m.storage.close()
    conn = sqlite3.connect(OUT)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("VACUUM")
    conn.close()
    rows = sqlite3.connect(OUT).execute("SELECT COUNT(*) FROM experiences").fetchone()[0]
    print(f"wrote {OUT} with {rows} experiences", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
