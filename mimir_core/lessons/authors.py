"""Per-author Ed25519 keys: who wrote a lesson, provable by anyone who reads it.

The HMAC key (:mod:`.sign`) proves a lesson was written by *some* holder of one shared secret;
on a store several machines share, that is every machine (and anyone who copies the key from one
laptop). So each installation also has its own Ed25519 key pair:

* ``<home>/keys/author.key``: the 32-byte private seed (file 0600, directory 0700), created on
  first use. It never leaves the home; the public key goes into every lesson it signs.
* The **key id** is a fingerprint of the public key (:func:`key_id_of`): a public key claiming an
  id that is not its fingerprint is refused, so an id on the trust list names one key only.
* A team admin key (``<home>/keys/admin.key``, same format) signs the trust list (:mod:`.trust`).

The signatures come from the ``cryptography`` package (no cryptography by hand here); it is
imported lazily, as the hook path never signs or verifies Ed25519 (it reads the HMAC-signed
digest the core writes from lessons already verified).
"""

from __future__ import annotations

import base64
import getpass
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..ingest.spool import ensure_private_dir
from .sign import sha256_hex

AUTHOR_FILE = ("keys", "author.key")
ADMIN_FILE = ("keys", "admin.key")
SEED_BYTES = 32
#: How an installation names itself to the team unless ``MIMIR_AUTHOR`` says otherwise.
NAME_ENV = "MIMIR_AUTHOR"
_NAME_OK = re.compile(r"[^A-Za-z0-9@._+-]+")


def key_id_of(public: bytes) -> str:
    """The fingerprint naming a public key (128 bits of SHA-256, hex)."""
    return sha256_hex(b"mimir author key\0" + bytes(public))[:32]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: object) -> bytes | None:
    """Bytes of a base64 string, ``None`` for anything else (never raises)."""
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        return None


def installation_name() -> str:
    """A short human name for this installation (``MIMIR_AUTHOR``, else ``user@host``)."""
    name = os.environ.get(NAME_ENV, "").strip()
    if not name:
        try:
            name = f"{getpass.getuser()}@{socket.gethostname().split('.')[0]}"
        except (OSError, KeyError):  # no user name in a container, say
            name = "mimir"
    return _NAME_OK.sub("-", name)[:64] or "mimir"


@dataclass(frozen=True)
class AuthorKey:
    """An Ed25519 key pair loaded from the private home."""

    seed: bytes
    public: bytes
    name: str

    @property
    def key_id(self) -> str:
        return key_id_of(self.public)

    @property
    def public_b64(self) -> str:
        return b64(self.public)

    def sign(self, message: bytes) -> str:
        """The Ed25519 signature of ``message`` (base64)."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        return b64(Ed25519PrivateKey.from_private_bytes(self.seed).sign(message))

    def __repr__(self) -> str:  # never print the seed
        return f"AuthorKey(id={self.key_id}, name={self.name!r})"


#: Signatures already verified (digest of key, message and signature): serving verifies the same
#: rows on every query, and an Ed25519 check costs ~0.17 ms against ~3 µs for the digest.
_VERIFIED: dict[str, bool] = {}
_VERIFIED_MAX = 20_000


def verify(public: bytes, message: bytes, signature: object) -> bool:
    """Whether ``signature`` (base64) is ``public``'s Ed25519 signature of ``message``."""
    raw = unb64(signature)
    if raw is None or len(public) != 32:
        return False
    memo = sha256_hex(b"%d:%b%b%b" % (len(message), public, raw, message))
    known = _VERIFIED.get(memo)
    if known is not None:
        return known
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(public).verify(raw, message)
        ok = True
    except (InvalidSignature, ValueError):
        ok = False
    if len(_VERIFIED) >= _VERIFIED_MAX:
        _VERIFIED.clear()
    _VERIFIED[memo] = ok
    return ok


def public_of(block: Any, key_id: object) -> bytes | None:
    """The public key in ``block['p']`` if it is the key ``key_id`` names (else ``None``)."""
    pub = unb64(block.get("p")) if isinstance(block, dict) else None
    if pub is None or len(pub) != 32 or key_id_of(pub) != key_id:
        return None
    return pub


def _public_from_seed(seed: bytes) -> bytes:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    priv = Ed25519PrivateKey.from_private_bytes(seed)
    return priv.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def key_file(home: str | os.PathLike[str], which: tuple[str, str] = AUTHOR_FILE) -> Path:
    return Path(home).joinpath(*which)


def read_key(
    home: str | os.PathLike[str], which: tuple[str, str] = AUTHOR_FILE
) -> AuthorKey | None:
    """The key pair if its file exists and is well formed (never creates one, never raises)."""
    try:
        seed = key_file(home, which).read_bytes()
    except OSError:
        return None
    if len(seed) != SEED_BYTES:
        return None
    return AuthorKey(seed, _public_from_seed(seed), installation_name())


def load_or_create(home: str | os.PathLike[str], which: tuple[str, str] = AUTHOR_FILE) -> AuthorKey:
    """The key pair, created (random, 0600 in a 0700 directory) on first use.

    Two processes creating it at once agree (exclusive link; the loser reads the winner's). A
    file that exists but is malformed is never overwritten: :class:`SigningKeyError` names it.
    """
    found = read_key(home, which)
    if found is not None:
        return found
    path = key_file(home, which)
    if os.path.lexists(path):
        from ..errors import SigningKeyError

        raise SigningKeyError(
            f"the author key file {path} is malformed (an Ed25519 seed has {SEED_BYTES} "
            f"bytes); restore it from a backup of {path.parent}"
        )
    ensure_private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, os.urandom(SEED_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # atomic and exclusive: fails if another process won
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    winner = read_key(home, which)
    if winner is None:  # pragma: no cover - the file vanished between link and read
        raise OSError(f"cannot read author key at {path}")
    return winner
