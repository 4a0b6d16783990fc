"""A consolidation lease in the store, for machines that share it.

The consolidation lock (:class:`~.consolidate.TryLock`) is a file in one home: two machines on
one bucket would consolidate at once, both insert the same new lesson (LanceDB's concurrent
``merge_insert`` commits keep both rows) and each record its own version as the lesson's head,
so the other's looks like a replay. Object storage offers no lock Mimir can take through LanceDB,
so machines agree through the ``meta`` table instead:

1. each contender writes its own row ``consolidate_lease:<nonce>`` (start time, expiry);
2. waits :data:`SETTLE` seconds (longer than a write takes to become visible: S3 reads after a
   write are consistent), then reads every live lease;
3. the earliest (start, nonce) proceeds; the others wait for it to finish (or expire).

Two contenders whose writes overlap see each other's and agree on one; one that writes after
another's settle window sees the earlier lease. It fails only if clocks disagree by more than
the gap between two writes that straddle a settle window. A crashed holder's lease expires
after :data:`TTL` seconds. Used for stores on object storage and stores with a trust list.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..store.core import META
from ..store.filters import Eq, Like

if TYPE_CHECKING:
    from ..deps import Deps

PREFIX = "consolidate_lease:"
SETTLE = 0.5
TTL = 600.0
#: How long a contender waits for another machine's run before giving up (``ran=False``).
WAIT = 60.0


def shared(deps: Deps) -> bool:
    """Whether other machines may consolidate this store (object storage, or a team store)."""
    from . import trust

    return "://" in str(deps.store_uri) or trust.present(deps)


def _live(deps: Deps) -> list[tuple[float, str]]:
    now = time.time()
    out = []
    for r in deps.store.select(META, Like("key", PREFIX + "%"), ["key", "value"]):
        try:
            data = json.loads(r["value"])
            if float(data["exp"]) > now:
                out.append((float(data["start"]), str(r["key"])))
        except (ValueError, KeyError, TypeError):
            continue
    return sorted(out)


@contextmanager
def lease(deps: Deps, *, wait: float = WAIT) -> Iterator[bool]:
    """Hold the store's consolidation lease (yields ``False`` if it could not be had)."""
    key = PREFIX + os.urandom(8).hex()
    start = time.time()
    deps.store.set_meta({key: json.dumps({"start": start, "exp": start + TTL})})
    try:
        deadline = time.monotonic() + wait
        while True:
            time.sleep(SETTLE)
            live = _live(deps)
            if live and live[0][1] == key:
                break
            if time.monotonic() > deadline:
                yield False
                return
        yield True
    finally:
        deps.store.delete(META, Eq("key", key))
