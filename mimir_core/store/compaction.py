"""A table's compaction: rewritten off the write lock, committed under it, and a lost commit's
files removed.

Why: the upkeep thread compacted with LanceDB's ``compact_files``, which plans, rewrites and
commits with no lock, while the process kept writing one row at a time. Its commit then raced
every write: under load it failed now and then ("Too many concurrent writers" after 30 s of
retries, or "Commit conflict"), and a failed compaction left its rewritten data files on disk
(Lance keeps files no version names for 7 days) and its versions until the next one: 10k
single writes held 1.4x the settled size right after, 3k held 7x.

How: the rewrite (the expensive part: reading and writing the fragments) runs outside the write
lock; only the commit takes it, so writers wait for a commit (a few ms), not a rewrite, and no
writer commits between the check and the commit. A commit can still lose to a commit that does
not take the lock (another process's upkeep): then the data files it wrote are removed (they are
uniquely named and no version names them) and it is tried again; the last of
:data:`ATTEMPTS` tries runs the whole compaction under the lock, so it cannot lose to a writer.

What is left after a lost commit: the index files its remap wrote (LanceDB rewrites the indexes
of the fragments it merges inside the commit; their names say nothing of who wrote them, and
another process's upkeep may be writing index files of its own at that moment, so they are not
guessed at). They are a few per cent of the data files.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core import Store

log = logging.getLogger("mimir.store")

#: Tries of one compaction; the last runs under the write lock.
ATTEMPTS = 3
#: Words of the errors of a commit that lost (nothing of it was committed).
LOST = ("commit conflict", "concurrent writers")


def lost(exc: BaseException) -> bool:
    """Whether ``exc`` says a commit lost to a concurrent one (so nothing of it was written to
    the table's history, and its files are nobody's)."""
    text = str(exc).lower()
    return any(word in text for word in LOST)


def starved(exc: BaseException) -> bool:
    """Whether ``exc`` says a commit ran out of LanceDB's retries (its 30 s) against writers
    committing meanwhile: trying again without the write lock would likely starve again."""
    return "concurrent writers" in str(exc).lower()


def compact(store: Store, name: str, target: int) -> None:
    """Merge the table's fragments of fewer than ``target`` rows into fragments of up to
    ``target`` rows (see the module docstring)."""
    for _ in range(ATTEMPTS - 1):
        planned = rewrite(store, name, target)
        if planned is None or commit(store, name, *planned):
            return
    with store.lock.hold():  # the last try: no writer commits meanwhile
        store.upkeep_dataset(name).optimize.compact_files(target_rows_per_fragment=target)


def rewrite(store: Store, name: str, target: int) -> tuple[Any, list[Any]] | None:
    """(the dataset read, the rewrites) of a compaction of the table at its latest version,
    not committed; ``None`` when no fragment needs it."""
    from lance.optimize import Compaction

    ds = store.upkeep_dataset(name)
    plan = Compaction.plan(ds, {"target_rows_per_fragment": target})
    if not plan.tasks:
        return None
    return ds, [task.execute(ds) for task in plan.tasks]


def commit(store: Store, name: str, ds: Any, rewrites: Sequence[Any]) -> bool:
    """Commit ``rewrites`` under the write lock; ``False`` when the commit lost to a concurrent
    one (counted in ``store.conflicts``; the data files the rewrites wrote are removed)."""
    from lance.optimize import Compaction

    try:
        with store.lock.hold():
            Compaction.commit(ds, list(rewrites))
        return True
    except Exception as exc:
        if not lost(exc):
            raise
        store.conflicts += 1
        removed = drop_files(store, name, rewrites)
        log.info("compaction of %s lost its commit (%d files removed): %s", name, removed, exc)
        return False


def drop_files(store: Store, name: str, rewrites: Sequence[Any]) -> int:
    """Remove the data files ``rewrites`` wrote that the table's latest version does not name
    (a local store only); returns how many were removed."""
    if not store.is_local:
        return 0
    ds = store.upkeep_dataset(name)
    named = {f.path for frag in ds.get_fragments() for f in frag.data_files()}
    data = Path(store.uri) / f"{name}.lance" / "data"
    removed = 0
    for result in rewrites:
        for fragment in result.new_fragments:
            for file in fragment.data_files():
                if file.path in named:  # pragma: no cover - a lost commit names none of them
                    continue
                try:
                    os.remove(data / file.path)
                    removed += 1
                except FileNotFoundError:
                    pass  # already gone: nothing to remove
                except OSError as exc:
                    log.warning("cannot remove %s of a lost compaction: %s", file.path, exc)
    return removed
