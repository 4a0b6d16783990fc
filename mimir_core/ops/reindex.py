"""Re-embedding a whole store with the configured embedder (``Mimir.reindex``, ``mimir reindex``).

Reindexing is how a store moves to a new embedding model: every experience, lesson and
key-value document gets new vectors, and the store's meta records the model. It takes the
:class:`~mimir_core.deps.Deps` rather than the facade, as every internal does, because it needs
what the facade keeps private: the configured embedder (not the variant matching the store's
old vectors) and a store opened without that check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..embed.core import CachedEmbedder
from ..store.core import (
    EXPERIENCE_COLUMNS,
    EXPERIENCES,
    KV,
    LESSONS,
    experience_row,
    row_experience,
)

if TYPE_CHECKING:
    from ..deps import Deps


def reindex(deps: Deps, batch: int = 256) -> int:
    """Re-embed everything; returns how many experiences. Safe to rerun: each old table is kept
    as a backup table until the new one is complete."""
    from ..hosting.kv import reembed_rows

    store = deps.store_for_reindex()
    # The configured embedder, even if this store was opened with the variant that matched
    # its old vectors: reindexing is how a store moves to it.
    emb = CachedEmbedder(deps.configured_embedder())
    # upkeep paused before the lock is taken: a run in progress may be waiting for it
    with store.paused(), store.writing():
        data = store.column(EXPERIENCES, EXPERIENCE_COLUMNS).to_pylist()
        # Each batch becomes Arrow at once (float32 vectors: ~3 KB a row, not ~25 KB of
        # Python floats), and the table is swapped only when all of it is embedded.
        parts = []
        for start in range(0, len(data), batch):
            chunk = [row_experience(r) for r in data[start : start + batch]]
            vecs = emb.embed([e.task for e in chunk] + [e.action for e in chunk])
            for exp in chunk:
                exp.embed_model = emb.name
            rows = [
                experience_row(exp, vecs[i], vecs[len(chunk) + i]) for i, exp in enumerate(chunk)
            ]
            parts.append(store.arrow_table(EXPERIENCES, rows))
        new = store.arrow_table(EXPERIENCES, [], parts)
        store.replace_table(EXPERIENCES, new)
        lessons = store.column(LESSONS, [*store.lesson_columns(), "vector"]).to_pylist()
        if lessons:
            from ..lessons.lifecycle import author_key, row_valid, signing_key
            from ..lessons.storage import rebind

            vecs = emb.embed([str(r["trigger"]) for r in lessons])
            valid = [row_valid(deps, dict(r))[1] for r in lessons]
            rebind(lessons, vecs, signing_key(deps), author_key(deps), valid)
        store.replace_table(LESSONS, lessons)
        docs = store.column(KV, [f.name for f in store.table(KV).schema]).to_pylist()
        reembed_rows(docs, emb, batch=batch)
        store.replace_table(KV, docs)
        store.set_meta({"embed_model": emb.name, "dim": str(emb.dim)})
    deps.use_embedder(emb)
    deps.audit(
        "api",
        "store",
        "reindexed",
        {
            "experiences": new.num_rows,
            "lessons": len(lessons),
            "kv": len(docs),
            "embedder": emb.name,
        },
    )
    return int(new.num_rows)
