"""A compaction that loses its commit to a concurrent one leaves nothing behind.

The upkeep thread compacted with no lock while the process kept writing; under load its commit
failed now and then, and each failure left its rewritten data files on disk (Lance keeps files
no version names for 7 days): 3k single writes peaked at 7x their settled size. Compaction now
rewrites outside the write lock, commits under it, removes a lost commit's data files and runs
its last try under the lock (``mimir_core/store/compaction.py``). Real LanceDB in a temporary
home; a lost commit is made by a real conflicting write (a delete of a rewritten row).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mimir_core import Mimir
from mimir_core.store import compaction
from mimir_core.store.core import EXPERIENCES, Store
from mimir_core.store.filters import Eq


def open_m(home: Path) -> Mimir:
    return Mimir(home, embedder="hash", auto_consolidate=False)


def data_files(store: Store) -> set[str]:
    """The data files on disk of the experiences table."""
    return set(os.listdir(Path(store.uri) / f"{EXPERIENCES}.lance" / "data"))


def named_files(store: Store) -> set[str]:
    """The data files the table's latest version names."""
    ds = store.upkeep_dataset(EXPERIENCES)
    return {f.path for frag in ds.get_fragments() for f in frag.data_files()}


def written(rewrites: list[Any]) -> set[str]:
    return {f.path for r in rewrites for frag in r.new_fragments for f in frag.data_files()}


def single_writes(m: Mimir, n: int, start: int = 0) -> list[str]:
    return [m.record(f"task {i}", f"act {i}", "success").id for i in range(start, start + n)]


def stored_ids(m: Mimir) -> set[str]:
    return {r["id"] for r in m.store.select(EXPERIENCES, None, columns=["id"])}


def test_a_lost_compaction_commit_removes_its_data_files_and_keeps_every_row(
    home: Path,
) -> None:
    m = open_m(home)
    store = m.store
    with store.paused():  # no upkeep of this process meanwhile: the test drives compaction
        ids = single_writes(m, 30)
        store.upkeep_dataset(EXPERIENCES).optimize.optimize_indices()  # the commit remaps them
        ids += single_writes(m, 10, start=30)
        planned = compaction.rewrite(store, EXPERIENCES, 1024)
        assert planned is not None
        ds, rewrites = planned
        new = written(rewrites)
        assert new and new <= data_files(store)  # the rewrite wrote them, uncommitted

        store.delete(EXPERIENCES, Eq("id", ids[3]))  # a concurrent commit the rewrite loses to
        assert compaction.commit(store, EXPERIENCES, ds, rewrites) is False

        assert store.conflicts == 1
        assert not new & data_files(store)  # removed, not left for a 7-day cleanup
        assert stored_ids(m) == set(ids) - {ids[3]}

        compaction.compact(store, EXPERIENCES, 1024)  # the next one commits
        assert store.fragments(EXPERIENCES) == len(rewrites) == 2  # indexed rows, the others
        assert store.conflicts == 1
        assert stored_ids(m) == set(ids) - {ids[3]}
    m.close()


