"""Writing experiences: the batch write behind ``Mimir.record*``, the spool drain, supersede.

Every experience enters the store here, through :func:`record_batch` (validated, redacted and
capped by :func:`~mimir_core.ingest.validate.build_experience` first), whether it came from an
in-process call or a hook's spool line (:func:`ingest`). The functions take the narrow
:class:`~mimir_core.deps.Deps` rather than the facade, so the import path and a background drain
write exactly as the facade does, with no facade.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError, MimirError, NotFoundError, short
from ..types import Experience
from . import spool as _spool
from .validate import RECORD_FIELDS, build_experience

if TYPE_CHECKING:
    from ..deps import Deps

log = logging.getLogger("mimir")

#: Fields an :class:`Experience` has that a record() call does not take.
EXPERIENCE_ONLY = frozenset({"id", "superseded_by", "embed_model"})


def _items(deps: Deps, items: Iterable[Mapping[str, Any] | Experience]) -> list[Experience]:
    """Every item validated and built before anything is written: one bad item raises."""
    exps: list[Experience] = []
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise InvalidInputError("items", f"must be a list of mappings; got {short(items)}")
    for i, item in enumerate(items):
        if not isinstance(item, (Mapping, Experience)):
            raise InvalidInputError(f"items[{i}]", "must be a mapping of record() arguments")
        data = item.model_dump() if isinstance(item, Experience) else dict(item)
        for required in ("task", "action", "outcome"):
            if required not in data:
                raise InvalidInputError(f"items[{i}].{required}", "is required")
        if isinstance(item, Experience):
            data["idempotency_key"] = data.get("idempotency_key") or item.id
        unknown = set(data) - RECORD_FIELDS - EXPERIENCE_ONLY
        if unknown:
            raise InvalidInputError(sorted(unknown)[0], "is not an experience field")
        if data.get("scope") is None and deps.scope is not None:
            data["scope"] = deps.scope
        fields = {k: v for k, v in data.items() if k in RECORD_FIELDS}
        exps.append(build_experience(**fields, extra_patterns=deps.redact_patterns))
    return exps


def record_batch(
    deps: Deps, items: Iterable[Mapping[str, Any] | Experience]
) -> tuple[list[Experience], list[str]]:
    """``Mimir.record_many``, plus the ids this call inserted (not already stored, by this
    process or a concurrent one), for reports that count what they added."""
    from ..store.core import EXPERIENCES, experience_row, row_experience

    exps = _items(deps, items)
    if not exps:
        return [], []
    emb = deps.embedder
    vectors = emb.embed([e.task for e in exps] + [e.action for e in exps])
    n = len(exps)
    rows = []
    for i, exp in enumerate(exps):
        exp.embed_model = emb.name
        rows.append(experience_row(exp, vectors[i], vectors[n + i]))
    new_keys = {e.id for e in exps if e.idempotency_key is None}  # fresh uuid4 ids
    inserted = deps.store.insert_grouped(EXPERIENCES, rows, new_keys=new_keys)
    # What this call inserted is what it built (no read back: ~5 ms of a single write);
    # only rows already stored under their key are read.
    new = set(inserted)
    stored: dict[str, Experience] = {}
    for row in rows:  # of rows sharing a key, the first is the one inserted
        if row["id"] in new and row["id"] not in stored:
            stored[row["id"]] = row_experience(row)
    others = [e.id for e in exps if e.id not in stored]
    if others:
        stored.update((e.id, e) for e in deps.get_many(others))
    if inserted:  # the hooks' view of this project (only where hooks read one)
        from ..observations.from_store import fold

        fresh = [i for i, e in enumerate(exps) if e.id in new and e.id in stored]
        fold(deps, [stored[exps[i].id] for i in fresh], [vectors[i] for i in fresh])
    maybe_consolidate(deps, sum(e.outcome == "failure" for e in exps))
    return [stored.get(e.id, e) for e in exps], inserted


def maybe_consolidate(deps: Deps, failures: int = 0) -> None:
    """Start a background consolidation when enough new failures and time piled up."""
    if deps.auto.enabled:
        from ..lessons.auto import maybe_start

        maybe_start(deps, new_failures=failures)


def get(deps: Deps, ident: str) -> Experience:
    """The experience with this id (:class:`NotFoundError` if none)."""
    found = deps.get_many([ident])
    if not found:
        raise NotFoundError("experience", ident)
    return found[0]


def supersede(deps: Deps, old_id: str, new_id: str) -> None:
    """Mark ``old_id`` as superseded by ``new_id`` (both must exist; no cycles). The ids are
    checked to be non-empty strings by the caller."""
    from ..store.core import EXPERIENCES
    from ..store.filters import Eq

    if old_id == new_id:
        raise InvalidInputError("new_id", f"cannot supersede {old_id!r} with itself")
    store = deps.store
    with store.writing():
        get(deps, old_id)
        cursor: str | None = new_id
        seen: set[str] = set()
        while cursor is not None and cursor not in seen:
            if cursor == old_id:
                raise InvalidInputError(
                    "new_id", f"{new_id!r} is already superseded by {old_id!r} (a cycle)"
                )
            seen.add(cursor)
            cursor = get(deps, cursor).superseded_by
        store.update(EXPERIENCES, Eq("id", old_id), {"superseded_by": new_id})
        deps.audit("api", old_id, "superseded", {"by": new_id})


def ingest(deps: Deps, *, compact: bool = True, lock_timeout: float = 60.0) -> _spool.DrainReport:
    """``Mimir.ingest``: drain the records hooks captured into the store, exactly once (see
    :mod:`.spool`). Lines that are not valid records are set aside and counted, episodes left
    open by a host that died are closed first, and each loss is reported once."""
    from pydantic import ValidationError

    from ..observations.attempt_digest import digest_dir
    from ..store.core import EXPERIENCES
    from . import lost as _lost
    from .capture import Capture

    directory = deps.spool_dir
    _spool.ensure_private_dir(digest_dir(directory))  # hooks read what the drain stores
    report = _spool.drain(
        directory,
        lambda items: record_batch(deps, items)[0],
        is_invalid=lambda exc: isinstance(exc, (InvalidInputError, ValidationError)),
        lock_timeout=lock_timeout,
        before=lambda: Capture(directory, scope=deps.scope).close_stale(),
    )
    if report.ingested and compact:  # the records are in: compaction is best effort
        deps.store.maybe_optimize(EXPERIENCES, now=True)
    if report.rejected:
        log.warning(
            "set aside %d bad spool line(s) in %s",
            report.rejected,
            directory / "rejected.jsonl",
        )
    gone = _lost.read(directory)
    if gone is not None and gone.count > gone.reported:  # each loss is reported once here
        report.lost = gone.describe()
        log.warning("%s; they cannot be recovered", report.lost)
        _lost.mark_reported(directory)
    return report


def drain_pending(deps: Deps) -> None:
    """Ingest records captured a moment ago before a read (a ``stat`` when there are none).

    A read never fails because of the spool: a drain error is logged and the read goes on."""
    if not _spool.has_pending(deps.spool_dir):
        return
    try:
        ingest(deps, compact=False, lock_timeout=10.0)
    except MimirError as exc:
        log.warning("could not drain the capture spool: %s", exc)
