"""Import a ``mimir-learn`` (0.1.x) SQLite store: ``mimir import --from-mimir-learn PATH.db``.

mimir-learn keeps one ``experiences`` table (``PRAGMA user_version`` 3 in 0.1.5): ``id`` (uuid
hex), ``task``, ``action``, ``outcome`` (``success``/``failure``/``partial``), ``score`` (0..1),
``context`` (a JSON object; ``record_failure`` puts its reason under ``failure_reason``),
``embedding`` (JSON, its own embedder's), ``created_at`` (ISO-8601, UTC) and ``superseded_by``.
Its FTS and sqlite-vec tables are derived and ignored.

Each row becomes an :class:`~mimir_core.types.Experience` with ``source="mimir-learn"``, its
timestamp, its ``failure_reason`` as the reason, the rest of its context plus
``mimir_learn_id``, and the idempotency key ``mimir-learn:<id>``: importing again adds nothing.
Rows are written through :meth:`Mimir.record_many` (validation, secret redaction, caps) and
embedded by this store's embedder (mimir-learn's vectors come from another model). Every row is
validated before anything is written. The database is opened read-only.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from pydantic import BaseModel

from ..errors import BackupError, InvalidInputError
from ..ingest.record import record_batch, supersede
from ..ingest.validate import build_experience, consistent_score, id_for_key
from ..store.core import EXPERIENCES
from ..store.filters import In

if TYPE_CHECKING:
    from ..deps import Deps

SOURCE = "mimir-learn"
KEY_PREFIX = "mimir-learn:"
REQUIRED = ("id", "task", "action", "outcome", "score", "context", "created_at")
BATCH = 256


class MimirLearnReport(BaseModel):
    """What :func:`import_mimir_learn` did."""

    path: str
    schema_version: int
    read: int = 0
    added: int = 0
    present: int = 0
    """Rows already imported before (same mimir-learn id)."""
    redacted: int = 0
    """Rows in which a secret or a ``<private>`` span was removed on the way in."""
    superseded: int = 0


def _connect(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise BackupError(f"mimir-learn database {path} does not exist or is not a file")
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
        conn.row_factory = sqlite3.Row
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"{path} is not a readable SQLite database: {exc}") from exc
    if "experiences" not in tables:
        conn.close()
        raise BackupError(f"{path} is not a mimir-learn store: it has no 'experiences' table")
    columns = {r["name"] for r in conn.execute("PRAGMA table_info(experiences)")}
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        conn.close()
        raise BackupError(
            f"{path} is not a mimir-learn store: its experiences table lacks {', '.join(missing)}"
        )
    return conn


def _item(row: sqlite3.Row, scope: str, has_superseded: bool) -> dict[str, Any]:
    """The :meth:`Mimir.record` arguments of one mimir-learn row."""
    ident = row["id"]
    if not isinstance(ident, str) or not ident.strip():
        raise InvalidInputError("id", f"must be a non-empty string; got {ident!r}")
    try:
        context = json.loads(row["context"] or "{}")
    except (TypeError, ValueError) as exc:
        raise InvalidInputError("context", f"is not JSON ({exc})") from exc
    if not isinstance(context, dict):
        raise InvalidInputError("context", f"must be a JSON object; got {type(context).__name__}")
    reason = context.pop("failure_reason", None)
    if reason is not None and not isinstance(reason, str):
        context["failure_reason"], reason = reason, None
    context["mimir_learn_id"] = ident
    superseded = row["superseded_by"] if has_superseded else None
    score = row["score"]
    outcome = str(row["outcome"]).strip().lower()
    if isinstance(score, (int, float)) and not consistent_score(float(score), outcome):
        # mimir-learn let a failure score 0.8; the outcome is what happened, the score is kept
        context["mimir_learn_score"], score = score, None
    return {
        "task": row["task"],
        "action": row["action"],
        "outcome": row["outcome"],
        "score": score,
        "reason": reason,
        "context": context,
        "scope": scope,
        "source": SOURCE,
        "created_at": row["created_at"],
        "idempotency_key": KEY_PREFIX + ident,
        "_superseded_by": superseded if isinstance(superseded, str) and superseded else None,
    }


def _changed(item: dict[str, Any], built: Any) -> bool:
    """Whether the chokepoint removed something (a secret, a private span) from the row."""
    for field in ("task", "action", "reason"):
        raw = item.get(field) or ""
        if isinstance(raw, str) and raw.strip() != getattr(built, field):
            return True
    return bool(
        json.dumps(item["context"], sort_keys=True, default=str)
        != json.dumps(built.context, sort_keys=True, default=str)
    )


def import_mimir_learn(
    deps: Deps, path: str | os.PathLike[str], *, scope: str = "", batch: int = BATCH
) -> MimirLearnReport:
    """Import every experience of a mimir-learn SQLite store into ``deps``' store.

    ``scope``: the project the imported experiences belong to (default ``""``: every project).
    Raises :class:`~mimir_core.errors.BackupError` naming the file, or the row whose data is
    invalid (then nothing is written).
    """
    file = Path(path).expanduser()
    conn = _connect(file)
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        columns = {r["name"] for r in conn.execute("PRAGMA table_info(experiences)")}
        rows = conn.execute("SELECT * FROM experiences ORDER BY created_at, id").fetchall()
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"cannot read {file}: {exc}") from exc
    finally:
        conn.close()
    report = MimirLearnReport(path=str(file), schema_version=version, read=len(rows))
    items: list[dict[str, Any]] = []
    for row in rows:  # validate every row before writing any
        try:
            item = _item(row, scope, "superseded_by" in columns)
            fields = {k: v for k, v in item.items() if not k.startswith("_")}
            built = build_experience(**fields, extra_patterns=deps.redact_patterns)
        except InvalidInputError as exc:
            raise BackupError(f"{file}: row id={row['id']!r}: {exc}") from exc
        report.redacted += _changed(item, built)
        items.append(item)
    store = deps.store
    for start in range(0, len(items), batch):
        chunk = items[start : start + batch]
        ids = {id_for_key(i["idempotency_key"]): i for i in chunk}
        have = {r["id"] for r in store.select(EXPERIENCES, In("id", ids), ["id"])}
        fresh = [i for key, i in ids.items() if key not in have]
        inserted: list[str] = []  # a concurrent import may store some first: not ours to count
        if fresh:
            _stored, inserted = record_batch(
                deps, [{k: v for k, v in i.items() if not k.startswith("_")} for i in fresh]
            )
        report.added += len(inserted)
        report.present += len(chunk) - len(inserted)
    # Supersessions: both ends imported, the old one not yet marked (idempotent).
    links = {
        id_for_key(KEY_PREFIX + str(i["context"]["mimir_learn_id"])): id_for_key(
            KEY_PREFIX + i["_superseded_by"]
        )
        for i in items
        if i["_superseded_by"]
    }
    if links:
        known = set(links) | set(links.values())
        rows_now = store.select(EXPERIENCES, In("id", sorted(known)), ["id", "superseded_by"])
        state = {r["id"]: r["superseded_by"] for r in rows_now}
        for old, new in sorted(links.items()):
            if old in state and new in state and state[old] is None:
                supersede(deps, old, new)
                report.superseded += 1
    return report
