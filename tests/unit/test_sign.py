"""Lesson signing: the builtin-hash HMAC equals the standard library's, keys are private."""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from pathlib import Path

import pytest

from mimir_core.lessons.sign import hmac_sha256, load_or_create_key, sign, verify


@pytest.mark.parametrize("key_len", [1, 16, 32, 63, 64, 65, 200])
@pytest.mark.parametrize("message", [b"", b"abc", "règle — 規則".encode(), bytes(range(256)) * 9])
def test_hmac_equals_the_standard_library(key_len: int, message: bytes) -> None:
    key = os.urandom(key_len)
    assert hmac_sha256(key, message) == hmac.new(key, message, hashlib.sha256).hexdigest()


def test_rfc4231_case_2() -> None:
    digest = hmac_sha256(b"Jefe", b"what do ya want for nothing?")
    assert digest == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"


def test_a_changed_field_or_key_fails_verification(tmp_path: Path) -> None:
    key = load_or_create_key(tmp_path)
    fields = {"rule": "run `alembic upgrade head` first", "status": "active", "n": 3}
    signature = sign(key, fields)
    assert verify(key, fields, signature)
    assert not verify(key, {**fields, "status": "pinned"}, signature)
    assert not verify(os.urandom(32), fields, signature)
    assert not verify(key, fields, "")


def test_the_key_file_is_private_and_stable(tmp_path: Path) -> None:
    key = load_or_create_key(tmp_path)
    path = tmp_path / "keys" / "signing.key"
    assert len(key) == 32 and path.read_bytes() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert load_or_create_key(tmp_path) == key


def test_a_key_made_in_a_missing_home_makes_it_private_under_umask_000(tmp_path: Path) -> None:
    from mimir_core.lessons.lifecycle import log_event

    old = os.umask(0)
    try:
        load_or_create_key(tmp_path / "a" / "home")
        log_event(tmp_path / "b" / "home", "test")
    finally:
        os.umask(old)
    for made in ("a", "a/home", "a/home/keys", "b", "b/home", "b/home/logs"):
        assert stat.S_IMODE((tmp_path / made).stat().st_mode) == 0o700, made
