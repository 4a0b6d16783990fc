"""Lessons as rows of the store's ``lessons`` table, signed on write and verified on read.

A row holds a few columns for filtering (status, scope, kind, trigger, rule), the trigger's
embedding, and ``payload``: the whole lesson as canonical JSON including its signature. A row
verifies when the payload's HMAC is right *and* the filter columns agree with the payload, so
editing either one (say, flipping ``status`` to ``active``) is caught.

**Replay**: an older, validly signed version of a row written back (say, the ``active`` version
of a lesson after it was retired) verifies on its own. So every signed write also records the
lesson's *head* (its ``updated_at`` and signature) in the store's ``meta`` table, and a row that
is not the head and is not newer than it is a replay (:func:`is_replay`). The head is written
after the row, so a crash in between leaves a row newer than its head, never a false alarm. A
rollback of the whole store, heads included, cannot be told from the inside.

**Placement**: the columns that decide *where* a lesson is served (the trigger ``vector``, the
matching ``text``, ``updated_at``) are not part of the lesson, so they are bound separately: the
payload carries ``row_mac``, an HMAC over the lesson's signature and digests of those columns
(:func:`row_mac`). Rewriting only the vector (retargeting a lesson to unrelated queries) breaks
it. Keeping the binding apart from the lesson's signature means the lesson signature scheme is
unchanged (old lessons keep verifying) and a legitimate re-embedding (``reindex``, an import
that re-embeds) rebinds the row without re-signing, so without the power to launder content.
A row written before bindings existed is bound on first read, after checking that its vector
is its trigger's embedding (:func:`vector_matches`).
"""

from __future__ import annotations

import json
import logging
from _operator import _compare_digest as compare_digest
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..store.core import LESSONS, META, Store
from ..store.filters import Eq, Filter, In
from ..text import fts_text
from ..types import Lesson
from .sign import canonical, sha256_hex, sign, verify

if TYPE_CHECKING:
    from .authors import AuthorKey

log = logging.getLogger("mimir.lessons")

HEAD_PREFIX = "lesson_head:"
#: Every column a verification reads: the filter columns, the payload and the placement columns.
LESSON_COLUMNS = [
    "id",
    "status",
    "scope",
    "kind",
    "trigger",
    "rule",
    "payload",
    "signature",
    "updated_at",
    "text",
    "vector",
]
_CHECKED = ("id", "status", "scope", "kind", "trigger", "rule")
ROW_MAC = "row_mac"
#: The payload key of the author's Ed25519 signatures (:func:`author_block`).
AUTHOR_SIG = "author_sig"
#: Payload keys that are not lesson fields (the signatures and the placement binding).
EXTRAS = ("signature", ROW_MAC, AUTHOR_SIG)
#: A legacy row is bound only if its stored vector is this close (cosine) to its trigger's
#: embedding by the store's embedder (the same model gives ~1.0; a retargeted one far less).
VECTOR_MATCH = 0.98


def signable(lesson: Lesson) -> dict[str, Any]:
    """The lesson's integrity fields: everything but the signature, as JSON data."""
    data = lesson.model_dump(mode="json")
    data.pop("signature", None)
    return data


def signed(lesson: Lesson, key: bytes, *, now: datetime | None = None) -> Lesson:
    """A copy of ``lesson`` stamped ``updated_at = now`` and signed with ``key``."""
    out = lesson.model_copy(deep=True)
    out.updated_at = now or datetime.now(timezone.utc)
    out.signature = sign(key, signable(out))
    return out


def to_row(lesson: Lesson, vector: Sequence[float]) -> dict[str, Any]:
    """The table row of a signed lesson (with its trigger embedding)."""
    payload = dict(signable(lesson), signature=lesson.signature)
    return {
        "id": lesson.id,
        "status": lesson.status,
        "scope": lesson.scope,
        "kind": lesson.kind,
        "trigger": lesson.trigger,
        "rule": lesson.rule,
        "payload": canonical(payload).decode("utf-8"),
        "signature": lesson.signature,
        "updated_at": lesson.updated_at.timestamp(),
        "text": fts_text(f"{lesson.trigger}\n{lesson.rule}"),
        "vector": list(vector),
    }


