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
    from ..deps import Deps
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


def author_key(deps: Deps) -> AuthorKey:
    """This installation's Ed25519 key (:mod:`.authors`), created on first use."""
    cached: AuthorKey | None = deps.state.author_key
    if cached is None:
        from .authors import load_or_create

        cached = deps.state.author_key = load_or_create(deps.home)
    return cached


def stamp_author(deps: Deps, lessons: Iterable[Lesson]) -> None:
    """Record this installation as the author of lessons that name none (new ones; an older
    lesson on its first re-signing). The signer of each version is in its ``author_sig``."""
    me = author_key(deps)
    for lesson in lessons:
        if "author" not in lesson.provenance:
            lesson.provenance["author"] = me.key_id
            lesson.provenance["author_name"] = me.name
    if not deps.state.author_published:
        from . import trust

        deps.state.author_published = True
        if trust.present(deps):  # on a team store, an admin can then add this key by id
            trust.publish(deps)


def untrusted(deps: Deps) -> dict[str, str]:
    """Lesson id → why it is not served (untrusted signer), as seen by the latest reads."""
    got: dict[str, str] | None = deps.state.untrusted
    if got is None:
        got = deps.state.untrusted = {}
    return got


def row_valid(deps: Deps, row: dict[str, Any]) -> tuple[Lesson, bool]:
    """(lesson, verified) of a row with no side effect: by the HMAC key on a single-machine
    store, by its author's signature and the trust list on a team store."""
    from . import trust

    tv = trust.view(deps)
    if tv is None:
        return from_row(row, signing_key(deps))
    from .team_verify import check_row

    lesson, ok, why = check_row(row, tv)
    return lesson, ok and why is None


# -- reading -------------------------------------------------------------------------------------


def load(deps: Deps, ident: str) -> tuple[Lesson, bool]:
    """(lesson, signature valid) by id; a failing lesson is quarantined on the way."""
    rows = rows_by_id(deps.store, [check_id(ident)])
    if not rows:
        raise NotFoundError("lesson", ident)
    return verified(deps, rows[0])


def load_valid(deps: Deps, ident: str, doing: str) -> Lesson:
    """The lesson by id, or :class:`LessonStateError` if its signature failed (quarantined)."""
    lesson, ok = load(deps, ident)
    if not ok:
        signing_key(deps)  # a key problem says so, naming the key file
        raise LessonStateError(
            f"lesson {ident!r} failed its signature check and is quarantined; it cannot be {doing}"
        )
    return lesson


