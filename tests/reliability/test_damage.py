"""Damage inside table files that keeps their names and sizes (review findings 6, 7, 11, 16).

Bytes overwritten in a data file make it fail to decode (an Arrow error, or a panic of the Rust
reader) or decode into garbage vectors. The doctor must see it (it reads every row), the public
API must answer with a ``StoreError`` naming the table, and the repair must roll back or trim the
table, embed damaged vectors again, and say what was lost, without ever sending the user back to
itself.
"""

from __future__ import annotations

import glob
import json
import os
import random
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mimir_core import Mimir
from mimir_core.errors import MimirError, StoreError
from mimir_core.lessons.lifecycle import insert
from mimir_core.ops.backup import export_store
from mimir_core.ops.doctor import repair, run_checks
from mimir_core.store import core as store_mod
from mimir_core.store.integrity import read_meta
from mimir_core.types import Lesson

MIMIR = str(Path(sys.executable).parent / "mimir")
SELF = "mimir doctor --repair"


def open_m(home: Path) -> Mimir:
    return Mimir(home, embedder="hash", signing_key="k" * 32, auto_consolidate=False)


def env(home: Path) -> dict[str, str]:
    return {**os.environ, "MIMIR_HOME": str(home), "MIMIR_EMBEDDER": "hash"}


def seeded(home: Path, n: int = 6) -> list[str]:
    m = open_m(home)
    ids = [
        m.record(f"deploy step {i}", f"make deploy-{i}", "success", idempotency_key=f"k{i}").id
        for i in range(n)
    ]
    m.close()
    return ids


def add_lesson(m: Mimir, ident: str, evidence: list[str]) -> None:
    lesson = Lesson(
        id=ident,
        rule=f"Run the deploy through make ({ident}).",
        trigger="deploy the service",
        status="active",
        kind="prefer",
        action="make deploy",
        supporting_ids=evidence,
        confidence=0.7,
    )
    insert(m.deps, [lesson], actor="t", event="admitted")


def newest_data(table: Path) -> Path:
    return Path(max(glob.glob(str(table / "data" / "*.lance")), key=os.path.getmtime))


def overwrite(path: Path, seed: int, size: int = 128) -> None:
    """``size`` random bytes over a random place of the file (its size unchanged)."""
    rnd = random.Random(seed)
    data = bytearray(path.read_bytes())
    at = rnd.randrange(0, len(data) - size)
    data[at : at + size] = rnd.randbytes(size)
    path.write_bytes(bytes(data))


def checks(m: Mimir) -> dict[str, dict[str, Any]]:
    return {c["check"]: c for c in run_checks(m)}


def assert_no_self_reference(report: dict[str, Any]) -> None:
    assert not any(SELF in p for p in report["problems"]), report


# -- finding 6: a damaged meta table -----------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_bytes_in_meta_are_diagnosed_and_repaired(home: Path, seed: int) -> None:
    seeded(home)
    overwrite(newest_data(home / "store" / "meta.lance"), seed)
    with pytest.raises(StoreError) as err:
        open_m(home).stats()
    assert "meta" in str(err.value)
    m = open_m(home)
    found = checks(m)["tables"]
    assert not found["ok"] and "meta:" in found["detail"]
    report = repair(m)
    assert not report["problems"], report
    assert any("table meta: " in a and "row(s) lost" in a for a in report["actions"]), report
    m.close()
    m = open_m(home)
    assert m.stats().experiences == 6
    assert m.store.meta()["embed_model"] == "hash-v1"
    assert all(c["ok"] for c in run_checks(m) if c["check"] in ("tables", "store", "contents"))


def test_meta_without_an_intact_version_is_trimmed_and_its_keys_derived_again(home: Path) -> None:
    seeded(home)
    m = open_m(home)
    m.store.optimize("meta", cleanup_older_than=timedelta(0))  # one fragment, no old versions
    m.close()
    overwrite(newest_data(home / "store" / "meta.lance"), 3)
    m = open_m(home)
    report = repair(m)
    assert not report["problems"], report
    assert any("table meta: no intact older version" in a for a in report["actions"]), report
    assert any(f"schema_version={store_mod.SCHEMA_VERSION}" in a for a in report["actions"])
    m.close()
    assert open_m(home).stats().experiences == 6
    assert read_meta(home / "store")["embed_model"] == "hash-v1"


def test_a_meta_table_with_no_readable_manifest_is_made_anew(home: Path) -> None:
    seeded(home)
    for manifest in glob.glob(str(home / "store" / "meta.lance" / "_versions" / "*.manifest")):
        os.truncate(manifest, 20)
    m = open_m(home)
    report = repair(m)
    assert not report["problems"], report
    assert any("table meta: unreadable in every version" in a for a in report["actions"])
    m.close()
    m = open_m(home)
    assert m.stats().experiences == 6 and m.recall("deploy step 3", k=1)
    assert repair(m)["actions"] == []