def vector_digest(vector: Any) -> str:
    """SHA-256 of a vector's little-endian float32 bytes (as the table stores it)."""
    import numpy as np

    return sha256_hex(np.asarray(vector, dtype="<f4").tobytes())


def row_mac(key: bytes, row: Mapping[str, Any]) -> str:
    """The HMAC binding a row's placement columns to its lesson signature."""
    return sign(
        key,
        {
            "s": str(row.get("signature") or ""),
            "v": vector_digest(row["vector"]),
            "t": sha256_hex(str(row.get("text") or "").encode("utf-8")),
            "u": float(row.get("updated_at") or 0.0),
        },
    )


def content_message(data: Mapping[str, Any]) -> bytes:
    """What an author's content signature covers: the lesson's fields (no signatures)."""
    return canonical({"mimir_lesson": 1, "l": {k: v for k, v in data.items() if k not in EXTRAS}})


def placement_message(content_sig: str, row: Mapping[str, Any]) -> bytes:
    """What an author's placement signature covers: the content signature, the row's HMAC
    signature (its version tag, which the replay heads name) and its placement columns."""
    return canonical(
        {
            "c": content_sig,
            "s": str(row.get("signature") or ""),
            "v": vector_digest(row["vector"]),
            "t": sha256_hex(str(row.get("text") or "").encode("utf-8")),
            "u": float(row.get("updated_at") or 0.0),
        }
    )


def author_block(
    author: AuthorKey, data: Mapping[str, Any], row: Mapping[str, Any]
) -> dict[str, str]:
    """The author's signatures of a row: key id, public key, content and placement signature."""
    content = author.sign(content_message(data))
    return {
        "k": author.key_id,
        "p": author.public_b64,
        "c": content,
        "pm": author.sign(placement_message(content, row)),
    }


def bind(row: dict[str, Any], key: bytes, author: AuthorKey | None = None) -> dict[str, Any]:
    """``row`` (with its final vector, text, updated_at and signature) with ``row_mac`` set in
    its payload, and signed by ``author`` (this installation's Ed25519 key) when given. Only for
    a row whose lesson was just signed or verified."""
    data = json.loads(row["payload"])
    data[ROW_MAC] = row_mac(key, row)
    if author is not None:
        data[AUTHOR_SIG] = author_block(author, data, row)
    row["payload"] = canonical(data).decode("utf-8")
    return row


def rebind(
    rows: list[dict[str, Any]],
    vectors: Any,
    key: bytes,
    author: AuthorKey | None = None,
    valid: Sequence[bool] | None = None,
) -> None:
    """Give re-embedded rows their new vectors (``reindex``): a row that verifies (its old
    binding included; ``valid`` says which, on a team store) is bound to its new vector, and
    signed by ``author``; one that does not keeps its payload, so it still fails."""
    for i, (row, vec) in enumerate(zip(rows, vectors, strict=True)):
        ok = valid[i] if valid is not None else from_row(row, key)[1]
        row["vector"] = [float(x) for x in vec]
        if ok:
            bind(row, key, author)


def is_bound(row: Mapping[str, Any]) -> bool:
    """Whether the row carries a placement binding (rows written before bindings do not)."""
    return f'"{ROW_MAC}":' in str(row.get("payload") or "")


def vector_matches(stored: Any, fresh: Any) -> bool:
    """Whether a stored vector is (nearly) the trigger's fresh embedding."""
    import numpy as np

    a = np.asarray(stored, dtype=np.float32)
    b = np.asarray(fresh, dtype=np.float32)
    if a.shape != b.shape or not np.all(np.isfinite(a)):
        return False
    den = float(np.linalg.norm(a) * np.linalg.norm(b))
    return den > 0 and float(a @ b) / den >= VECTOR_MATCH


def update_values(lesson: Lesson) -> dict[str, Any]:
    """The columns to update for a signed lesson whose trigger (and vector) did not change."""
    row = to_row(lesson, [])
    row.pop("vector")
    row.pop("id")
    return row


