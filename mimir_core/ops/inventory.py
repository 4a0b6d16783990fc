"""What a store holds: the newest experiences and the counts behind ``Mimir.stats``.

Reads only, through the store's typed filters and the handle's scope rule; the facade checks
arguments and delegates here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..store.core import EXPERIENCES, LESSONS
from ..types import OUTCOMES, Experience, Stats

if TYPE_CHECKING:
    from ..deps import Deps


def recent(deps: Deps, n: int, scope: str | None) -> list[Experience]:
    """The ``n`` most recently created experiences under the scope rule, newest first (ids and
    times read as one column scan; only the ``n`` newest documents are decoded)."""
    where, _prefer = deps.scope_filter(scope)
    table = deps.store.column(EXPERIENCES, ["id", "created_at"], where)
    if table.num_rows == 0:
        return []
    ids = table.column("id").to_pylist()
    ts = table.column("created_at").to_pylist()
    newest = [i for _t, i in sorted(zip(ts, ids, strict=True), reverse=True)[:n]]
    got = {e.id: e for e in deps.get_many(newest)}
    return [got[i] for i in newest if i in got]


def stats(deps: Deps) -> Stats:
    """Counts by outcome, source and scope, lessons by status, and store facts."""
    store = deps.store
    cols = store.column(EXPERIENCES, ["outcome", "source", "scope", "superseded_by"])

    def tally(name: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for v in cols.column(name).to_pylist():
            out[v or ""] = out.get(v or "", 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    lessons: dict[str, int] = {}
    for row in store.select(LESSONS, None, ["status"]):
        lessons[row["status"]] = lessons.get(row["status"], 0) + 1
    by_outcome = {o: 0 for o in OUTCOMES} | tally("outcome")
    return Stats(
        store_uri=deps.store_uri,
        schema_version=int(store.meta().get("schema_version", "0")),
        embedder=deps.embedder.name,
        experiences=cols.num_rows,
        by_outcome=by_outcome,
        by_source=tally("source"),
        by_scope=tally("scope"),
        lessons=lessons,
        superseded=sum(1 for v in cols.column("superseded_by").to_pylist() if v),
        table_version=int(store.table(EXPERIENCES).version),
        fragments=store.fragments(EXPERIENCES),
        disk_bytes=store.disk_bytes(),
    )
