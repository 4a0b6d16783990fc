"""What ``mimir doctor --repair`` does once the tables read again: rows, not files.

* Rows whose vectors are damaged (:mod:`.table_scan`) are embedded again from their own text, as
  :meth:`~mimir_core.memory.Mimir.reindex` would: the text is intact even where a flipped byte
  turned a vector into NaNs, so nothing is lost.
* A rollback loses the rows written after the version it returns to; lessons may cite some of
  them as evidence. Those lessons are named, so the user knows which rules now stand on less
  evidence than their confidence says (``mimir consolidate`` weighs them again).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .core import EXPERIENCES, KV, LESSONS
from .filters import In

if TYPE_CHECKING:
    from ..deps import Deps

#: Lesson ids listed by name in a report (the rest are counted).
NAMED = 10


def reembed(deps: Deps, damaged: Mapping[str, Sequence[str]]) -> list[str]:
    """Embed again the rows of each table whose ids are in ``damaged``; the actions taken."""
    from ..hosting.kv import reembed_rows

    actions = []
    store = deps.store
    emb = deps.embedder
    for name, ids in damaged.items():
        if not ids:
            continue
        columns = [f.name for f in store.table(name).schema]
        rows: list[dict[str, Any]] = []
        for start in range(0, len(ids), 500):
            rows += store.select(name, In("id", ids[start : start + 500]), columns)
        if name == EXPERIENCES:
            vecs = emb.embed([r["task"] for r in rows] + [r["action"] for r in rows])
            for i, row in enumerate(rows):
                row["vector"] = list(map(float, vecs[i]))
                row["action_vector"] = list(map(float, vecs[len(rows) + i]))
        elif name == LESSONS:
            vecs = emb.embed([str(r["trigger"]) for r in rows])
            for row, vec in zip(rows, vecs, strict=True):
                row["vector"] = list(map(float, vec))
        elif name == KV:
            reembed_rows(rows, emb)
        else:
            continue
        store.upsert(name, rows, on="id")
        actions.append(
            f"table {name}: embedded {len(rows)} row(s) with damaged vectors again from their "
            f"text ({emb.name})"
        )
    return actions


def redoc(deps: Deps, ids: Sequence[str]) -> str:
    """Make the JSON documents of these experience rows again from their columns."""
    from .core import DOC, DOC_FIELDS

    store = deps.store
    columns = [f.name for f in store.table(EXPERIENCES).schema]
    rows: list[dict[str, Any]] = []
    for start in range(0, len(ids), 500):
        rows += store.select(EXPERIENCES, In("id", ids[start : start + 500]), columns)
    for row in rows:
        row[DOC] = json.dumps({k: row[k] for k in DOC_FIELDS}, ensure_ascii=False)
    store.upsert(EXPERIENCES, rows, on="id")
    return (
        f"table experiences: made the garbled document of {len(rows)} row(s) again from their "
        f"columns"
    )


def lost_evidence(deps: Deps) -> tuple[int, int, dict[str, int]]:
    """(experience ids lessons cite, how many of them are gone, {lesson id: how many of its
    cited ids are gone})."""
    from ..lessons.storage import LESSON_COLUMNS

    store = deps.store
    cited: dict[str, set[str]] = {}
    for row in store.select(LESSONS, None, LESSON_COLUMNS):
        try:
            data = json.loads(row.get("payload") or "{}")
        except ValueError:
            continue
        ids = [*data.get("supporting_ids", []), *data.get("contradicting_ids", [])]
        cited[str(row["id"])] = {str(i) for i in ids}
    wanted = sorted(set().union(*cited.values())) if cited else []
    present: set[str] = set()
    for start in range(0, len(wanted), 500):
        found = store.select(EXPERIENCES, In("id", wanted[start : start + 500]), ["id"])
        present.update(str(r["id"]) for r in found)
    gone = {lid: len(ids - present) for lid, ids in cited.items() if ids - present}
    return len(wanted), len(wanted) - len(present), gone


def evidence_note(total: int, missing: int, gone: Mapping[str, int]) -> str | None:
    """The report's note on lessons whose evidence a repair lost (``None``: none lost)."""
    if not gone:
        return None
    names = sorted(gone, key=lambda k: -gone[k])
    listed = ", ".join(f"{k} ({gone[k]})" for k in names[:NAMED])
    more = f" and {len(names) - NAMED} more" if len(names) > NAMED else ""
    return (
        f"{missing} of the {total} experience id(s) lessons cite point to nothing after the "
        f"repair; {len(gone)} lesson(s) lost evidence: {listed}{more}. Their confidence "
        f"overstates what is left: run `mimir consolidate` to weigh them again, or restore the "
        f"lost experiences from a backup (`mimir import`)"
    )


def rebase_heads(deps: Deps) -> int:
    """Record each stored lesson that verifies as its own head; how many.

    After the repair rolled the lessons table back (or remade meta), the recorded heads are
    newer than the rows the repair chose to keep, and every such row would be taken for a
    replay and quarantined. The rollback is the repair's own doing, to a version the table
    really had, so the rows it kept become the heads. A row whose signature fails stays as it
    is (reading it quarantines it)."""
    from ..lessons.lifecycle import row_valid
    from ..lessons.storage import LESSON_COLUMNS, record_heads

    good = []
    for row in deps.store.select(
        LESSONS, None, list(dict.fromkeys([*LESSON_COLUMNS, "updated_at"]))
    ):
        lesson, ok = row_valid(deps, row)
        if ok:
            good.append(lesson)
    record_heads(deps.store, good)
    return len(good)
