"""The lesson subcommands of the ``mimir`` CLI."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from mimir_core import Mimir
from mimir_integrations.cli import main
from mimir_integrations.demo import EXPERIENCES as DEMO


@pytest.fixture
def store(home: Path, fast_embedder: object) -> Path:
    m = Mimir(home, embedder=fast_embedder, auto_consolidate=False)  # type: ignore[arg-type]
    start = datetime(2026, 4, 1, tzinfo=timezone.utc)
    m.record_many(
        [
            {
                "task": t,
                "action": a,
                "outcome": o,
                "reason": r,
                "idempotency_key": f"cli-{i}",
                "created_at": start + timedelta(minutes=i),
            }
            for i, (t, a, o, r) in enumerate(DEMO)
        ]
    )
    m.close()
    return home


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_lesson_lifecycle_from_the_command_line(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = ("--home", str(store))
    code, out, _ = run(capsys, "consolidate", "--dry-run", *home)
    assert code == 0 and out.startswith("Dry run: would consolidate")
    code, out, _ = run(capsys, "consolidate", "--json", *home)
    report = json.loads(out)
    assert code == 0 and report["ran"] and report["admitted"]
    ident = report["admitted"][0]
    code, out, _ = run(capsys, "consolidate", *home)
    assert "nothing new since the last run" in out

    code, out, _ = run(capsys, "lessons", *home)
    assert code == 0 and ident in out and "confidence" in out and "gate: lift" in out
    code, out, _ = run(capsys, "lessons", "--status", "candidate", "--json", *home)
    assert {le["status"] for le in json.loads(out)} <= {"candidate"}
    code, out, _ = run(capsys, "lessons", "bake a sourdough loaf", *home)
    assert "No relevant lessons" in out

    code, out, _ = run(capsys, "show", ident, *home)
    assert code == 0 and "signature: valid" in out and "supporting evidence" in out
    assert "audit trail" in out and "admitted by consolidate" in out

    code, out, _ = run(capsys, "pin", ident, *home)
    assert out.strip() == f"pinned {ident}"
    code, out, _ = run(capsys, "pin", ident, "--unpin", *home)
    assert out.strip() == f"unpinned {ident}"
    code, out, _ = run(capsys, "quarantine", ident, "--reason", "misleads on node 22", *home)
    assert "quarantined" in out
    code, out, _ = run(capsys, "show", ident, *home)
    assert "quarantined by cli: misleads on node 22" in out
    code, out, _ = run(capsys, "retire", ident, "--reason", "stack retired", *home)
    assert "retired" in out

    supporting = Mimir(store, embedder="fastembed").get_lesson(ident).supporting_ids
    code, out, _ = run(capsys, "forget", ident, "--with-experiences", *home)
    assert code == 0 and "and its experiences" in out
    code, _out, err = run(capsys, "show", ident, *home)
    assert code == 1 and "no lesson with id" in err
    code, _out, err = run(capsys, "forget", supporting[0], *home)
    assert code == 1 and "no experience or lesson" in err


def test_cli_errors_are_one_line(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run(capsys, "quarantine", "les_nope", "--reason", "x", "--home", str(store))
    assert code == 1 and err.startswith("mimir: error:") and "les_nope" in err
    code, _out, err = run(capsys, "lessons", "--status", "alive", "--home", str(store))
    assert code == 1 and "status" in err
