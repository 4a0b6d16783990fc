"""Several processes writing one store at once: nothing lost, nothing duplicated."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from mimir_core import Mimir

WRITER = textwrap.dedent(
    """
    import sys
    from mimir_core import Mimir
    home, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    m = Mimir(home, embedder="hash")
    for i in range(n):
        # shared keys: every writer tries them; own keys: only this writer
        m.record(f"shared task {i}", "act", "success", idempotency_key=f"shared-{i}")
        m.record(f"{tag} task {i}", "act", "failure", idempotency_key=f"{tag}-{i}")
    batch = [{"task": f"{tag} batch {i}", "action": "b", "outcome": "partial"} for i in range(25)]
    m.record_many(batch)
    print("done", flush=True)
    """
)


def test_processes_writing_at_once_lose_nothing_and_duplicate_nothing(home: Path) -> None:
    Mimir(home, embedder="hash").stats()  # create the store first
    n, writers = 15, 3
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(home), f"w{w}", str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(writers)
    ]
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        assert "done" in out
    m = Mimir(home, embedder="hash")
    rows = m.store.column("experiences", ["idem_key", "task"]).to_pylist()
    keys = [r["idem_key"] for r in rows]
    assert len(keys) == len(set(keys)), "duplicate idempotency keys"
    tasks = [r["task"] for r in rows]
    assert sum(t.startswith("shared task") for t in tasks) == n
    for w in range(writers):
        assert sum(t.startswith(f"w{w} task") for t in tasks) == n
        assert sum(t.startswith(f"w{w} batch") for t in tasks) == 25
    assert m.stats().experiences == n + writers * (n + 25)
    assert m.recall("shared task 3", k=1)
