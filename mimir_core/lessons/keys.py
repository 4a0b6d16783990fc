"""Which key signs this store's lessons, and what to do when it is missing or wrong.

The store keeps a one-way fingerprint of its signing key (``signing_key_id`` in ``meta``). A key
is never made over signed lessons, and a missing, malformed or different key quarantines
nothing: lessons are *unverified* while it lasts (not served), writes raise
:class:`~mimir_core.errors.SigningKeyError` naming the key file, and restoring the key brings
every lesson back (review finding 12).

On a store with a team trust list (:mod:`.trust`) every machine has its own HMAC key and the
store's fingerprint is not checked: lessons are verified by their authors' Ed25519 signatures.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..errors import SigningKeyError
from ..store.core import LESSONS
from ..store.filters import Eq, Not
from .sign import coerce_key, key_file_problem, key_id, key_path, load_or_create_key, read_key
from .storage import from_row

if TYPE_CHECKING:
    from ..deps import Deps

log = logging.getLogger("mimir.lessons")

#: The ``meta`` key holding the fingerprint of the key that signs this store's lessons.
KEY_ID = "signing_key_id"
_CHECKED_COLS = ["id", "status", "scope", "kind", "trigger", "rule"]


def signing_key(deps: Deps) -> bytes:
    """The HMAC key: the explicit one given to :class:`Mimir`, else the per-install key file.

    Raises :class:`SigningKeyError` (naming the key file and what to do) when the key is
    malformed, missing while the store has signed lessons, or not the key that signed them: a
    new key is never made silently, as every lesson would then fail verification.
    """
    cached: bytes | None = deps.state.signing_key_bytes
    if cached is not None:
        return cached
    problem: str | None = deps.state.signing_key_problem
    if problem is None:
        try:
            cached = _checked_key(deps)
        except SigningKeyError as exc:
            deps.state.signing_key_problem = problem = str(exc)
            log.warning("%s", problem)
            from .lifecycle import log_event

            log_event(deps.home, "signing_key_problem", error=problem)
    if problem is not None:
        raise SigningKeyError(problem)
    assert cached is not None
    deps.state.signing_key_bytes = cached
    return cached


def key_problem(deps: Deps) -> str | None:
    """Why lessons cannot be verified now (``None``: the key is fine)."""
    try:
        signing_key(deps)
    except SigningKeyError as exc:
        return str(exc)
    return None


def _checked_key(deps: Deps) -> bytes:
    """Load the key and check it against the fingerprint the store keeps (recording it the
    first time, if the key verifies the store's lessons or there are none)."""
    spec = deps.signing_key_spec
    path = key_path(deps.home)
    source = "the key given as signing_key / MIMIR_SIGNING_KEY" if spec else f"the key {path}"
    store = deps.store
    from . import trust

    if trust.present(deps):  # a team store: this key is local (version tags, the hooks' digest)
        return coerce_key(spec) if spec else load_or_create_key(deps.home)
    if spec:
        key = coerce_key(spec)
    else:
        problem = key_file_problem(deps.home)
        if problem is not None:
            raise SigningKeyError(f"{problem}; lessons stay unverified (not served) until it is")
        found = read_key(deps.home)
        if found is None:
            signed_rows = store.count(LESSONS)
            if signed_rows:
                raise SigningKeyError(
                    f"the signing key file {path} is missing but this store has "
                    f"{signed_rows} signed lesson(s); restore the file from a backup (or set "
                    f"MIMIR_SIGNING_KEY to the key that signed them). No new key is made: "
                    f"every lesson would fail verification. To start over instead, forget "
                    f"the lessons (`mimir forget ID`)"
                )
        key = found if found is not None else load_or_create_key(deps.home)
    want = store.meta().get(KEY_ID)
    if want and want != key_id(key) and store.count(LESSONS):
        raise SigningKeyError(
            f"{source} is not the key that signed this store's lessons (key id "
            f"{key_id(key)[:12]}, the store's is {want[:12]}); restore the original key file "
            f"{path} (or MIMIR_SIGNING_KEY). Until then its lessons are unverified: not served, "
            f"not quarantined"
        )
    if want != key_id(key):  # first use, or the store's lessons are all gone: this key it is
        live = Not(Eq("status", "quarantined"))  # a quarantined row proves nothing either way
        rows = store.select(LESSONS, live, ["payload", "signature", *_CHECKED_COLS], limit=50)
        if rows and not any(from_row(r, key, placement=False)[1] for r in rows):
            raise SigningKeyError(
                f"{source} verifies none of this store's lessons; if it was replaced, "
                f"restore the original key file {path} (or MIMIR_SIGNING_KEY)"
            )
        store.set_meta({KEY_ID: key_id(key)})
    return key
