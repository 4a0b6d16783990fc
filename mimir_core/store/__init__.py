"""The LanceDB store and everything below it: typed filters, SQL, upkeep, integrity, locking.

Kept empty of imports but ``os``: importing one module of this package loads no other. Every
module that loads the Lance engine lives here, so this package's import sets the engine's log
filter (:func:`quiet_lost_commits`) before any of them can load it.
"""

import os

LANCE_LOG_DEFAULT = "warn,lance::dataset::optimize=error"
"""The Lance engine's log filter when the user sets none (``LANCE_LOG``, read once when the
engine loads): warnings as usual, but not the one a lost compaction commit prints ("Compaction
commit failed; leaving N rewritten fragment(s) in place for GC"). Upkeep's compaction races
writers by design (:mod:`.compaction`), counts its lost commits (:attr:`Store.conflicts`) and
removes their files; the engine's warning repeated on every lost race, tens of lines a minute
on the host's stderr for a handled condition."""


def quiet_lost_commits() -> None:
    """Set :data:`LANCE_LOG_DEFAULT` as the engine's log filter unless the user set one.

    A library default written before the engine loads, not a setting Mimir reads."""
    os.environ.setdefault("LANCE_LOG", LANCE_LOG_DEFAULT)


quiet_lost_commits()