def verified(
    deps: Deps,
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
    if key_problem(deps) is not None:
        return from_row(row, b"\0" * 32, placement=False)[0], False
    from . import trust

    tv = trust.view(deps)
    if tv is not None:  # a team store: the author's signature against the trust list
        from .team_verify import check_row

        lesson, ok, why = check_row(row, tv)
        if why is not None:  # not served, not quarantined: trusting the key brings it back
            untrusted(deps)[lesson.id] = why
            return lesson, False
        untrusted(deps).pop(lesson.id, None)
    else:
        lesson, ok = from_row(row, signing_key(deps))
    if tv is None and ok and not is_bound(row) and not bind_legacy(deps, row, lesson, fresh):
        if row.get("status") == "quarantined":
            return lesson, False
        why = "its vector is not its trigger's embedding (retargeted)"
        return quarantine_tampered(deps, row, lesson, refresh=refresh, reason=why), False
    if ok:
        ident = str(row.get("id"))
        hd = known_heads if known_heads is not None else heads(deps.store, [ident])
        if is_replay(lesson, hd.get(ident)):
            if row.get("status") == "quarantined":
                return lesson, False  # not served either way; reported when first seen
            return quarantine_tampered(deps, row, lesson, refresh=refresh, replayed=True), False
    if not ok and row.get("status") != "quarantined":
        lesson = quarantine_tampered(deps, row, lesson, refresh=refresh)
    elif not ok:
        lesson.status = "quarantined"
    return lesson, ok


def load_many(
    deps: Deps, where: Filter | None, *, limit: int | None = None, refresh: bool = True
) -> list[tuple[Lesson, bool]]:
    """Every (lesson, valid) matching a SQL filter over the lessons table."""
    from . import trust

    team = trust.view(deps, fresh=True) is not None
    rows = select_rows(deps.store, where, limit=limit)
    hd = heads(deps.store, [str(r.get("id")) for r in rows]) if rows else {}
    unbound = [r for r in rows if not is_bound(r)] if key_problem(deps) is None and not team else []
    fresh: dict[str, Any] = {}
    if unbound:  # rows written before placement bindings: one embedding batch to bind them
        vecs = deps.embedder.embed([str(r.get("trigger") or "") for r in unbound])
        fresh = {str(r.get("id")): v for r, v in zip(unbound, vecs, strict=True)}
    return [verified(deps, r, refresh=refresh, known_heads=hd, fresh=fresh) for r in rows]


def bind_legacy(
    deps: Deps, row: dict[str, Any], lesson: Lesson, fresh: Mapping[str, Any] | None = None
) -> bool:
    """Bind a (verified) row written before placement bindings, if its vector is its trigger's
    embedding; ``False`` (not bound) if it is not. Audited and logged once per lesson."""
    ident = str(row.get("id"))
    vec = (fresh or {}).get(ident)
    if vec is None:
        vec = deps.embedder.embed([lesson.trigger])[0]
    if row.get("vector") is None or not vector_matches(row["vector"], vec):
        return False
    from ..text import fts_text

    derived = {
        "text": fts_text(f"{lesson.trigger}\n{lesson.rule}"),
        "updated_at": lesson.updated_at.timestamp(),
    }
    new = bind(dict(row, **derived), signing_key(deps), author_key(deps))
    values = dict(derived, payload=new["payload"])
    where = And(Eq("id", ident), Eq("signature", str(row.get("signature"))))
    deps.store.update(LESSONS, where, values)
    row.update(values)
    detail = {"reason": "placement columns (vector, text, updated_at) bound to its signature"}
    deps.audit("mimir", ident, "row_bound", dict(detail, status=row.get("status")))
    log_event(deps.home, "row_bound", lesson=ident)
    return True


def ensure_bound(deps: Deps) -> int:
    """Bind (or quarantine, if retargeted) every row written before placement bindings;
    returns how many rows were looked at. Cheap when there are none (one count)."""
    where = Not(Like("payload", f'%"{ROW_MAC}":%'))
    if not deps.store.count(LESSONS, where):
        return 0
    return len(load_many(deps, where))


def quarantine_tampered(
    deps: Deps,
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
    deps.store.update(LESSONS, Eq("id", ident), values)
    event = "replay_detected" if replayed else "signature_failed"
    why = reason or (
        "an older signed version of the lesson was written back (replay)"
        if replayed
        else "signature verification failed"
    )
    deps.audit("mimir", ident, event, {"reason": why, "was": row.get("status")})
    log_event(deps.home, event, lesson=ident, was=row.get("status"))
    log.warning("lesson %s: %s: quarantined", ident, why)
    lesson.status = "quarantined"
    if refresh and row.get("status") == "active":
        refresh_digest(deps)
    return lesson


# -- writing -------------------------------------------------------------------------------------


def insert(
    deps: Deps,
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
    key = signing_key(deps)
    now = deps.now()
    stamp_author(deps, items)
    out = [signed(lesson, key, now=now) for lesson in items]
    vectors = deps.embedder.embed([lesson.trigger for lesson in out])
    me = author_key(deps)
    with deps.store.writing():
        rows = [bind(to_row(le, v), key, me) for le, v in zip(out, vectors, strict=True)]
        deps.store.upsert(LESSONS, rows)
        crash_point("lesson_rows_written")
        record_heads(deps.store, out)
    crash_point("lesson_heads_written")
    for lesson in out:
        deps.audit(actor, lesson.id, event, dict(detail or {}, status=lesson.status))
    if any(lesson.status == "active" for lesson in out):
        refresh_digest(deps)
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


def write_batch(deps: Deps, writes: Sequence[Write], *, actor: str) -> list[Lesson]:
    """Sign and upsert many lessons at once: one embedding batch, one write, one audit append."""
    if not writes:
        return []
    for w in writes:
        if w.expect is None:  # a new lesson (an older store's ids stay writable)
            check_new_id("id", w.lesson.id)
    key = signing_key(deps)
    now = deps.now()
    stamp_author(deps, [w.lesson for w in writes])
    me = author_key(deps)
    out = [signed(w.lesson, key, now=now) for w in writes]
    missing = [i for i, w in enumerate(writes) if w.vector is None]
    vectors: list[Sequence[float]] = [w.vector if w.vector is not None else [] for w in writes]
    if missing:
        embedded = deps.embedder.embed([out[i].trigger for i in missing])
        for i, vec in zip(missing, embedded, strict=True):
            vectors[i] = list(vec)
    with deps.store.writing():  # optimistic concurrency: skip rows changed since they were read
        stored = rows_by_id(deps.store, [le.id for le in out])
        current = {r["id"]: r["signature"] for r in stored}
        hd = heads(deps.store, list(current))
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
            deps.store.upsert(LESSONS, rows)
            crash_point("lesson_rows_written")
            record_heads(deps.store, out)
    crash_point("lesson_heads_written")
    if not out:
        return []
    ts = now.timestamp()
    deps.store.append(
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
        refresh_digest(deps)
    return out


def save(
    deps: Deps,
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
    key = signing_key(deps)
    stamp_author(deps, [lesson])
    out = signed(lesson, key, now=deps.now())
    me = author_key(deps)
    with deps.store.writing():
        rows = rows_by_id(deps.store, [out.id])
        if not rows or rows[0].get("signature") != lesson.signature:
            raise LessonStateError(
                f"lesson {out.id!r} was changed by another process meanwhile; read it again"
            )
        values = update_values(out)
        values["payload"] = bind(dict(values, vector=rows[0]["vector"]), key, me)["payload"]
        deps.store.update(LESSONS, Eq("id", out.id), values)
        record_heads(deps.store, [out])
    deps.audit(actor, out.id, event, dict(detail or {}, status=out.status))
    if out.status == "active" or was_active:
        refresh_digest(deps)
    return out


def change_status(
    deps: Deps,
    ident: str,
    status: str,
    *,
    actor: str,
    reason: str,
    event: str,
    superseded_by: str | None = None,
) -> Lesson:
    """Move a (valid) lesson to ``status``, audited with ``reason``."""
    lesson, ok = load(deps, ident)
    if not ok:
        signing_key(deps)  # a key problem says so, naming the key file
        if status == "quarantined":
            return lesson  # already quarantined when its signature failed
        raise LessonStateError(
            f"lesson {ident!r} failed its signature check and is quarantined; it cannot be "
            f"made {status!r} (forget it, or re-learn it with `mimir consolidate`)"
        )
    was = lesson.status
    lesson.status = status  # type: ignore[assignment]
    now = deps.now()
    if status in ("superseded", "retired"):
        lesson.invalid_at = now
    if superseded_by is not None:
        lesson.superseded_by = superseded_by
    detail: dict[str, Any] = {"reason": reason, "was": was}
    if superseded_by:
        detail["by"] = superseded_by
    return save(deps, lesson, actor=actor, event=event, detail=detail, was_active=was == "active")


def refresh_digest(deps: Deps) -> None:
    """Rewrite the hooks' digest from the active lessons that verify (never raises)."""
    try:
        from .revalidate import CONTRADICTED, here, verdicts

        good: list[dict[str, Any]] = []
        known = verdicts(deps)
        for lesson, ok in load_many(deps, Eq("status", "active"), refresh=False):
            if ok and lesson.status == "active":
                verdict, tag = here(deps, lesson, known)
                if verdict != CONTRADICTED:  # quarantined here by local evidence
                    good.append(dict(lesson.model_dump(mode="json"), **{"from": tag}))
        good.sort(key=lambda d: (-float(d.get("confidence", 0.0)), d["id"]))
        write_digest(deps.home, good, signing_key(deps), _evidence_texts(deps, good))
    except Exception as exc:  # the digest is derived data: the next change rewrites it
        log.warning("cannot rewrite the lessons digest: %s", exc)
        log_event(deps.home, "digest_failed", error=str(exc))


def _evidence_texts(
    deps: Deps, lessons: Sequence[Mapping[str, Any]]
) -> dict[str, list[tuple[str, str]]]:
    """(task, reason) of each lesson's evidence, for the digest's topic keywords."""
    wanted = {
        str(d["id"]): [*d.get("supporting_ids", []), *d.get("contradicting_ids", [])]
        for d in lessons
    }
    ids = sorted({i for v in wanted.values() for i in v})
    text: dict[str, tuple[str, str]] = {}
    for start in range(0, len(ids), 500):
        for r in deps.store.select(
            EXPERIENCES, In("id", ids[start : start + 500]), ["id", "task", "reason"]
        ):
            text[r["id"]] = (r.get("task") or "", r.get("reason") or "")
    return {lid: [text[i] for i in v if i in text] for lid, v in wanted.items()}


def forget_lesson(
    deps: Deps, ident: str, *, with_experiences: bool, actor: str = "api"
) -> list[str]:
    """Really delete a lesson (and, on request, its evidence); returns the experiences removed."""
    rows = rows_by_id(deps.store, [ident])
    if not rows:
        raise NotFoundError("lesson", ident)
    # only the evidence ids are read: forgetting works without a usable key too
    key = signing_key(deps) if key_problem(deps) is None else b"\0" * 32
    lesson, _ok = from_row(rows[0], key, placement=False)
    removed: list[str] = []
    if with_experiences:
        ids = list(dict.fromkeys([*lesson.supporting_ids, *lesson.contradicting_ids]))
        if ids:
            present = deps.store.select(EXPERIENCES, In("id", ids), ["id", "scope"])
            removed = [r["id"] for r in present]
            if removed:
                deps.store.delete(EXPERIENCES, In("id", removed))
                deps.release_superseded(removed)  # what they superseded is current again
                deps.store.purge(EXPERIENCES)
                forget_in_digests(deps, {r["scope"] or "" for r in present})
    deps.store.delete(LESSONS, Eq("id", ident))
    deps.store.purge(LESSONS)
    forget_head(deps.store, ident)
    scrub_audit(deps, [ident, *removed])
    deps.audit(actor, ident, "forgotten", {"table": LESSONS, "experiences_removed": len(removed)})
    refresh_digest(deps)
    return removed


def forget_in_digests(deps: Deps, scopes: set[str]) -> None:
    """Rebuild the hooks' attempts digests of ``scopes`` that exist, so forgotten experiences
    leave them too."""
    from ..observations.from_store import existing_scopes, rebuild

    wanted = [s for s in existing_scopes(deps) if s in scopes]
    if wanted:
        rebuild(deps, wanted)


def scrub_audit(deps: Deps, ids: Sequence[str]) -> None:
    """Remove the audit entries about forgotten items, older table versions included.

    Their details can quote the forgotten text (feedback notes, reasons); the ``forgotten``
    entry written afterwards keeps the record that something was removed, and when.
    """
    where = In("subject_id", ids)
    if ids and deps.store.count(AUDIT, where):
        deps.store.delete(AUDIT, where)
        deps.store.purge(AUDIT)


def lessons_quoting(deps: Deps, exp_id: str) -> list[str]:
    """Ids of lessons whose wording quotes this experience (forgotten along with it)."""
    out = []
    for row in select_rows(deps.store, None):
        try:
            quoted = json.loads(row.get("payload") or "{}").get("provenance", {}).get("quoted_ids")
        except (ValueError, AttributeError):
            continue
        if isinstance(quoted, list) and exp_id in quoted:
            out.append(str(row["id"]))
    return out
