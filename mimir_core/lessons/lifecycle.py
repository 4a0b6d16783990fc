"""A lesson's lifecycle: every status change signed, persisted, audited; the digest kept current.

Statuses: ``candidate`` (not served: waiting for evidence) → ``active`` (served) → ``quarantined``
(stopped: hurt, tampered, or by hand; kept), ``superseded`` (a newer lesson on the same topic
contradicts it; kept, invalid from then on), ``retired`` (by hand; kept). An active lesson whose
action stopped behaving as it says goes back to ``candidate`` (faded, :mod:`.fade`). Only
:func:`forget_lesson` removes a lesson, and then for real (older table versions purged).

A lesson whose signature fails verification, or that is a replayed older version of itself
(see :mod:`.storage`), is never served. It is quarantined without being re-signed (re-signing
would launder the edit), and the event goes to the audit log and to ``<home>/logs/lessons.log``.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError, MimirError, NotFoundError
from ..ingest.spool import ensure_private_dir
from ..ingest.validate import MAX_NOTE
from ..ingest.validate import check_id as check_new_id
from ..redact.core import sanitize
from ..store.core import AUDIT, EXPERIENCES, LESSONS
from ..store.filters import And, Eq, Filter, In, Like, Not
from ..text import dumps
from ..tools.digest import write_digest
from ..types import Lesson
from .keys import key_problem
from .keys import signing_key as signing_key  # re-exported: many callers import it from here
from .sign import canonical
from .storage import (
    ROW_MAC,
    Head,
    bind,
    forget_head,
    from_row,
    heads,
    is_bound,
    is_replay,
    record_heads,
    rows_by_id,
    select_rows,
    signed,
    to_row,
    update_values,
    vector_matches,
)

if TYPE_CHECKING:
    from ..memory import Mimir
    from .authors import AuthorKey

log = logging.getLogger("mimir.lessons")

STATUSES = ("candidate", "active", "quarantined", "superseded", "retired")


class LessonStateError(MimirError):
    """The lesson cannot make this change (e.g. pinning a lesson whose signature failed)."""


#: Test hook: ``MIMIR_CRASH_AT=<point>`` SIGKILLs the process at that point of a lesson write
#: (the kill -9 tests prove that the audit trail is completed afterwards).
CRASH_ENV = "MIMIR_CRASH_AT"


def crash_point(name: str) -> None:
    """Die here, as a SIGKILL would, if the crash hook names this point."""
    if os.environ.get(CRASH_ENV) == name:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def log_event(home: Path, event: str, **detail: Any) -> None:
    """Append one JSON line to ``<home>/logs/lessons.log`` (0600); never raises."""
    try:
        logs = Path(home) / "logs"
        ensure_private_dir(logs)  # the home too, if this is its first file: 0700 whatever the umask
        line = canonical({"ts": time.time(), "event": event, **detail}) + b"\n"
        fd = os.open(logs / "lessons.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError as exc:  # logging must never break the caller
        log.warning("cannot write lessons log: %s", exc)


def check_id(ident: object) -> str:
    """A lesson id argument, or an :class:`InvalidInputError` naming it."""
    if not isinstance(ident, str) or not ident.strip():
        raise InvalidInputError("id", f"must be a non-empty string; got {ident!r}", ident)
    return ident.strip()


def check_reason(reason: object, patterns: Sequence[str] = ()) -> str:
    """A non-empty reason for a status change, redacted and capped (it is stored in the audit
    trail and shown by the lesson's detail)."""
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInputError("reason", f"must say why, as a non-empty string; got {reason!r}")
    return sanitize(reason.strip(), limit=MAX_NOTE, extra_patterns=patterns)


# -- authorship ----------------------------------------------------------------------------------


def author_key(m: Mimir) -> AuthorKey:
    """This installation's Ed25519 key (:mod:`.authors`), created on first use."""
    cached: AuthorKey | None = getattr(m, "_author_key", None)
    if cached is None:
        from .authors import load_or_create

        cached = m._author_key = load_or_create(m.home)
    return cached


def stamp_author(m: Mimir, lessons: Iterable[Lesson]) -> None:
    """Record this installation as the author of lessons that name none (new ones; an older
    lesson on its first re-signing). The signer of each version is in its ``author_sig``."""
    me = author_key(m)
    for lesson in lessons:
        if "author" not in lesson.provenance:
            lesson.provenance["author"] = me.key_id
            lesson.provenance["author_name"] = me.name
    if not getattr(m, "_author_published", False):
        from . import trust

        m._author_published = True
        if trust.present(m):  # on a team store, an admin can then add this key by id
            trust.publish(m)


def untrusted(m: Mimir) -> dict[str, str]:
    """Lesson id → why it is not served (untrusted signer), as seen by the latest reads."""
    got: dict[str, str] | None = getattr(m, "_untrusted", None)
    if got is None:
        got = m._untrusted = {}
    return got


def row_valid(m: Mimir, row: dict[str, Any]) -> tuple[Lesson, bool]:
    """(lesson, verified) of a row with no side effect: by the HMAC key on a single-machine
    store, by its author's signature and the trust list on a team store."""
    from . import trust

    tv = trust.view(m)
    if tv is None:
        return from_row(row, signing_key(m))
    from .team_verify import check_row

    lesson, ok, why = check_row(row, tv)
    return lesson, ok and why is None


# -- reading -------------------------------------------------------------------------------------


def load(m: Mimir, ident: str) -> tuple[Lesson, bool]:
    """(lesson, signature valid) by id; a failing lesson is quarantined on the way."""
    rows = rows_by_id(m.store, [check_id(ident)])
    if not rows:
        raise NotFoundError("lesson", ident)
    return verified(m, rows[0])


def load_valid(m: Mimir, ident: str, doing: str) -> Lesson:
    """The lesson by id, or :class:`LessonStateError` if its signature failed (quarantined)."""
    lesson, ok = load(m, ident)
    if not ok:
        signing_key(m)  # a key problem says so, naming the key file
        raise LessonStateError(
            f"lesson {ident!r} failed its signature check and is quarantined; it cannot be {doing}"
        )
    return lesson


def verified(
    m: Mimir,
    row: dict[str, Any],
    *,
    refresh: bool = True,
    known_heads: Mapping[str, Head] | None = None,
    fresh: Mapping[str, Any] | None = None,
) -> tuple[Lesson, bool]:
    """Parse and verify a row; quarantine it (once) if its signature fails or it is a replay.

    ``known_heads``: the heads of a batch of rows read at once (else this row's is read).
    ``fresh``: trigger embeddings of the batch's unbound rows (else embedded here).
    With a key problem (:func:`key_problem`) nothing verifies and nothing is quarantined: the
    lesson is unverified, and restoring the key brings it back.
    """
    if key_problem(m) is not None:
        return from_row(row, b"\0" * 32, placement=False)[0], False
    from . import trust

    tv = trust.view(m)
    if tv is not None:  # a team store: the author's signature against the trust list
        from .team_verify import check_row

        lesson, ok, why = check_row(row, tv)
        if why is not None:  # not served, not quarantined: trusting the key brings it back
            untrusted(m)[lesson.id] = why
            return lesson, False
        untrusted(m).pop(lesson.id, None)
    else:
        lesson, ok = from_row(row, signing_key(m))
    if tv is None and ok and not is_bound(row) and not bind_legacy(m, row, lesson, fresh):
        if row.get("status") == "quarantined":
            return lesson, False
        why = "its vector is not its trigger's embedding (retargeted)"
        return quarantine_tampered(m, row, lesson, refresh=refresh, reason=why), False
    if ok:
        ident = str(row.get("id"))
        hd = known_heads if known_heads is not None else heads(m.store, [ident])
        if is_replay(lesson, hd.get(ident)):
            if row.get("status") == "quarantined":
                return lesson, False  # not served either way; reported when first seen
            return quarantine_tampered(m, row, lesson, refresh=refresh, replayed=True), False
    if not ok and row.get("status") != "quarantined":
        lesson = quarantine_tampered(m, row, lesson, refresh=refresh)
    elif not ok:
        lesson.status = "quarantined"
    return lesson, ok


def load_many(
    m: Mimir, where: Filter | None, *, limit: int | None = None, refresh: bool = True
) -> list[tuple[Lesson, bool]]:
    """Every (lesson, valid) matching a SQL filter over the lessons table."""
    from . import trust

    team = trust.view(m, fresh=True) is not None
    rows = select_rows(m.store, where, limit=limit)
    hd = heads(m.store, [str(r.get("id")) for r in rows]) if rows else {}
    unbound = [r for r in rows if not is_bound(r)] if key_problem(m) is None and not team else []
    fresh: dict[str, Any] = {}
    if unbound:  # rows written before placement bindings: one embedding batch to bind them
        vecs = m.embedder.embed([str(r.get("trigger") or "") for r in unbound])
        fresh = {str(r.get("id")): v for r, v in zip(unbound, vecs, strict=True)}
    return [verified(m, r, refresh=refresh, known_heads=hd, fresh=fresh) for r in rows]


def bind_legacy(
    m: Mimir, row: dict[str, Any], lesson: Lesson, fresh: Mapping[str, Any] | None = None
) -> bool:
    """Bind a (verified) row written before placement bindings, if its vector is its trigger's
    embedding; ``False`` (not bound) if it is not. Audited and logged once per lesson."""
    ident = str(row.get("id"))
    vec = (fresh or {}).get(ident)
    if vec is None:
        vec = m.embedder.embed([lesson.trigger])[0]
    if row.get("vector") is None or not vector_matches(row["vector"], vec):
        return False
    from ..text import fts_text

    derived = {
        "text": fts_text(f"{lesson.trigger}\n{lesson.rule}"),
        "updated_at": lesson.updated_at.timestamp(),
    }
    new = bind(dict(row, **derived), signing_key(m), author_key(m))
    values = dict(derived, payload=new["payload"])
    where = And(Eq("id", ident), Eq("signature", str(row.get("signature"))))
    m.store.update(LESSONS, where, values)
    row.update(values)
    detail = {"reason": "placement columns (vector, text, updated_at) bound to its signature"}
    m.audit("mimir", ident, "row_bound", dict(detail, status=row.get("status")))
    log_event(m.home, "row_bound", lesson=ident)
    return True


def ensure_bound(m: Mimir) -> int:
    """Bind (or quarantine, if retargeted) every row written before placement bindings;
    returns how many rows were looked at. Cheap when there are none (one count)."""
    where = Not(Like("payload", f'%"{ROW_MAC}":%'))
    if not m.store.count(LESSONS, where):
        return 0
    return len(load_many(m, where))


def quarantine_tampered(
    m: Mimir,
    row: dict[str, Any],
    lesson: Lesson,
    *,
    refresh: bool = True,
    replayed: bool = False,
    reason: str | None = None,
) -> Lesson:
    """Stop serving a lesson whose signature failed (or a replay); keep the evidence of the edit."""
    ident = str(row.get("id"))
    values: dict[str, Any] = {"status": "quarantined"}
    try:
        data = json.loads(row.get("payload") or "")
        if isinstance(data, dict):
            data["status"] = "quarantined"  # not re-signed on purpose
            values["payload"] = canonical(data).decode("utf-8")
    except ValueError:
        pass
    m.store.update(LESSONS, Eq("id", ident), values)
    event = "replay_detected" if replayed else "signature_failed"
    why = reason or (
        "an older signed version of the lesson was written back (replay)"
        if replayed
        else "signature verification failed"
    )
    m.audit("mimir", ident, event, {"reason": why, "was": row.get("status")})
    log_event(m.home, event, lesson=ident, was=row.get("status"))
    log.warning("lesson %s: %s: quarantined", ident, why)
    lesson.status = "quarantined"
    if refresh and row.get("status") == "active":
        refresh_digest(m)
    return lesson


# -- writing -------------------------------------------------------------------------------------


def insert(
    m: Mimir,
    lessons: Iterable[Lesson],
    *,
    actor: str,
    event: str,
    detail: Mapping[str, Any] | None = None,
) -> list[Lesson]:
    """Sign and write new (or fully replaced) lessons with their trigger embeddings."""
    items = list(lessons)
    if not items:
        return []
    for lesson in items:
        check_new_id("id", lesson.id)
    key = signing_key(m)
    now = m._now()
    stamp_author(m, items)
    out = [signed(lesson, key, now=now) for lesson in items]
    vectors = m.embedder.embed([lesson.trigger for lesson in out])
    me = author_key(m)
    with m.store.writing():
        rows = [bind(to_row(le, v), key, me) for le, v in zip(out, vectors, strict=True)]
        m.store.upsert(LESSONS, rows)
        crash_point("lesson_rows_written")
        record_heads(m.store, out)
    crash_point("lesson_heads_written")
    for lesson in out:
        m.audit(actor, lesson.id, event, dict(detail or {}, status=lesson.status))
    if any(lesson.status == "active" for lesson in out):
        refresh_digest(m)
    return out


@dataclass
class Write:
    """One lesson write of a batch: the lesson, its trigger vector if known, and the audit."""

    lesson: Lesson
    event: str
    detail: dict[str, Any] = field(default_factory=dict)
    vector: Sequence[float] | None = None
    was_active: bool = False
    expect: str | None = None
    """The stored signature this write was based on (``None``: a new lesson). If the row
    changed meanwhile (another process pinned or quarantined it), the write is skipped."""


def write_batch(m: Mimir, writes: Sequence[Write], *, actor: str) -> list[Lesson]:
    """Sign and upsert many lessons at once: one embedding batch, one write, one audit append."""
    if not writes:
        return []
    for w in writes:
        if w.expect is None:  # a new lesson (an older store's ids stay writable)
            check_new_id("id", w.lesson.id)
    key = signing_key(m)
    now = m._now()
    stamp_author(m, [w.lesson for w in writes])
    me = author_key(m)
    out = [signed(w.lesson, key, now=now) for w in writes]
    missing = [i for i, w in enumerate(writes) if w.vector is None]
    vectors: list[Sequence[float]] = [w.vector if w.vector is not None else [] for w in writes]
    if missing:
        embedded = m.embedder.embed([out[i].trigger for i in missing])
        for i, vec in zip(missing, embedded, strict=True):
            vectors[i] = list(vec)
    with m.store.writing():  # optimistic concurrency: skip rows changed since they were read
        stored = rows_by_id(m.store, [le.id for le in out])
        current = {r["id"]: r["signature"] for r in stored}
        hd = heads(m.store, list(current))
        for r in stored:  # never re-sign (launder) a replayed old version: leave it be
            if is_replay(from_row(r, key, placement=False)[0], hd.get(r["id"])):
                current[r["id"]] = "replayed"
        keep = [i for i, w in enumerate(writes) if current.get(w.lesson.id) == w.expect]
        for i in sorted(set(range(len(writes))) - set(keep)):
            log.warning("lesson %s changed during consolidation: left as it is", out[i].id)
        writes = [writes[i] for i in keep]
        out = [out[i] for i in keep]
        rows = [bind(to_row(out[j], vectors[i]), key, me) for j, i in enumerate(keep)]
        if rows:
            m.store.upsert(LESSONS, rows)
            crash_point("lesson_rows_written")
            record_heads(m.store, out)
    crash_point("lesson_heads_written")
    if not out:
        return []
    ts = now.timestamp()
    m.store.append(
        AUDIT,
        [
            {
                "id": uuid.uuid4().hex,
                "ts": ts,
                "actor": actor,
                "subject_id": le.id,
                "event": w.event,
                "detail": dumps(dict(w.detail, status=le.status)),
            }
            for le, w in zip(out, writes, strict=True)
        ],
    )
    if any(le.status == "active" or w.was_active for le, w in zip(out, writes, strict=True)):
        refresh_digest(m)
    return out


def save(
    m: Mimir,
    lesson: Lesson,
    *,
    actor: str,
    event: str,
    detail: Mapping[str, Any] | None = None,
    was_active: bool | None = None,
) -> Lesson:
    """Re-sign and persist a changed lesson (same trigger), audit it, refresh the digest.

    ``lesson.signature`` must still be the stored one: if another process changed the lesson
    since it was read, nothing is written and :class:`LessonStateError` says so.
    """
    key = signing_key(m)
    stamp_author(m, [lesson])
    out = signed(lesson, key, now=m._now())
    me = author_key(m)
    with m.store.writing():
        rows = rows_by_id(m.store, [out.id])
        if not rows or rows[0].get("signature") != lesson.signature:
            raise LessonStateError(
                f"lesson {out.id!r} was changed by another process meanwhile; read it again"
            )
        values = update_values(out)
        values["payload"] = bind(dict(values, vector=rows[0]["vector"]), key, me)["payload"]
        m.store.update(LESSONS, Eq("id", out.id), values)
        record_heads(m.store, [out])
    m.audit(actor, out.id, event, dict(detail or {}, status=out.status))
    if out.status == "active" or was_active:
        refresh_digest(m)
    return out


def change_status(
    m: Mimir,
    ident: str,
    status: str,
    *,
    actor: str,
    reason: str,
    event: str,
    superseded_by: str | None = None,
) -> Lesson:
    """Move a (valid) lesson to ``status``, audited with ``reason``."""
    lesson, ok = load(m, ident)
    if not ok:
        signing_key(m)  # a key problem says so, naming the key file
        if status == "quarantined":
            return lesson  # already quarantined when its signature failed
        raise LessonStateError(
            f"lesson {ident!r} failed its signature check and is quarantined; it cannot be "
            f"made {status!r} (forget it, or re-learn it with `mimir consolidate`)"
        )
    was = lesson.status
    lesson.status = status  # type: ignore[assignment]
    now = m._now()
    if status in ("superseded", "retired"):
        lesson.invalid_at = now
    if superseded_by is not None:
        lesson.superseded_by = superseded_by
    detail: dict[str, Any] = {"reason": reason, "was": was}
    if superseded_by:
        detail["by"] = superseded_by
    return save(m, lesson, actor=actor, event=event, detail=detail, was_active=was == "active")


def refresh_digest(m: Mimir) -> None:
    """Rewrite the hooks' digest from the active lessons that verify (never raises)."""
    try:
        from .revalidate import CONTRADICTED, here, verdicts

        good: list[dict[str, Any]] = []
        known = verdicts(m)
        for lesson, ok in load_many(m, Eq("status", "active"), refresh=False):
            if ok and lesson.status == "active":
                verdict, tag = here(m, lesson, known)
                if verdict != CONTRADICTED:  # quarantined here by local evidence
                    good.append(dict(lesson.model_dump(mode="json"), **{"from": tag}))
        good.sort(key=lambda d: (-float(d.get("confidence", 0.0)), d["id"]))
        write_digest(m.home, good, signing_key(m), _evidence_texts(m, good))
    except Exception as exc:  # the digest is derived data: the next change rewrites it
        log.warning("cannot rewrite the lessons digest: %s", exc)
        log_event(m.home, "digest_failed", error=str(exc))


def _evidence_texts(
    m: Mimir, lessons: Sequence[Mapping[str, Any]]
) -> dict[str, list[tuple[str, str]]]:
    """(task, reason) of each lesson's evidence, for the digest's topic keywords."""
    wanted = {
        str(d["id"]): [*d.get("supporting_ids", []), *d.get("contradicting_ids", [])]
        for d in lessons
    }
    ids = sorted({i for v in wanted.values() for i in v})
    text: dict[str, tuple[str, str]] = {}
    for start in range(0, len(ids), 500):
        for r in m.store.select(
            EXPERIENCES, In("id", ids[start : start + 500]), ["id", "task", "reason"]
        ):
            text[r["id"]] = (r.get("task") or "", r.get("reason") or "")
    return {lid: [text[i] for i in v if i in text] for lid, v in wanted.items()}


def forget_lesson(m: Mimir, ident: str, *, with_experiences: bool, actor: str = "api") -> list[str]:
    """Really delete a lesson (and, on request, its evidence); returns the experiences removed."""
    rows = rows_by_id(m.store, [ident])
    if not rows:
        raise NotFoundError("lesson", ident)
    # only the evidence ids are read: forgetting works without a usable key too
    key = signing_key(m) if key_problem(m) is None else b"\0" * 32
    lesson, _ok = from_row(rows[0], key, placement=False)
    removed: list[str] = []
    if with_experiences:
        ids = list(dict.fromkeys([*lesson.supporting_ids, *lesson.contradicting_ids]))
        if ids:
            present = m.store.select(EXPERIENCES, In("id", ids), ["id", "scope"])
            removed = [r["id"] for r in present]
            if removed:
                m.store.delete(EXPERIENCES, In("id", removed))
                m._release_superseded(removed)  # what they superseded is current again
                m.store.purge(EXPERIENCES)
                forget_in_digests(m, {r["scope"] or "" for r in present})
    m.store.delete(LESSONS, Eq("id", ident))
    m.store.purge(LESSONS)
    forget_head(m.store, ident)
    scrub_audit(m, [ident, *removed])
    m.audit(actor, ident, "forgotten", {"table": LESSONS, "experiences_removed": len(removed)})
    refresh_digest(m)
    return removed


def forget_in_digests(m: Mimir, scopes: set[str]) -> None:
    """Rebuild the hooks' attempts digests of ``scopes`` that exist, so forgotten experiences
    leave them too."""
    from ..observations.from_store import existing_scopes, rebuild

    wanted = [s for s in existing_scopes(m) if s in scopes]
    if wanted:
        rebuild(m, wanted)


def scrub_audit(m: Mimir, ids: Sequence[str]) -> None:
    """Remove the audit entries about forgotten items, older table versions included.

    Their details can quote the forgotten text (feedback notes, reasons); the ``forgotten``
    entry written afterwards keeps the record that something was removed, and when.
    """
    where = In("subject_id", ids)
    if ids and m.store.count(AUDIT, where):
        m.store.delete(AUDIT, where)
        m.store.purge(AUDIT)


def lessons_quoting(m: Mimir, exp_id: str) -> list[str]:
    """Ids of lessons whose wording quotes this experience (forgotten along with it)."""
    out = []
    for row in select_rows(m.store, None):
        try:
            quoted = json.loads(row.get("payload") or "{}").get("provenance", {}).get("quoted_ids")
        except (ValueError, AttributeError):
            continue
        if isinstance(quoted, list) and exp_id in quoted:
            out.append(str(row["id"]))
    return out
