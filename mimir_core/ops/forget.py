"""Forgetting for real: an experience or a lesson removed from the store and its older table
versions, and from everything that quotes it (session state, audit details, digests, lessons
whose wording quotes it), with one audit entry.

Lives here, not in the facade, so that ``Mimir.forget`` only checks its arguments; the CLI, MCP
and the UI reach the same code through it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import NotFoundError
from ..store.core import EXPERIENCES, LESSONS
from ..store.filters import Eq

if TYPE_CHECKING:
    from ..deps import Deps


def forget(deps: Deps, ident: str, *, with_experiences: bool = False) -> None:
    """Remove the experience or lesson ``ident`` (see ``Mimir.forget``).

    A lesson deleted outside Mimir is acknowledged (noted in its paper trail) rather than
    reported missing. Raises :class:`NotFoundError` when ``ident`` names neither."""
    from ..ingest.capture.episodes import scrub_sessions
    from ..lessons.lifecycle import (
        forget_in_digests,
        forget_lesson,
        lessons_quoting,
        refresh_digest,
        scrub_audit,
    )
    from ..lessons.reconcile import acknowledge_missing

    where = Eq("id", ident)
    store = deps.store
    table = EXPERIENCES if store.count(EXPERIENCES, where) else None
    if table is None and store.count(LESSONS, where):
        table = LESSONS
    if table is None:
        if acknowledge_missing(deps, ident):  # a lesson deleted outside Mimir: noted
            return
        raise NotFoundError("experience or lesson", ident)
    if table == LESSONS:
        forget_lesson(deps, ident, with_experiences=with_experiences)
        return
    quoting = lessons_quoting(deps, ident)
    forgotten = deps.get_many([ident])
    store.delete(table, where)
    deps.release_superseded([ident])
    store.purge(table)
    for e in forgotten:  # the hook's session state may still hold the steps it came from
        scrub_sessions(deps.spool_dir, [e.action, e.reason or ""])
    scrub_audit(deps, [ident])
    forget_in_digests(deps, {e.scope for e in forgotten})
    deps.audit("api", ident, "forgotten", {"table": table})
    for lesson_id in quoting:  # their wording quotes the forgotten text
        forget_lesson(deps, lesson_id, with_experiences=False, actor="mimir")
    if not quoting:  # the digest's topic keywords come from the lessons' evidence texts
        refresh_digest(deps)
