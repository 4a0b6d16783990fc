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
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from pydantic import ValidationError

from ..store import LESSONS, META, Store, sql_in, sql_str
from ..text import fts_text
from ..types import Lesson
from .sign import canonical, sign, verify

log = logging.getLogger("mimir.lessons")

HEAD_PREFIX = "lesson_head:"
LESSON_COLUMNS = ["id", "status", "scope", "kind", "trigger", "rule", "payload", "signature"]
_CHECKED = ("id", "status", "scope", "kind", "trigger", "rule")


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


def update_values(lesson: Lesson) -> dict[str, Any]:
    """The columns to update for a signed lesson whose trigger (and vector) did not change."""
    row = to_row(lesson, [])
    row.pop("vector")
    row.pop("id")
    return row


def from_row(row: dict[str, Any], key: bytes) -> tuple[Lesson, bool]:
    """(lesson, verified) of a row. A row that does not even parse gives a quarantined stub."""
    try:
        data = json.loads(row.get("payload") or "")
        if not isinstance(data, dict):
            raise ValueError("payload is not an object")
        sig = data.pop("signature", "")
        ok = verify(key, data, sig) and sig == row.get("signature")
        ok = ok and all(data.get(c) == row.get(c) for c in _CHECKED)
        lesson = Lesson.model_validate(dict(data, signature=sig if isinstance(sig, str) else ""))
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


def select_rows(
    store: Store, where: str | None, *, limit: int | None = None
) -> list[dict[str, Any]]:
    """Lesson rows (without vectors) matching ``where``."""
    return store.select(LESSONS, where, LESSON_COLUMNS, limit)


def rows_by_id(store: Store, ids: Sequence[str]) -> list[dict[str, Any]]:
    """Lesson rows for these ids (any status)."""
    return select_rows(store, sql_in("id", ids)) if ids else []


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
        for row in store.select(META, sql_in("key", keys), ["key", "value"]):
            try:
                data = json.loads(row["value"])
                out[row["key"][len(HEAD_PREFIX) :]] = (float(data["u"]), str(data["s"]))
            except (ValueError, TypeError, KeyError):
                # An unreadable head proves nothing either way; the row's own check still holds.
                log.warning("unreadable head of lesson %s", row.get("key"))
    return out


def forget_head(store: Store, ident: str) -> None:
    """Drop a forgotten lesson's head."""
    store.delete(META, f"key = {sql_str(HEAD_PREFIX + ident)}")


def is_replay(lesson: Lesson, head: Head | None) -> bool:
    """Whether a (validly signed) lesson is an older version than its recorded head."""
    if head is None:
        return False
    return lesson.signature != head[1] and lesson.updated_at.timestamp() <= head[0]
