"""Lesson signing: HMAC-SHA-256 with a per-install key (stdlib only: hooks verify the digest).

* The key is 32 random bytes in ``<home>/keys/signing.key`` (file 0600, directory 0700), created
  on first use. An explicit key (``Mimir(signing_key=...)``, which adapters fill from
  ``MIMIR_SIGNING_KEY``) overrides the file. There is no default or public key.
* What is signed: every field of a lesson except the signature itself (status, pinned flag,
  evidence, confidence and bi-temporal fields included), as canonical JSON. A legitimate change
  re-signs; anything else that edits a lesson in the store breaks the signature.
* Several machines sharing one store must share one key (``MIMIR_SIGNING_KEY``).
* The store remembers which key signed its lessons (:func:`key_id`, a one-way fingerprint, in
  its ``meta`` table). A missing, malformed or different key is never replaced silently: while
  it lasts, lessons are *unverified* (not served, but not quarantined either, so restoring the
  key brings them back) and writing lessons raises :class:`~mimir_core.errors.SigningKeyError`
  naming the key file (:mod:`.lifecycle`).
"""

from __future__ import annotations

import json
import os
from _operator import _compare_digest as compare_digest
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..ingest.spool import ensure_private_dir

KEY_BYTES = 32
KEY_FILE = ("keys", "signing.key")
_BLOCK = 64  # SHA-256 block size
_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))


_SHA256: list[Callable[..., Any]] = []


def _sha256() -> Callable[..., Any]:
    """The builtin SHA-256 constructor, found once (a failed import is retried on every call
    otherwise: ~0.1 ms each, and a hook hashes hundreds of record keys)."""
    if _SHA256:
        return _SHA256[0]
    # The builtin SHA-256 avoids importing OpenSSL (`hashlib`/`hmac` load `_hashlib`, 30-50 ms):
    # the injection hook verifies the lessons digest on every prompt.
    try:
        from _sha2 import sha256  # type: ignore[import-not-found,unused-ignore]  # Python 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ImportError:  # pragma: no cover - an interpreter without the builtin module
            from hashlib import sha256  # type: ignore[assignment,unused-ignore]
    _SHA256.append(sha256)
    return sha256  # type: ignore[no-any-return,unused-ignore]


def sha256_hex(data: bytes) -> str:
    """SHA-256 hex digest on the builtin hash (no OpenSSL import: see :func:`_sha256`)."""
    return str(_sha256()(data).hexdigest())


def hmac_sha256(key: bytes, message: bytes) -> str:
    """HMAC-SHA-256 (RFC 2104) as hex, on the builtin hash (equal to ``hmac.new``'s)."""
    sha256 = _sha256()
    if len(key) > _BLOCK:
        key = sha256(key).digest()
    key = key.ljust(_BLOCK, b"\0")
    inner = sha256(key.translate(_IPAD) + message).digest()
    return str(sha256(key.translate(_OPAD) + inner).hexdigest())


def canonical(data: Any) -> bytes:
    """Stable JSON bytes of ``data`` (sorted keys, no spaces)."""
    return json.dumps(
        data, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str
    ).encode("utf-8")


def key_path(home: str | os.PathLike[str]) -> Path:
    """Where the per-install key lives."""
    return Path(home).joinpath(*KEY_FILE)


def coerce_key(value: str | bytes) -> bytes:
    """An explicit key as bytes (a string is taken as its UTF-8 bytes)."""
    raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    if len(raw) < 16:
        # A short key is guessable; refusing it is kinder than signing with it.
        from ..errors import ConfigError

        raise ConfigError(f"signing_key: must be at least 16 bytes long; got {len(raw)}")
    return raw


def read_key(home: str | os.PathLike[str]) -> bytes | None:
    """The per-install key if it exists (``None`` otherwise); never creates one. Never raises:
    the hooks use it and fail open (:func:`key_file_problem` says what is wrong)."""
    try:
        data = key_path(home).read_bytes()
    except OSError:
        return None
    return data if len(data) >= 16 else None


def key_file_problem(home: str | os.PathLike[str]) -> str | None:
    """What is wrong with an existing key file (``None``: absent, or fine)."""
    path = key_path(home)
    if not os.path.lexists(path):
        return None
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"the signing key file {path} cannot be read ({exc.strerror or exc})"
    if len(data) < 16:
        return (
            f"the signing key file {path} is malformed: {len(data)} byte(s), a key has "
            f"{KEY_BYTES}; restore it from a backup of {path.parent}"
        )
    return None


def key_id(key: bytes) -> str:
    """A fingerprint of the key that cannot be turned back into it (kept in the store)."""
    return hmac_sha256(key, b"mimir lesson signing key id")[:32]


def load_or_create_key(home: str | os.PathLike[str]) -> bytes:
    """The per-install key, created (random, 0600 in a 0700 directory) on first use.

    Two processes creating it at once agree: the file is created exclusively and the loser
    reads the winner's key.
    """
    path = key_path(home)
    existing = read_key(home)
    if existing is not None:
        return existing
    problem = key_file_problem(home)
    if problem is not None:  # never overwrite a damaged key: the lessons need the original
        from ..errors import SigningKeyError

        raise SigningKeyError(problem)
    ensure_private_dir(path.parent)  # its missing parents (the home) 0700 too, whatever the umask
    try:
        path.parent.chmod(0o700)
    except OSError:
        pass
    key = os.urandom(KEY_BYTES)  # the CSPRNG `secrets` uses, without importing OpenSSL
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # atomic and exclusive: fails if another process won
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    winner = read_key(home)
    if winner is None:  # pragma: no cover - the file vanished between link and read
        raise OSError(f"cannot read signing key at {path}")
    return winner


def sign(key: bytes, fields: Mapping[str, Any]) -> str:
    """HMAC-SHA-256 (hex) of the canonical JSON of ``fields``."""
    return hmac_sha256(key, canonical(dict(fields)))


def verify(key: bytes, fields: Mapping[str, Any], signature: str) -> bool:
    """Whether ``signature`` is the HMAC of ``fields`` under ``key`` (constant time)."""
    if not signature or not isinstance(signature, str):
        return False
    return compare_digest(sign(key, fields), signature)
