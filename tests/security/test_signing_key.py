"""A lost, replaced or damaged signing key (review finding 12).

Never silently replaced: while the key is wrong, lessons are unverified (not served, not
quarantined), writing lessons raises a ``SigningKeyError`` naming the key file, ``mimir
doctor`` says what to do, and restoring the original key brings every lesson back.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mimir_core import Mimir
from mimir_core.errors import SigningKeyError
from mimir_core.lessons.lifecycle import insert
from mimir_core.ops.doctor import run_checks
from mimir_core.types import Lesson

QUERY = "install the dashboard npm dependencies"


def lesson(n: int) -> Lesson:
    return Lesson(
        id=f"les_{n}",
        rule=f"Install the dashboard's dependencies with `npm ci` ({n}).",
        trigger=f"Install the dashboard npm dependencies {n}",
        kind="prefer",
        action="npm ci",
        confidence=0.6,
        status="active",
    )


def opened(home: Path) -> Mimir:
    return Mimir(home, embedder="hash", auto_consolidate=False)  # the per-install key file


@pytest.fixture
def seeded(home: Path) -> Iterator[Path]:
    m = opened(home)
    insert(m.deps, [lesson(i) for i in range(3)], actor="t", event="admitted")
    assert len(m.lessons(QUERY)) == 3
    m.close()
    yield home / "keys" / "signing.key"


def lessons_check(m: Mimir) -> dict[str, object]:
    return next(c for c in run_checks(m) if c["check"] == "lessons")


def assert_unverified_not_quarantined(home: Path, key: Path) -> None:
    m = opened(home)
    try:
        assert m.lessons(QUERY) == []
        assert all(le.status == "active" for le in m.list_lessons())
        with pytest.raises(SigningKeyError, match=str(key)):
            m.consolidate()
        with pytest.raises(SigningKeyError, match=str(key)):
            m.pin_lesson("les_0")
        check = lessons_check(m)
        assert check["ok"] is False and str(key) in str(check["detail"])
    finally:
        m.close()


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_lost_or_replaced_key_is_never_silently_regenerated(
    home: Path, seeded: Path, how: str
) -> None:
    original = seeded.read_bytes()
    if how == "deleted":
        seeded.unlink()
    else:
        seeded.write_bytes(os.urandom(32))
    assert_unverified_not_quarantined(home, seeded)
    if how == "deleted":
        assert not seeded.exists()  # no new key was made
    seeded.write_bytes(original)  # restoring the key brings every lesson back
    m = opened(home)
    try:
        assert len(m.lessons(QUERY)) == 3
        assert lessons_check(m)["ok"]
        assert not any(e.event == "signature_failed" for e in m.audit_log())
    finally:
        m.close()


def test_a_malformed_key_file_is_a_clear_error_and_a_doctor_finding(
    home: Path, seeded: Path
) -> None:
    original = seeded.read_bytes()
    seeded.write_bytes(b"short")
    m = opened(home)
    try:
        with pytest.raises(SigningKeyError, match=rf"{seeded}.*malformed: 5 byte"):
            m.consolidate()
        check = lessons_check(m)
        assert check["ok"] is False and "malformed" in str(check["detail"])
        assert m.lessons(QUERY) == []
    finally:
        m.close()
    assert seeded.read_bytes() == b"short"  # never overwritten
    seeded.write_bytes(original)
    m = opened(home)
    try:
        assert len(m.lessons(QUERY)) == 3
    finally:
        m.close()


def test_a_malformed_key_file_without_lessons_is_not_an_oserror(home: Path) -> None:
    key = home / "keys" / "signing.key"
    key.parent.mkdir(parents=True, mode=0o700)
    key.write_bytes(b"12345")
    m = opened(home)
    try:
        with pytest.raises(SigningKeyError, match=str(key)):
            insert(m.deps, [lesson(0)], actor="t", event="admitted")
        assert lessons_check(m)["ok"] is False
    finally:
        m.close()


def test_with_the_key_lost_for_good_forgetting_the_lessons_starts_over(
    home: Path, seeded: Path
) -> None:
    seeded.unlink()
    m = opened(home)
    try:
        for i in range(3):
            m.forget(f"les_{i}")  # works without the key: only the evidence ids are read
    finally:
        m.close()
    m = opened(home)
    try:
        insert(m.deps, [lesson(7)], actor="t", event="admitted")  # a new key, recorded
        assert seeded.exists() and [le.id for le in m.lessons(QUERY)] == ["les_7"]
        assert lessons_check(m)["ok"]
    finally:
        m.close()
