"""The write chokepoint: validation, secret redaction and size caps for every experience.

Every record, from the API, a hook's spool line or an adapter, passes through
:func:`build_experience` before it is stored or embedded. Bad input raises an
:class:`~mimir_core.errors.InvalidInputError` naming the field; long text is truncated with a
marker, never rejected; secrets and ``<private>`` spans never get past this point.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import re
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from ..errors import InvalidInputError, short
from ..redact.core import sanitize, sanitize_obj
from ..types import DEFAULT_SCORES, OUTCOMES, Experience

#: The scope argument that means every project (reads only).
ALL_SCOPES = "*"
#: The most hits, lessons or attempts one read returns.
MAX_K = 100
MAX_TASK = 2000
MAX_ACTION = 2000
MAX_REASON = 4000
MAX_CONTEXT_STRING = 2000
MAX_CONTEXT_JSON = 16000
MAX_ID = 200
MAX_LABEL = 500
MAX_LESSON_IDS = 100
#: Longest lesson-status reason or feedback note kept in a lesson's audit trail.
MAX_NOTE = 1000


def _text(field: str, value: object, *, required: bool, limit: int, patterns: Sequence[str]) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise InvalidInputError(field, f"must be a string, got {type(value).__name__}", value)
    if required and not value.strip():
        raise InvalidInputError(field, "must not be empty", value)
    return sanitize(value.strip(), limit=limit, extra_patterns=patterns)


def _label(field: str, value: object, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise InvalidInputError(field, f"must be a string, got {type(value).__name__}", value)
    if len(value) > MAX_LABEL:
        raise InvalidInputError(field, f"is longer than {MAX_LABEL} characters", short(value))
    return value.strip()


def scope_key(value: str, patterns: Sequence[str] = ()) -> str:
    """A project key as it is stored: stripped, with any secret in it redacted.

    Every record's scope goes through here, and so does every scope a read filters on (and the
    Mimir's own default scope), so a key holding a secret is never stored yet still finds the
    records written with it.
    """
    return sanitize(value.strip(), extra_patterns=patterns)


def _optional_id(field: str, value: object) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidInputError(field, f"must be a string, got {type(value).__name__}", value)
    if len(value) > MAX_ID:
        raise InvalidInputError(field, f"is longer than {MAX_ID} characters", short(value))
    return value


#: The id rule of stored experiences and lessons: letters, digits and ``_ - . : @ +``, starting
#: with a letter or digit. So an id is one URL path segment as it is (no ``/``, ``?``, ``#``,
#: ``%``, no ``.`` or ``..``), one file name, and has no markup or spaces. Ids Mimir makes (hex,
#: ``les_<hex>``) always pass.
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+\-]*")


def check_id(field: str, value: object) -> str:
    """An experience or lesson id that follows :data:`ID_PATTERN` (at most :data:`MAX_ID`
    characters), or an :class:`InvalidInputError` naming it."""
    if not isinstance(value, str) or not value:
        raise InvalidInputError(field, f"must be a non-empty string id; got {short(value)}", value)
    if len(value) > MAX_ID:
        raise InvalidInputError(field, f"is longer than {MAX_ID} characters", short(value))
    if not ID_PATTERN.fullmatch(value):
        raise InvalidInputError(
            field,
            f"{short(value)} is not a valid id: use letters, digits and _ - . : @ +, starting "
            f"with a letter or digit",
            value,
        )
    return value


def normalize_outcome(value: object) -> str:
    """``success``/``failure``/``partial`` (case-insensitive), or an error naming the value."""
    if not isinstance(value, str) or value.strip().lower() not in OUTCOMES:
        raise InvalidInputError(
            "outcome", f"must be one of {', '.join(OUTCOMES)}; got {short(value)}", value
        )
    return value.strip().lower()


def normalize_score(value: object, outcome: str) -> float:
    """A score in [0, 1]; the outcome's default when ``None``."""
    if value is None:
        return DEFAULT_SCORES[outcome]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInputError("score", f"must be a number in [0, 1]; got {short(value)}", value)
    score = float(value)
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        raise InvalidInputError("score", f"must be in [0, 1]; got {score}", value)
    if not consistent_score(score, outcome):
        # a failure scored 1.0 would count as a success: recommend would prefer what only failed
        raise InvalidInputError(
            "score",
            f"{score:g} contradicts outcome {outcome!r} (a failure scores at most 0.5, a "
            "success at least 0.5; record a mixed result as 'partial')",
            value,
        )
    return score


