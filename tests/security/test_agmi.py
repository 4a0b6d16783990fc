"""The ``agmi-check`` tamper suite (agent-memory-integrity 0.6.3) over the lessons table.

Every at-rest edit must be rejected by Mimir's own checks, except T9, the whole-snapshot
rollback: restoring an older copy of the whole store (rows, heads and audit log together) cannot
be told from the inside, the one known and documented miss. If a later Mimir catches it (a head
kept outside the store), this test fails and the docs must change with it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agmi.check import render, run

from tests.security.agmi_adapter import MimirLessonsAdapter

ALL = {
    "tamper",
    "truncate",
    "delete_middle",
    "reorder",
    "forge",
    "cross_replay",
    "rollback_replay",
    "metadata_tamper",
    "snapshot_rollback",
}
DOCUMENTED_MISS = "snapshot_rollback"


def test_agmi_check_rejects_every_edit_but_the_documented_snapshot_rollback(
    home: Path, record_property: pytest.RecordProperty
) -> None:
    rows = run(MimirLessonsAdapter())
    table = render(MimirLessonsAdapter.name, rows)
    record_property("agmi", table)
    verdicts = {r["attack"]: r["verdict"] for r in rows}
    assert set(verdicts) == ALL, table  # a new edit in the suite needs a look
    assert verdicts.pop(DOCUMENTED_MISS) == "ACCEPTED", table
    assert set(verdicts.values()) == {"REJECTED"}, table
