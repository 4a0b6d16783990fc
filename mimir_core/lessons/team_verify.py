"""Verifying a lesson row on a store with a trust list: by its author's Ed25519 signatures.

On a shared store the HMAC of another machine cannot be checked here (each machine has its own
key), so a row is judged by its ``author_sig`` block (:func:`~.storage.author_block`):

* no block, a key that is not trusted (not listed, revoked, or the list refused), or a lesson
  whose original author (``provenance.author``) was revoked: **untrusted**, with the reason.
  Not served, but not quarantined either: trusting the key (or restoring the list) brings it
  back, and a revocation retires it on every machine without anyone rewriting it;
* a trusted key whose signatures do not verify (content, or placement: vector, text,
  updated_at, the signature column), or filter columns that disagree with the payload:
  **tampered**, quarantined as a failed HMAC is;
* otherwise verified.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..types import Lesson
from .authors import verify
from .storage import _CHECKED, AUTHOR_SIG, ROW_MAC, content_message, placement_message
from .trust import TrustView

if TYPE_CHECKING:
    from ..deps import Deps

log = logging.getLogger("mimir.lessons")


def signer(row: dict[str, Any]) -> str | None:
    """The key id of the row's author signature (``None``: none, or unreadable)."""
    try:
        block = json.loads(row.get("payload") or "").get(AUTHOR_SIG)
    except (ValueError, AttributeError):
        return None
    kid = block.get("k") if isinstance(block, dict) else None
    return kid if isinstance(kid, str) else None


def check_row(row: dict[str, Any], tv: TrustView) -> tuple[Lesson, bool, str | None]:
    """(lesson, verified, why untrusted) of a row; see the module docstring."""
    try:
        data = json.loads(row.get("payload") or "")
        if not isinstance(data, dict):
            raise ValueError("payload is not an object")
        sig = data.pop("signature", "")
        data.pop(ROW_MAC, None)
        block = data.pop(AUTHOR_SIG, None)
        lesson = Lesson.model_validate(dict(data, signature=sig if isinstance(sig, str) else ""))
    except (ValueError, TypeError, ValidationError) as exc:
        log.warning("lesson %s has an unreadable payload: %s", row.get("id"), exc)
        stub = Lesson(
            id=str(row.get("id")),
            rule=str(row.get("rule") or ""),
            trigger=str(row.get("trigger") or ""),
            status="quarantined",
        )
        return stub, False, None
    if not isinstance(block, dict) or not isinstance(block.get("k"), str):
        return lesson, False, "no author signature (written before this store had a trust list)"
    kid = str(block["k"])
    pub = tv.public(kid)
    if pub is None:
        return lesson, False, tv.why_untrusted(kid)
    origin = lesson.provenance.get("author")
    if isinstance(origin, str) and origin != kid and tv.revoked(origin):
        return lesson, False, f"first written by a revoked key: {tv.why_untrusted(origin)}"
    ok = sig == row.get("signature") and all(data.get(c) == row.get(c) for c in _CHECKED)
    stamp = row.get("updated_at")
    ok = ok and stamp is not None and abs(float(stamp) - lesson.updated_at.timestamp()) < 1e-6
    ok = ok and verify(pub, content_message(data), block.get("c"))
    vector = row.get("vector")
    ok = ok and vector is not None and len(vector) > 0
    ok = ok and verify(pub, placement_message(str(block.get("c")), row), block.get("pm"))
    return lesson, bool(ok), None


def by_trusted_author(deps: Deps, row: dict[str, Any]) -> bool:
    """Whether an imported row's content is signed by a key this store's trust list trusts
    (its placement is re-derived here; without a trust list only ``resign`` trusts a file)."""
    from . import trust

    tv = trust.view(deps, fresh=True)
    if tv is None:
        return False
    try:
        data = json.loads(row.get("payload") or "")
        block = data.get(AUTHOR_SIG)
        kid = block.get("k")
        pub = tv.public(kid) if isinstance(kid, str) else None
        origin = data.get("provenance", {}).get("author")
    except (ValueError, AttributeError):
        return False
    if pub is None or (isinstance(origin, str) and tv.revoked(origin)):
        return False
    return verify(pub, content_message(data), block.get("c"))


def author_holds(row: dict[str, Any]) -> bool:
    """Whether a row's author signatures (content and placement) verify under the public key
    they name, whoever that is (an import keeps them, rather than signing the row itself)."""
    from .authors import public_of

    try:
        data = json.loads(row.get("payload") or "")
        block = data.pop(AUTHOR_SIG)
        pub = public_of(block, block.get("k"))
    except (ValueError, AttributeError, KeyError):
        return False
    if pub is None or row.get("vector") is None:
        return False
    return verify(pub, content_message(data), block.get("c")) and verify(
        pub, placement_message(str(block.get("c")), row), block.get("pm")
    )