def consistent_score(score: float, outcome: str) -> bool:
    """Whether ``score`` agrees with ``outcome``: at most 0.5 for a failure, at least 0.5 for a
    success, anything for a partial result."""
    if outcome == "failure":
        return score <= 0.5
    return outcome != "success" or score >= 0.5


def normalize_time(field: str, value: object) -> datetime:
    """An aware UTC datetime from a datetime, epoch seconds or ISO-8601 string."""
    if value is None:
        return datetime.now(timezone.utc)
    try:
        if isinstance(value, datetime):
            dt = value
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            dt = datetime.fromtimestamp(float(value), tz=timezone.utc)
        elif isinstance(value, str):
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        else:
            raise TypeError(type(value).__name__)
    except (TypeError, ValueError, OverflowError, OSError) as exc:
        raise InvalidInputError(field, f"is not a time ({exc}); got {short(value)}", value) from exc
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


def _context(value: object, patterns: Sequence[str]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInputError(
            "context", f"must be a JSON object (dict); got {type(value).__name__}", short(value)
        )
    try:
        plain = json.loads(json.dumps(value, default=str))  # non-JSON values become strings
    except (ValueError, RecursionError) as exc:  # a cycle, or nested past what JSON can carry
        raise InvalidInputError(
            "context", f"must be JSON data without cycles or extreme nesting ({exc})"
        ) from None
    clean = sanitize_obj(
        plain,
        limit_per_string=MAX_CONTEXT_STRING,
        extra_patterns=patterns,
    )
    assert isinstance(clean, dict)
    encoded = json.dumps(clean, ensure_ascii=False)
    if len(encoded) > MAX_CONTEXT_JSON:
        preview = sanitize(encoded, limit=MAX_CONTEXT_JSON // 2)
        return {"_truncated": True, "_preview": preview}
    return clean


def id_for_key(key: str) -> str:
    """The experience id an idempotency key maps to (same key, same id, forever)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def build_experience(
    *,
    task: object,
    action: object,
    outcome: object,
    score: object = None,
    reason: object = None,
    context: object = None,
    scope: object = None,
    source: object = None,
    session_id: object = None,
    thread_id: object = None,
    recalled_lesson_ids: object = None,
    created_at: object = None,
    idempotency_key: object = None,
    extra_patterns: Sequence[str] = (),
) -> Experience:
    """Validate, redact and cap one experience. Raises :class:`InvalidInputError`."""
    out = normalize_outcome(outcome)
    key = _optional_id("idempotency_key", idempotency_key)
    ids = recalled_lesson_ids or []
    if not isinstance(ids, (list, tuple)) or not all(isinstance(i, str) for i in ids):
        raise InvalidInputError("recalled_lesson_ids", "must be a list of strings", short(ids))
    if len(ids) > MAX_LESSON_IDS:
        raise InvalidInputError("recalled_lesson_ids", f"has more than {MAX_LESSON_IDS} ids")
    for ident in ids:
        check_id("recalled_lesson_ids", ident)
    return Experience(
        id=id_for_key(key) if key else uuid.uuid4().hex,
        task=_text("task", task, required=True, limit=MAX_TASK, patterns=extra_patterns),
        action=_text("action", action, required=True, limit=MAX_ACTION, patterns=extra_patterns),
        outcome=out,  # type: ignore[arg-type]
        score=normalize_score(score, out),
        reason=_text("reason", reason, required=False, limit=MAX_REASON, patterns=extra_patterns),
        context=_context(context, extra_patterns),
        scope=scope_key(_label("scope", scope), extra_patterns),
        source=_label("source", source, "api") or "api",
        session_id=_optional_id("session_id", session_id),
        thread_id=_optional_id("thread_id", thread_id),
        recalled_lesson_ids=list(dict.fromkeys(ids)),
        created_at=normalize_time("created_at", created_at),
        idempotency_key=key,
    )


#: The arguments of :func:`build_experience` that an experience's fields supply (read from its
#: signature, so the two cannot drift apart).
RECORD_FIELDS = frozenset(inspect.signature(build_experience).parameters) - {"extra_patterns"}