def test_the_last_try_compacts_under_the_write_lock(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = open_m(home)
    store = m.store
    real_commit = compaction.commit
    deleted: list[str] = []

    def losing(store_: Store, name: str, ds: Any, rewrites: list[Any]) -> bool:
        """A real conflicting commit (a delete of a rewritten row) just before each commit."""
        victim = sorted(stored_ids(m))[0]
        deleted.append(victim)
        store_.delete(EXPERIENCES, Eq("id", victim))
        return real_commit(store_, name, ds, rewrites)

    with store.paused():
        ids = single_writes(m, 30)
        monkeypatch.setattr(compaction, "commit", losing)
        compaction.compact(store, EXPERIENCES, 1024)

        assert store.conflicts == compaction.ATTEMPTS - 1 == len(deleted)
        assert store.fragments(EXPERIENCES) == 1  # the try under the lock could not lose
        assert stored_ids(m) == set(ids) - set(deleted)
        store.optimize(EXPERIENCES, cleanup_older_than=timedelta(0))
        assert data_files(store) == named_files(store)  # no orphan of the two lost commits
    m.close()


def kept_files(store: Store) -> set[str]:
    """The data files named by any version of the table still on disk."""
    ds = store.upkeep_dataset(EXPERIENCES)
    out: set[str] = set()
    for version in ds.versions():
        old = ds.checkout_version(version["version"])
        out |= {f.path for frag in old.get_fragments() for f in frag.data_files()}
    return out


def test_single_writes_with_upkeep_leave_only_files_of_kept_versions(home: Path) -> None:
    """The disk right after (versions of the last ``CLEANUP_AFTER`` and their files) depends
    on the write rate, so ``bench.peer`` measures it; here: nothing on disk is nobody's."""
    m = open_m(home)
    store = m.store
    ids = single_writes(m, 240)  # ten compactions' worth of fragments
    assert store.upkeep.wait(120)
    assert store.upkeep.runs >= 1
    assert store.conflicts == 0  # one process: every commit under the lock wins
    assert data_files(store) == kept_files(store)  # every file on disk belongs to a version

    store.optimize(EXPERIENCES, cleanup_older_than=timedelta(0))
    assert data_files(store) == named_files(store)  # nothing orphaned by the upkeep
    assert stored_ids(m) == set(ids)
    m.close()


def test_an_upkeep_step_starved_of_its_commit_runs_again_under_the_write_lock(home: Path) -> None:
    """An index fold rebased over one write after another ran out of LanceDB's retries; its
    next try holds the write lock, so no writer commits meanwhile."""
    m = open_m(home)
    store = m.store
    held: list[bool] = []

    def step() -> str:
        held.append(store.lock._depth > 0)
        if len(held) == 1:
            raise OSError("Too many concurrent writers. Attempted 8 times, but failed")
        return "folded"

    assert store._retried(step) == "folded"
    assert held == [False, True]
    assert store.conflicts == 1

    def broken() -> None:
        raise OSError("No space left on device")

    with pytest.raises(OSError, match="No space"):
        store._retried(broken)  # not a lost commit: raised at once, not counted
    assert store.conflicts == 1
    m.close()


LOSE_A_COMMIT = """
import sys
from pathlib import Path
from mimir_core import Mimir
from mimir_core.store import compaction
from mimir_core.store.core import EXPERIENCES
from mimir_core.store.filters import Eq

m = Mimir(Path(sys.argv[1]), embedder="hash", auto_consolidate=False)
with m.store.paused():
    ids = [m.record(f"task {i}", f"act {i}", "success").id for i in range(12)]
    ds, rewrites = compaction.rewrite(m.store, EXPERIENCES, 1024)
    m.store.delete(EXPERIENCES, Eq("id", ids[3]))
    assert compaction.commit(m.store, EXPERIENCES, ds, rewrites) is False
print("lost", m.store.conflicts)
m.close()
"""


def _environment(user_filter: str | None) -> dict[str, str]:
    """This process's environment with ``LANCE_LOG`` as a user would leave it."""
    env = {k: v for k, v in os.environ.items() if k != "LANCE_LOG"}
    if user_filter is not None:
        env["LANCE_LOG"] = user_filter
    return env


@pytest.mark.parametrize("user_filter", [None, "warn"])
def test_a_lost_commit_is_not_reported_on_stderr_unless_the_user_asks(
    tmp_path: Path, user_filter: str | None
) -> None:
    """The engine warned on stderr at every lost compaction race, a condition upkeep handles
    (tens of lines a minute under load); its log filter now defaults to leaving that one out
    (``mimir_core.store.engine_log.LANCE_LOG_DEFAULT``), and a filter the user sets is kept."""
    import subprocess
    import sys

    env = _environment(user_filter)
    done = subprocess.run(
        [sys.executable, "-c", LOSE_A_COMMIT, str(tmp_path / "home")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "lost 1"
    warned = "Compaction commit failed" in done.stderr
    assert warned is (user_filter is not None), done.stderr


@pytest.mark.parametrize("user_filter", [None, "info"])
def test_any_first_import_of_the_engine_gets_the_default_log_filter(
    user_filter: str | None,
) -> None:
    """The filter is set when a store module that loads the engine is imported, so a process
    whose first Lance import is not a ``Store`` (``mimir doctor``'s integrity checks) gets it."""
    import subprocess
    import sys

    env = _environment(user_filter)
    probe = "import os, mimir_core.store.integrity, lance; print(os.environ['LANCE_LOG'])"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (user_filter or "warn,lance::dataset::optimize=error")