def test_a_repair_that_fails_never_recommends_itself(home: Path) -> None:
    seeded(home)
    for manifest in glob.glob(str(home / "store" / "experiences.lance" / "_versions" / "*")):
        os.truncate(manifest, 20)
    report = repair(open_m(home))
    assert report["problems"], report
    assert_no_self_reference(report)
    assert "backup" in report["problems"][0] or "import" in report["problems"][0]


# -- finding 7: a damaged lessons table ------------------------------------------------------


def damaged_lessons(home: Path) -> list[str]:
    ids = seeded(home)
    m = open_m(home)
    add_lesson(m, "les_deploy", ids[:3])
    m.close()
    overwrite(newest_data(home / "store" / "lessons.lance"), 1, size=64)
    return ids


def test_damaged_lessons_are_a_store_error_everywhere_and_doctor_sees_them(home: Path) -> None:
    damaged_lessons(home)
    m = open_m(home)
    for call in (
        lambda: m.lessons("deploy the service"),
        lambda: m.context("deploy the service"),
        lambda: export_store(m.deps, home / "out.jsonl"),
    ):
        with pytest.raises(StoreError) as err:
            call()
        assert "table lessons" in str(err.value) and SELF in str(err.value)
    found = checks(m)["tables"]
    assert not found["ok"] and "lessons:" in found["detail"]
    for args in (["lessons", "deploy"], ["export", "-o", str(home / "x.jsonl")]):
        proc = subprocess.run(
            [MIMIR, *args, "--home", str(home)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env(home),
        )
        assert proc.returncode == 1 and "unexpected error" not in proc.stderr, proc.stderr
        assert "mimir: error: cannot read table lessons" in proc.stderr, proc.stderr


def test_damaged_lessons_are_rolled_back_and_the_loss_counted(home: Path) -> None:
    damaged_lessons(home)
    m = open_m(home)
    report = repair(m)
    assert not report["problems"], report
    rolled = [a for a in report["actions"] if a.startswith("table lessons: rolled back")]
    assert rolled and "1 row(s) lost" in rolled[0], report
    m.close()
    m = open_m(home)
    assert m.lessons("deploy the service") == []
    assert checks(m)["tables"]["ok"]
    again = repair(m)  # nothing left to roll back (reading the lessons may have audited the
    assert not again["problems"], again  # lost one's deletion: routine upkeep only)
    assert not [a for a in again["actions"] if a.startswith("table ")], again


# -- finding 11: a rollback names what it lost ------------------------------------------------


def test_a_rollback_counts_lost_rows_and_names_lessons_that_lost_evidence(home: Path) -> None:
    ids = seeded(home, 4)
    m = open_m(home)
    late = [m.record(f"late step {i}", "make deploy", "success").id for i in range(3)]
    add_lesson(m, "les_old", ids[:2])
    add_lesson(m, "les_late", [ids[0], *late])
    m.close()
    table = home / "store" / "experiences.lance"
    newest = min(glob.glob(str(table / "_versions" / "*.manifest")))  # v2 names count down
    os.truncate(newest, 40)
    m = open_m(home)
    report = repair(m)
    assert not report["problems"], report
    moved = [a for a in report["actions"] if a.startswith("table experiences: moved")]
    assert moved and "up to 1 row(s) written by the lost versions are lost" in moved[0], report
    note = " ".join(report["notes"])
    assert "les_late (1)" in note and "les_old" not in note, report
    assert "1 of the 5 experience id(s) lessons cite point to nothing" in note, report


# -- finding 16: damaged vectors --------------------------------------------------------------


def poison_vectors(home: Path, value: float, rows: int = 3) -> list[str]:
    """Overwrite the first component of some rows' task vectors in place with ``value``."""
    m = open_m(home)
    got = m.store.select("experiences", None, ["id", "vector"])
    m.close()
    table = home / "store" / "experiences.lance"
    files = glob.glob(str(table / "data" / "*.lance"))
    hit = []
    for row in got[:rows]:
        vec = np.asarray(row["vector"], dtype=np.float32).tobytes()
        for path in files:
            data = bytearray(Path(path).read_bytes())
            at = data.find(vec)
            if at >= 0:
                data[at : at + 4] = np.float32(value).tobytes()
                Path(path).write_bytes(bytes(data))
                hit.append(str(row["id"]))
                break
    assert len(hit) == rows
    return hit


@pytest.mark.parametrize("value", [float("nan"), 3e38])
def test_damaged_vectors_are_reported_and_embedded_again(home: Path, value: float) -> None:
    seeded(home)
    hit = poison_vectors(home, value)
    m = open_m(home)
    found = checks(m)["tables"]
    assert not found["ok"] and "3 row(s) with damaged vectors" in found["detail"], found
    assert hit[0] in found["detail"]
    report = repair(m)
    assert not report["problems"], report
    assert any("embedded 3 row(s) with damaged vectors" in a for a in report["actions"]), report
    m.close()
    m = open_m(home)
    assert checks(m)["tables"]["ok"]
    rows = {r["id"]: r for r in m.store.select("experiences", None, ["id", "task", "vector"])}
    for ident in hit:
        want = m.embedder.embed([rows[ident]["task"]])[0]
        assert np.allclose(rows[ident]["vector"], want, atol=1e-6)
    assert m.stats().experiences == 6
    assert repair(m)["actions"] == []


def test_doctor_json_lists_the_damage(home: Path) -> None:
    seeded(home)
    poison_vectors(home, float("inf"), rows=1)
    proc = subprocess.run(
        [MIMIR, "doctor", "--home", str(home), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(home),
    )
    tables = next(c for c in json.loads(proc.stdout)["checks"] if c["check"] == "tables")
    assert not tables["ok"] and "damaged vectors" in tables["detail"]
    assert proc.returncode != 0


def test_a_healthy_store_reads_back_every_row(home: Path) -> None:
    seeded(home)
    found = checks(open_m(home))["tables"]
    assert found["ok"] and "row(s) read back" in found["detail"]


def test_read_errors_are_mimir_errors_at_the_chokepoint(home: Path) -> None:
    damaged_lessons(home)
    m = open_m(home)
    with pytest.raises(MimirError):
        m.store.column("lessons", ["id", "payload", "vector"])


def test_a_garbled_lesson_payload_is_reported_not_called_healthy(home: Path) -> None:
    ids = seeded(home)
    m = open_m(home)
    add_lesson(m, "les_deploy", ids[:3])
    m.close()
    path = newest_data(home / "store" / "lessons.lance")
    data = path.read_bytes()
    at = data.index(b'"status":"active"')  # inside the signed payload: it decodes, garbled
    path.write_bytes(data[:at] + b'"status":"activ3"' + data[at + 17 :])
    m = open_m(home)
    found = checks(m)["tables"]
    assert not found["ok"] and "1 lesson row(s) whose signed payload" in found["detail"], found
    assert SELF not in found["detail"]  # repair cannot make it right: it says what can
    report = repair(m)
    assert not report["problems"], report
    # Doctor's lessons check read it, so it was quarantined (and audited) on that read: never
    # served, and repair has nothing left to call garbled.
    assert m.lessons("deploy the service") == []
    events = [e.event for e in m.audit_log("les_deploy")]
    assert "signature_failed" in events or any(
        "left as is: table lessons" in n for n in report["notes"]
    ), (events, report)


def overwrite_tail(path: Path, size: int = 64) -> None:
    """Random bytes over the end of the file (its footer: it then never decodes)."""
    data = bytearray(path.read_bytes())
    data[-size:] = random.Random(5).randbytes(size)
    path.write_bytes(bytes(data))


def test_a_lessons_rollback_is_not_taken_for_a_replay(home: Path) -> None:
    ids = seeded(home)
    m = open_m(home)
    add_lesson(m, "les_deploy", ids[:3])
    m.pin_lesson("les_deploy")  # a newer signed version, recorded as the lesson's head
    m.close()
    overwrite_tail(newest_data(home / "store" / "lessons.lance"))
    m = open_m(home)
    report = repair(m)
    assert not report["problems"], report
    assert any(a.startswith("table lessons: rolled back") for a in report["actions"]), report
    m.close()
    m = open_m(home)
    lesson = m.get_lesson("les_deploy")  # the version before the pin, as the repair left it
    assert lesson.status == "active" and not lesson.pinned
    assert [le.id for le in m.lessons("deploy the service")] == ["les_deploy"]


@pytest.mark.parametrize(
    ("was", "now"),
    [(b'{"id": "', b'{"id"; "'), (b'"action": "', b'"actiOn": "')],
    ids=["not JSON", "a field gone"],
)
def test_a_garbled_experience_document_is_a_store_error_and_made_again(
    home: Path, was: bytes, now: bytes
) -> None:
    seeded(home)
    table = home / "store" / "experiences.lance"
    for path in glob.glob(str(table / "data" / "*.lance")):
        data = Path(path).read_bytes()
        if was in data:  # the first row's document, damaged in place (same size)
            Path(path).write_bytes(data.replace(was, now, 1))
            break
    m = open_m(home)
    with pytest.raises(StoreError, match="document of row"):
        for i in range(6):
            m.recall(f"deploy step {i}", k=6)
    found = checks(m)["tables"]
    assert not found["ok"] and "1 row(s) whose document is garbled" in found["detail"], found
    report = repair(m)
    assert any("made the garbled document of 1 row(s)" in a for a in report["actions"]), report
    m.close()
    m = open_m(home)
    assert len(m.recall("deploy step 3", k=6)) == 6 and checks(m)["tables"]["ok"]
