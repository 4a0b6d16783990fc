"""The Lance engine's log filter when the user sets none.

Every module of this package that loads the engine (:mod:`.core`, :mod:`.integrity`) calls
:func:`quiet_lost_commits` when it is imported, so the filter is in place before the engine
first loads in any process: one that opens a ``Store``, and one that only checks a store's
files (``mimir doctor``).
"""

from __future__ import annotations

import os

LANCE_LOG_DEFAULT = "warn,lance::dataset::optimize=error"
"""``LANCE_LOG`` (read once, when the engine loads) unless the user set it: warnings as usual,
but not the one a lost compaction commit prints ("Compaction commit failed; leaving N rewritten
fragment(s) in place for GC"). Upkeep's compaction races writers by design
(:mod:`.compaction`), counts its lost commits (:attr:`~.core.Store.conflicts`) and removes their
files; the engine's warning repeated on every lost race, tens of lines a minute on the host's
stderr for a handled condition."""


def quiet_lost_commits() -> None:
    """Set :data:`LANCE_LOG_DEFAULT` as the engine's log filter unless the user set one.

    A library default written before the engine loads, not a setting Mimir reads."""
    os.environ.setdefault("LANCE_LOG", LANCE_LOG_DEFAULT)
