"""The dependencies of an open memory: what the internals take instead of the facade.

:class:`~mimir_core.Mimir` validates its arguments and delegates; the work happens in the
layers (``ingest/record.py``, ``lessons/``, ``observations/``, ``ops/``...). They take this
narrow object rather than the facade, so that a lesson function can be called and tested with no
facade at all, and nothing reaches into the facade's private state: everything an internal reads
or caches is a public field here (settings, the lazily opened store and embedder, the clock, the
per-handle caches in :class:`HandleState`).

Importing this module is cheap: the store and the embedders load on first use.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import StoreError

if TYPE_CHECKING:
    from .embed.core import CachedEmbedder, Embedder
    from .search.recall import RecallTuning
    from .search.recommend import RecommendTuning
    from .search.scoring import Scoring
    from .store.core import Store
    from .store.filters import Filter
    from .types import Experience


@dataclass
class HandleState:
    """What one open handle caches between calls (one per :class:`Deps`, never shared).

    Kept apart from the settings so that a reader sees at once which fields change as the
    handle is used: the verified signing key (or why it is unusable), this installation's author
    key and whether it was published, the team trust view, untrusted lessons, and the
    auto-consolidation check's timing.
    """

    signing_key_bytes: bytes | None = None
    signing_key_problem: str | None = None
    author_key: Any = None  # lessons.authors.AuthorKey, loaded on first signature
    author_published: bool = False
    trust_cache: Any = None  # (monotonic time, TrustView | None), see lessons.trust.view
    untrusted: dict[str, str] | None = None
    auto_checked_at: float = 0.0
    auto_short: int = 0  # failures still missing at the last check (lessons.auto.due)


@dataclass
class AutoConsolidation:
    """When to consolidate in the background (see :mod:`mimir_core.lessons.auto`)."""

    enabled: bool = False
    failures: int = 5
    hours: float = 4.0


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


class Deps:
    """An open memory's settings, store, embedder, clock and caches, for the internals.

    Built by :class:`~mimir_core.Mimir` from its validated arguments (or directly, by a test or
    a background process that needs no facade). Constructing one opens nothing: :attr:`store`
    and :attr:`embedder` load on first use, under one lock, and :meth:`close` releases them.
    ``clock`` is the time source of every timestamp the internals write (audit entries, lesson
    validity, consolidation runs), so a test can pin it.
    """

    def __init__(
        self,
        home: Path,
        *,
        store_uri: str,
        storage_options: Mapping[str, str] | None = None,
        scope: str | None = None,
        half_life_days: float | None = None,
        redact_patterns: Sequence[str] = (),
        embedder_spec: Embedder | str = "fastembed",
        signing_key_spec: str | bytes | None = None,
        auto: AutoConsolidation | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        from .search.recall import DEFAULT_TUNING as RECALL_TUNING
        from .search.recommend import DEFAULT_TUNING as RECOMMEND_TUNING
        from .search.scoring import KV_SCORING

        self.home = Path(home)
        self.store_uri = store_uri
        self.storage_options = dict(storage_options or {})
        self.scope = scope
        self.half_life_days = half_life_days
        self.redact_patterns = tuple(redact_patterns)
        self.embedder_spec: Embedder | str = embedder_spec
        self.signing_key_spec: str | bytes | None = signing_key_spec
        self.auto = auto if auto is not None else AutoConsolidation()
        self.clock: Callable[[], datetime] = clock or _utc_now
        self.recall_tuning: RecallTuning = RECALL_TUNING
        self.recommend_tuning: RecommendTuning = RECOMMEND_TUNING
        self.kv_scoring: Scoring = KV_SCORING
        self.state = HandleState()
        self.lock = threading.RLock()
        self._configured: Embedder | None = None
        self._embedder: CachedEmbedder | None = None
        self._store: Store | None = None

    # -- the clock -------------------------------------------------------------------------------

    def now(self) -> datetime:
        """The current time (UTC) by this handle's clock."""
        return self.clock()

    # -- lazy parts ------------------------------------------------------------------------------

    @property
    def loaded(self) -> frozenset[str]:
        """Which lazy parts are open now (``"store"``, ``"embedder"``): a cheap probe for tests
        and for upkeep that must not open a store just to look at it."""
        parts = {"store"} if self._store is not None else set()
        if self._embedder is not None:
            parts.add("embedder")
        return frozenset(parts)

    @property
    def store(self) -> Store:
        """The opened store (created and migrated on first use)."""
        with self.lock:
            if self._store is None:
                self._store = self._open_store(check_embedder=True)
            return self._store

    @property
    def embedder(self) -> CachedEmbedder:
        """The active embedder (loaded on first use): the configured one, or the variant of its
        model that made an existing store's vectors (see ``FastEmbedder.for_store``). So the
        store is opened first: nothing is embedded before the variant is known."""
        with self.lock:
            if self._embedder is None:
                _ = self.store
            assert self._embedder is not None
            return self._embedder

    def configured_embedder(self) -> Embedder:
        """The embedder the settings name (not necessarily the store's variant of it)."""
        from .embed.core import make_embedder

        with self.lock:
            if self._configured is None:
                models = self.home / "models" / "minilm-int8"
                self._configured = make_embedder(self.embedder_spec, models)
            return self._configured

    def store_for_reindex(self) -> Store:
        """The store, opened without checking that its vectors match the embedder (reindexing
        is how a store whose vectors do not match moves to the configured one)."""
        with self.lock:
            if self._store is None:
                self._store = self._open_store(check_embedder=False)
            return self._store

    def use_embedder(self, emb: CachedEmbedder) -> None:
        """Make ``emb`` the active embedder (after a reindex wrote its vectors)."""
        with self.lock:
            self._embedder = emb
            if self._store is not None:
                self._store.embed_model = emb.name

    def _open_store(self, *, check_embedder: bool) -> Store:
        from .embed.core import CachedEmbedder
        from .store.core import Store

        self.ensure_home()
        configured = self.configured_embedder()
        active = self._embedder.inner if self._embedder is not None else configured
        store = Store(
            self.store_uri,
            lock_path=self.home / "locks" / "store.lock",
            embed_model=active.name,  # what a new store records
            dim=active.dim,
            storage_options=self.storage_options,
            check_embedder=False,
        )
        if check_embedder:
            meta = store.meta()
            variant_for = getattr(configured, "for_store", None)
            variant = variant_for(meta.get("embed_model", "")) if variant_for else None
            active = variant or configured  # the store's vectors decide
            store.embed_model = active.name
            store.check_embedder(meta)
        if self._embedder is None or self._embedder.inner is not active:
            self._embedder = CachedEmbedder(active)
        return store

    def ensure_home(self) -> None:
        """Create the home (0700), or raise :class:`StoreError` saying why it cannot be."""
        try:
            self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        except (FileExistsError, NotADirectoryError):
            raise StoreError(f"home {self.home}: not a directory (a file is in the way)") from None
        except OSError as exc:
            raise StoreError(f"home {self.home}: cannot create it ({exc.strerror})") from exc
        try:
            self.home.chmod(0o700)
        except OSError:  # not ours to change (a shared mount): leave it
            pass

    def close(self) -> None:
        """Release the store handle (the next use reopens it), once its pending upkeep is done."""
        with self.lock:
            store, self._store = self._store, None
        if store is not None:
            store.close()

    # -- paths -----------------------------------------------------------------------------------

    @property
    def spool_dir(self) -> Path:
        """Where hooks spool this store's captured records (``<home>/spool/...``)."""
        from .ingest.spool import spool_dir

        return spool_dir(self.home, self.store_uri)

    # -- small shared reads and writes -----------------------------------------------------------

    def get_many(self, ids: Sequence[str]) -> list[Experience]:
        """The stored experiences with these ids (missing ones are left out)."""
        from .store.core import EXPERIENCE_COLUMNS, EXPERIENCES, row_experience
        from .store.filters import In

        rows = self.store.select(EXPERIENCES, In("id", ids), EXPERIENCE_COLUMNS)
        return [row_experience(r) for r in rows]

    def scope_filter(self, scope: str | None) -> tuple[Filter | None, str | None]:
        """(the filter on scope, the scope to prefer) for a read's ``scope`` argument: ``None``
        prefers this handle's scope, ``"*"`` is every project, any other string that project
        (as records store it). Raises :class:`InvalidInputError` for a non-string."""
        from .errors import InvalidInputError, short
        from .ingest.validate import ALL_SCOPES, scope_key
        from .store.filters import Eq

        if scope is None:
            return None, self.scope
        if not isinstance(scope, str):
            raise InvalidInputError("scope", f"must be a string; got {short(scope)}")
        if scope == ALL_SCOPES:
            return None, None
        return Eq("scope", scope_key(scope, self.redact_patterns)), None

    def audit(self, actor: str, subject_id: str, event: str, detail: Mapping[str, Any]) -> None:
        """Append an entry to the audit log, stamped by this handle's clock."""
        import uuid

        from .store.core import AUDIT
        from .text import dumps

        self.store.append(
            AUDIT,
            [
                {
                    "id": uuid.uuid4().hex,
                    "ts": self.now().timestamp(),
                    "actor": actor,
                    "subject_id": subject_id,
                    "event": event,
                    "detail": dumps(dict(detail)),
                }
            ],
        )

    def release_superseded(self, ids: Sequence[str]) -> None:
        """Experiences superseded by one of ``ids`` (just forgotten) are current again: a
        ``superseded_by`` naming a deleted experience would hide them forever."""
        from .store.core import EXPERIENCES
        from .store.filters import In

        if ids:
            where = In("superseded_by", ids)
            if self.store.count(EXPERIENCES, where):
                self.store.update(EXPERIENCES, where, {"superseded_by": None})