def from_row(row: dict[str, Any], key: bytes, *, placement: bool = True) -> tuple[Lesson, bool]:
    """(lesson, verified) of a row. A row that does not even parse gives a quarantined stub.

    With ``placement`` (the default: any row read from the table), a bound row's ``updated_at``
    must be the lesson's and its ``row_mac`` must match its vector and text (the row must then
    have been read with them: :data:`LESSON_COLUMNS`). An unbound row verifies on its lesson
    signature alone; :func:`~.lifecycle.verified` binds it (its text and time rewritten).
    ``placement=False`` is for rows that carry no placement columns (an export's).
    """
    try:
        data = json.loads(row.get("payload") or "")
        if not isinstance(data, dict):
            raise ValueError("payload is not an object")
        sig = data.pop("signature", "")
        mac = data.pop(ROW_MAC, None)
        data.pop(AUTHOR_SIG, None)
        ok = verify(key, data, sig) and sig == row.get("signature")
        ok = ok and all(data.get(c) == row.get(c) for c in _CHECKED)
        lesson = Lesson.model_validate(dict(data, signature=sig if isinstance(sig, str) else ""))
        if ok and placement and mac is not None:  # an unbound row is bound on first read
            stamp = row.get("updated_at")
            ok = stamp is not None and abs(float(stamp) - lesson.updated_at.timestamp()) < 1e-6
            ok = ok and isinstance(mac, str) and verify_mac(key, row, mac)
        return lesson, bool(ok)
    except (ValueError, TypeError, ValidationError) as exc:
        log.warning("lesson %s has an unreadable payload: %s", row.get("id"), exc)
        stub = Lesson(
            id=str(row.get("id")),
            rule=str(row.get("rule") or ""),
            trigger=str(row.get("trigger") or ""),
            status="quarantined",
        )
        return stub, False


def verify_mac(key: bytes, row: Mapping[str, Any], mac: str) -> bool:
    """Whether ``mac`` binds this row's placement columns (a row without a usable vector
    fails)."""
    vector = row.get("vector")
    if vector is None or len(vector) == 0:
        return False
    return compare_digest(row_mac(key, row), mac)


def select_rows(
    store: Store, where: Filter | None, *, limit: int | None = None
) -> list[dict[str, Any]]:
    """Lesson rows (without vectors) matching ``where``."""
    return store.select(LESSONS, where, LESSON_COLUMNS, limit)


def rows_by_id(store: Store, ids: Sequence[str]) -> list[dict[str, Any]]:
    """Lesson rows for these ids (any status)."""
    return select_rows(store, In("id", ids)) if ids else []


# -- replay detection: the latest signed version of each lesson --------------------------------

Head = tuple[float, str]
"""(``updated_at`` timestamp, signature) of the latest signed write of a lesson."""


def record_heads(store: Store, lessons: Sequence[Lesson]) -> None:
    """Remember each lesson's just-written version as its head (after the row was written)."""
    rows = [
        {
            "key": HEAD_PREFIX + le.id,
            "value": json.dumps({"u": le.updated_at.timestamp(), "s": le.signature}),
        }
        for le in lessons
    ]
    if rows:
        store.upsert(META, rows, on="key")


def heads(store: Store, ids: Sequence[str]) -> dict[str, Head]:
    """The recorded heads of these lessons (absent for lessons written before heads existed)."""
    out: dict[str, Head] = {}
    wanted = list(dict.fromkeys(ids))
    for start in range(0, len(wanted), 500):
        keys = [HEAD_PREFIX + i for i in wanted[start : start + 500]]
        for row in store.select(META, In("key", keys), ["key", "value"]):
            try:
                data = json.loads(row["value"])
                out[row["key"][len(HEAD_PREFIX) :]] = (float(data["u"]), str(data["s"]))
            except (ValueError, TypeError, KeyError):
                # An unreadable head proves nothing either way; the row's own check still holds.
                log.warning("unreadable head of lesson %s", row.get("key"))
    return out


def forget_head(store: Store, ident: str) -> None:
    """Drop a forgotten lesson's head."""
    store.delete(META, Eq("key", HEAD_PREFIX + ident))


def is_replay(lesson: Lesson, head: Head | None) -> bool:
    """Whether a (validly signed) lesson is an older version than its recorded head."""
    if head is None:
        return False
    return lesson.signature != head[1] and lesson.updated_at.timestamp() <= head[0]
