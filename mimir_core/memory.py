"""The :class:`Mimir` facade: the one object every adapter calls."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .embed.core import CachedEmbedder, Embedder, make_embedder
from .errors import InvalidInputError, MimirError, NotFoundError, StoreError, short
from .ingest import lost as _lost
from .ingest import spool as _spool
from .ingest.validate import (
    ALL_SCOPES,
    MAX_K,
    RECORD_FIELDS,
    build_experience,
    normalize_outcome,
    normalize_time,
    scope_key,
)
from .lessons import api as _lessons
from .search.recall import DEFAULT_TUNING as RECALL_TUNING
from .search.recall import RecallTuning
from .search.recall import recall as _recall
from .search.recommend import DEFAULT_TUNING as RECOMMEND_TUNING
from .search.recommend import RecommendTuning
from .search.recommend import recommend as _recommend
from .search.scoring import KV_SCORING, Scoring
from .settings import MimirSettings, load_settings, valid_half_life
from .store.core import (
    AUDIT,
    EXPERIENCE_COLUMNS,
    EXPERIENCES,
    KV,
    LESSONS,
    TABLES,
    Store,
    experience_row,
    row_experience,
)
from .store.filters import LIVE, Eq, Filter, In, Range, all_of
from .text import dumps
from .types import (
    OUTCOMES,
    AuditEvent,
    ConsolidationReport,
    Experience,
    Hit,
    Lesson,
    LessonDetail,
    Recommendation,
    Stats,
)

if TYPE_CHECKING:
    from .lessons.judge import Judge

log = logging.getLogger("mimir")


def _check_text(field: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(field, f"must be a non-empty string; got {short(value)}", value)
    return value


def _check_k(value: object, field: str = "k") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_K:
        raise InvalidInputError(field, f"must be an integer from 1 to {MAX_K}; got {short(value)}")
    return value


def _check_home(value: object) -> Path:
    text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(text, str) or not text.strip():  # Path("") would be the cwd
        raise InvalidInputError("home", f"must be a non-empty path; got {short(value)}", value)
    return Path(text).expanduser()


def _check_half_life(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not valid_half_life(value):
        raise InvalidInputError(
            "half_life_days", f"must be a finite number of days > 0; got {short(value)}", value
        )
    return float(value)


class Mimir:
    """Experience-driven memory for agents, on one shared LanceDB store.

    ``Mimir(home=None, *, store_uri=None, embedder=None, scope=None)``: arguments left at ``None``
    are filled from :class:`~mimir_core.settings.MimirSettings` (``MIMIR_HOME`` or ``~/.mimir``,
    ``MIMIR_STORE_URI``, ``MIMIR_EMBEDDER``...). The store and the embedding model load lazily,
    on first use.

    >>> m = Mimir("/tmp/mimir-doc", embedder="hash")        # doctest: +SKIP
    >>> m.record("run the test suite", "pytest -x", "failure", reason="ModuleNotFoundError")
    """

    def __init__(
        self,
        home: str | Path | None = None,
        *,
        store_uri: str | None = None,
        embedder: Embedder | str | None = None,
        scope: str | None = None,
        storage_options: Mapping[str, str] | None = None,
        half_life_days: float | None = None,
        redact_patterns: Sequence[str] = (),
        settings: MimirSettings | None = None,
        signing_key: str | bytes | None = None,
        auto_consolidate: bool | None = None,
    ) -> None:
        needs_settings = home is None or embedder is None or store_uri is None
        s = settings or (load_settings() if needs_settings else None)
        self.home = _check_home(home if home is not None else s.home if s else None)
        self.store_uri = store_uri or (s.store_uri if s else None) or str(self.home / "store")
        self.storage_options = dict(storage_options or (s.storage_options if s else {}) or {})
        self.scope = scope if scope is not None else (s.scope if s else None)
        self.half_life_days = _check_half_life(
            half_life_days if half_life_days is not None else (s.half_life_days if s else None)
        )
        self.redact_patterns = tuple(redact_patterns or (s.redact_patterns if s else ()))
        if isinstance(self.scope, str):  # the key as records store it (no secret in it)
            self.scope = scope_key(self.scope, self.redact_patterns)
        self._embedder_spec: Embedder | str = embedder or (s.embedder if s else "fastembed")
        self._configured: Embedder | None = None
        self._embedder: CachedEmbedder | None = None
        self._store: Store | None = None
        self._lock = threading.RLock()
        self.recall_tuning: RecallTuning = RECALL_TUNING
        self.recommend_tuning: RecommendTuning = RECOMMEND_TUNING
        self.kv_scoring: Scoring = KV_SCORING
        # Lessons: the HMAC key (explicit, else <home>/keys/signing.key) and auto-consolidation.
        if signing_key is None and s is not None and s.signing_key is not None:
            signing_key = s.signing_key.get_secret_value()
        self._signing_key_spec: str | bytes | None = signing_key
        self._signing_key_bytes: bytes | None = None
        self._signing_key_problem: str | None = None
        # Team memory (lessons/trust.py): the author key, the trust view, untrusted lessons.
        self._author_key: Any = None
        self._author_published = False
        self._trust_cache: Any = None
        self._untrusted: dict[str, str] | None = None
        self.auto_consolidate = bool(
            auto_consolidate
            if auto_consolidate is not None
            else (s.auto_consolidate if s else False)
        )
        self.auto_consolidate_failures = s.auto_consolidate_failures if s else 5
        self.auto_consolidate_hours = s.auto_consolidate_hours if s else 4.0
        self._auto_checked_at = 0.0
        self._auto_short = 0  # failures still missing at the last check (lessons.auto.due)

    @classmethod
    def from_settings(
        cls,
        settings: MimirSettings,
        *,
        home: str | Path | None = None,
        store_uri: str | None = None,
        embedder: Embedder | str | None = None,
        scope: str | None = None,
        storage_options: Mapping[str, str] | None = None,
        half_life_days: float | None = None,
        redact_patterns: Sequence[str] = (),
        signing_key: str | bytes | None = None,
        auto_consolidate: bool | None = None,
    ) -> Mimir:
        """A Mimir configured entirely from ``settings`` (what adapters call); an argument given
        here overrides its setting, one left at ``None`` comes from ``settings``."""
        return cls(
            home,
            store_uri=store_uri,
            embedder=embedder,
            scope=scope,
            storage_options=storage_options,
            half_life_days=half_life_days,
            redact_patterns=redact_patterns,
            settings=settings,
            signing_key=signing_key,
            auto_consolidate=auto_consolidate,
        )

    # -- lazy parts ------------------------------------------------------------------------------

    @property
    def embedder(self) -> CachedEmbedder:
        """The active embedder (loaded on first use): the configured one, or the variant of its
        model that made an existing store's vectors (see :meth:`FastEmbedder.for_store`). So the
        store is opened first: nothing is embedded before the variant is known."""
        with self._lock:
            if self._embedder is None:
                _ = self.store
            assert self._embedder is not None
            return self._embedder

    def _configured_embedder(self) -> Embedder:
        with self._lock:
            if self._configured is None:
                models = self.home / "models" / "minilm-int8"
                self._configured = make_embedder(self._embedder_spec, models)
            return self._configured

    @property
    def store(self) -> Store:
        """The opened store (created and migrated on first use)."""
        with self._lock:
            if self._store is None:
                self._store = self._open_store(check_embedder=True)
            return self._store

    def _open_store(self, *, check_embedder: bool) -> Store:
        self._ensure_home()
        configured = self._configured_embedder()
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

    def _ensure_home(self) -> None:
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

    def _now(self) -> datetime:
        return datetime.now(timezone.utc)

    # -- writing ---------------------------------------------------------------------------------

    def record(
        self,
        task: str,
        action: str,
        outcome: str,
        *,
        score: float | None = None,
        reason: str | None = None,
        context: Mapping[str, Any] | None = None,
        scope: str | None = None,
        source: str | None = None,
        session_id: str | None = None,
        thread_id: str | None = None,
        recalled_lesson_ids: Sequence[str] | None = None,
        created_at: datetime | float | str | None = None,
        idempotency_key: str | None = None,
    ) -> Experience:
        """Record one experience and return it as stored.

        With an ``idempotency_key``, recording the same key again returns the stored experience
        instead of a duplicate (safe across processes). Raises :class:`InvalidInputError`.
        """
        return self.record_many(
            [
                {
                    "task": task,
                    "action": action,
                    "outcome": outcome,
                    "score": score,
                    "reason": reason,
                    "context": context,
                    "scope": scope,
                    "source": source,
                    "session_id": session_id,
                    "thread_id": thread_id,
                    "recalled_lesson_ids": recalled_lesson_ids,
                    "created_at": created_at,
                    "idempotency_key": idempotency_key,
                }
            ]
        )[0]

    def record_failure(
        self,
        task: str,
        action: str,
        reason: str,
        *,
        score: float | None = None,
        context: Mapping[str, Any] | None = None,
        scope: str | None = None,
        source: str | None = None,
        session_id: str | None = None,
        thread_id: str | None = None,
        recalled_lesson_ids: Sequence[str] | None = None,
        created_at: datetime | float | str | None = None,
        idempotency_key: str | None = None,
    ) -> Experience:
        """Record a failed attempt with the reason it failed (:meth:`record`'s other keywords)."""
        _check_text("reason", reason)
        return self.record(
            task,
            action,
            "failure",
            score=score,
            reason=reason,
            context=context,
            scope=scope,
            source=source,
            session_id=session_id,
            thread_id=thread_id,
            recalled_lesson_ids=recalled_lesson_ids,
            created_at=created_at,
            idempotency_key=idempotency_key,
        )

    def record_many(self, items: Iterable[Mapping[str, Any] | Experience]) -> list[Experience]:
        """Record a batch in one write (one embedding batch, one append). Returns them stored.

        Items are mappings of :meth:`record`'s arguments. Every item is validated before
        anything is written: one bad item raises and stores nothing.
        """
        return self._record_batch(items)[0]

    def _record_batch(
        self, items: Iterable[Mapping[str, Any] | Experience]
    ) -> tuple[list[Experience], list[str]]:
        """:meth:`record_many`, plus the ids this call inserted (not already stored, by
        this process or a concurrent one), for reports that count what they added."""
        exps: list[Experience] = []
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            raise InvalidInputError("items", f"must be a list of mappings; got {short(items)}")
        for i, item in enumerate(items):
            if not isinstance(item, (Mapping, Experience)):
                raise InvalidInputError(f"items[{i}]", "must be a mapping of record() arguments")
            data = item.model_dump() if isinstance(item, Experience) else dict(item)
            for required in ("task", "action", "outcome"):
                if required not in data:
                    raise InvalidInputError(f"items[{i}].{required}", "is required")
            if isinstance(item, Experience):
                data["idempotency_key"] = data.get("idempotency_key") or item.id
            unknown = set(data) - RECORD_FIELDS - _EXPERIENCE_ONLY
            if unknown:
                raise InvalidInputError(sorted(unknown)[0], "is not an experience field")
            if data.get("scope") is None and self.scope is not None:
                data["scope"] = self.scope
            fields = {k: v for k, v in data.items() if k in RECORD_FIELDS}
            exps.append(build_experience(**fields, extra_patterns=self.redact_patterns))
        if not exps:
            return [], []
        emb = self.embedder
        vectors = emb.embed([e.task for e in exps] + [e.action for e in exps])
        n = len(exps)
        rows = []
        for i, exp in enumerate(exps):
            exp.embed_model = emb.name
            rows.append(experience_row(exp, vectors[i], vectors[n + i]))
        new_keys = {e.id for e in exps if e.idempotency_key is None}  # fresh uuid4 ids
        inserted = self.store.insert_grouped(EXPERIENCES, rows, new_keys=new_keys)
        # What this call inserted is what it built (no read back: ~5 ms of a single write);
        # only rows already stored under their key are read.
        new = set(inserted)
        stored: dict[str, Experience] = {}
        for row in rows:  # of rows sharing a key, the first is the one inserted
            if row["id"] in new and row["id"] not in stored:
                stored[row["id"]] = row_experience(row)
        others = [e.id for e in exps if e.id not in stored]
        if others:
            stored.update((e.id, e) for e in self._get_many(others))
        if inserted:  # the hooks' view of this project (only where hooks read one)
            from .observations.from_store import fold

            fresh = [i for i, e in enumerate(exps) if e.id in new and e.id in stored]
            fold(self, [stored[exps[i].id] for i in fresh], [vectors[i] for i in fresh])
        self._maybe_consolidate(sum(e.outcome == "failure" for e in exps))
        return [stored.get(e.id, e) for e in exps], inserted

    def _maybe_consolidate(self, failures: int = 0) -> None:
        """Start a background consolidation when enough new failures and time piled up."""
        if self.auto_consolidate:
            from .lessons.auto import maybe_start

            maybe_start(self, new_failures=failures)

    def supersede(self, old_id: str, new_id: str) -> None:
        """Mark ``old_id`` as superseded by ``new_id`` (both must exist; no cycles)."""
        _check_text("old_id", old_id)
        _check_text("new_id", new_id)
        if old_id == new_id:
            raise InvalidInputError("new_id", f"cannot supersede {old_id!r} with itself")
        with self.store.writing():
            self.get(old_id)
            cursor: str | None = new_id
            seen: set[str] = set()
            while cursor is not None and cursor not in seen:
                if cursor == old_id:
                    raise InvalidInputError(
                        "new_id", f"{new_id!r} is already superseded by {old_id!r} (a cycle)"
                    )
                seen.add(cursor)
                cursor = self.get(cursor).superseded_by
            self.store.update(EXPERIENCES, Eq("id", old_id), {"superseded_by": new_id})
            self.audit("api", old_id, "superseded", {"by": new_id})

    def forget(self, ident: str, *, with_experiences: bool = False) -> None:
        """Really remove an experience or lesson, including from older table versions.

        Forgetting a lesson with ``with_experiences=True`` also removes the experiences it was
        learned from; forgetting an experience also removes the lessons whose wording quotes it.
        """
        from .lessons.lifecycle import (
            forget_in_digests,
            forget_lesson,
            lessons_quoting,
            refresh_digest,
            scrub_audit,
        )

        _check_text("id", ident)
        where = Eq("id", ident)
        store = self.store
        table = EXPERIENCES if store.count(EXPERIENCES, where) else None
        if table is None and store.count(LESSONS, where):
            table = LESSONS
        if table is None:
            from .lessons.reconcile import acknowledge_missing

            if acknowledge_missing(self, ident):  # a lesson deleted outside Mimir: noted
                return
            raise NotFoundError("experience or lesson", ident)
        if table == LESSONS:
            forget_lesson(self, ident, with_experiences=with_experiences)
            return
        quoting = lessons_quoting(self, ident)
        forgotten = self._get_many([ident])
        store.delete(table, where)
        self._release_superseded([ident])
        store.purge(table)
        from .ingest.capture.episodes import scrub_sessions

        for e in forgotten:  # the hook's session state may still hold the steps it came from
            scrub_sessions(self.spool_dir, [e.action, e.reason or ""])
        scrub_audit(self, [ident])
        forget_in_digests(self, {e.scope for e in forgotten})
        self.audit("api", ident, "forgotten", {"table": table})
        for lesson_id in quoting:  # their wording quotes the forgotten text
            forget_lesson(self, lesson_id, with_experiences=False, actor="mimir")
        if not quoting:  # the digest's topic keywords come from the lessons' evidence texts
            refresh_digest(self)

    def _release_superseded(self, ids: Sequence[str]) -> None:
        """Experiences superseded by one of ``ids`` (just forgotten) are current again: a
        ``superseded_by`` naming a deleted experience would hide them forever."""
        if ids:
            where = In("superseded_by", ids)
            if self.store.count(EXPERIENCES, where):
                self.store.update(EXPERIENCES, where, {"superseded_by": None})

    def audit(self, actor: str, subject_id: str, event: str, detail: Mapping[str, Any]) -> None:
        """Append an entry to the audit log."""
        import uuid

        self.store.append(
            AUDIT,
            [
                {
                    "id": uuid.uuid4().hex,
                    "ts": self._now().timestamp(),
                    "actor": actor,
                    "subject_id": subject_id,
                    "event": event,
                    "detail": dumps(dict(detail)),
                }
            ],
        )

    # -- reading ---------------------------------------------------------------------------------

    def get(self, ident: str) -> Experience:
        """The experience with this id (:class:`NotFoundError` if none)."""
        found = self._get_many([_check_text("id", ident)])
        if not found:
            raise NotFoundError("experience", ident)
        return found[0]

    def _get_many(self, ids: Sequence[str]) -> list[Experience]:
        rows = self.store.select(EXPERIENCES, In("id", ids), EXPERIENCE_COLUMNS)
        return [row_experience(r) for r in rows]

    def _scope_filter(self, scope: str | None) -> tuple[Filter | None, str | None]:
        """(the filter on scope, scope to prefer) for a scope argument."""
        if scope is None:
            return None, self.scope
        if not isinstance(scope, str):
            raise InvalidInputError("scope", f"must be a string; got {short(scope)}")
        if scope == ALL_SCOPES:
            return None, None
        return Eq("scope", scope_key(scope, self.redact_patterns)), None

    def recall(
        self,
        query: str,
        k: int = 5,
        *,
        outcome: str | None = None,
        scope: str | None = None,
        since: datetime | float | str | None = None,
        include_superseded: bool = False,
    ) -> list[Hit]:
        """The relevant past attempts for ``query``, best first; empty when nothing is relevant.

        ``scope``: ``None`` prefers this instance's scope, ``"*"`` searches every project, any
        other string searches that project only.
        """
        _check_text("query", query)
        _check_k(k)
        self._drain_pending()
        by_scope, prefer = self._scope_filter(scope)
        where = all_of(
            by_scope,
            None if outcome is None else Eq("outcome", normalize_outcome(outcome)),
            None
            if since is None
            else Range("created_at", ge=normalize_time("since", since).timestamp()),
            None if include_superseded else LIVE,
        )
        hits = _recall(
            self.store,
            lambda: self.embedder.embed_one(query),  # embedded while full-text search runs
            query,
            k,
            where=where,
            prefer_scope=prefer,
            half_life_days=self.half_life_days,
            now=self._now(),
            tuning=self.recall_tuning,
        )
        self._maybe_consolidate()
        return hits

    def recommend(
        self,
        task: str,
        *,
        explore: bool = False,
        scope: str | None = None,
        seed: int | None = None,
    ) -> Recommendation | None:
        """The best-supported action for ``task`` with its confidence, or ``None``."""
        import numpy as np

        _check_text("task", task)
        self._drain_pending()
        by_scope, prefer = self._scope_filter(scope)
        rng = np.random.default_rng(seed)
        return _recommend(
            self.store,
            self.embedder.embed_one(task),
            task,
            where=all_of(by_scope, LIVE),
            explore=bool(explore),
            rng=rng,
            half_life_days=self.half_life_days,
            now=self._now(),
            prefer_scope=prefer,
            tuning=self.recommend_tuning,
        )

    def attempts(
        self,
        action: str,
        *,
        task: str | None = None,
        scope: str | None = None,
        match: str = "exact",
        min_similarity: float = 0.15,
        k: int = 20,
    ) -> list[Hit]:
        """Past attempts of this very action, newest first: "this command failed 3 times here".

        ``match="exact"``: the same action up to case, punctuation and spacing;
        ``"signature"``: any shell command with the same tools, subcommands and long flags
        (:func:`~mimir_core.search.actions.command_signature`; prose is still compared exactly).
        With ``task``, only attempts on at least loosely related tasks count (task cosine >=
        ``min_similarity``; each hit's ``similarity``), so a command failing on an unrelated
        task elsewhere is not held against it. ``scope``: ``None`` is this instance's project
        (every project when it has none), ``"*"`` every project, any other string that project.
        Superseded experiences are left out. Raises :class:`InvalidInputError`.
        """
        from .ingest.validate import MAX_ACTION
        from .redact.core import sanitize
        from .search.attempts import MATCHES, find_attempts

        _check_text("action", action)
        if task is not None:
            _check_text("task", task)
        _check_k(k)
        if match not in MATCHES:
            raise InvalidInputError(
                "match", f"must be one of {', '.join(MATCHES)}; got {short(match)}", match
            )
        if (
            isinstance(min_similarity, bool)
            or not isinstance(min_similarity, (int, float))
            or not -1.0 <= float(min_similarity) <= 1.0
        ):
            raise InvalidInputError(
                "min_similarity", f"must be a number from -1 to 1; got {short(min_similarity)}"
            )
        self._drain_pending()
        by_scope, _prefer = self._scope_filter(self.scope if scope is None else scope)
        stored = sanitize(action.strip(), limit=MAX_ACTION, extra_patterns=self.redact_patterns)
        return find_attempts(
            self.store,
            stored,
            where=all_of(by_scope, LIVE),
            match="signature" if match == "signature" else "exact",
            qvec=None if task is None else self.embedder.embed_one(task),
            min_similarity=float(min_similarity),
            k=k,
        )

    def before_tool(
        self,
        action: str,
        *,
        task: str | None = None,
        scope: str | None = None,
        budget_chars: int = 1000,
    ) -> str:
        """The repeat guard, for a host to show its agent as a tool is about to run: a fenced
        block saying that this very action (up to case and spacing) failed in this project on
        tasks like ``task`` and its newest try did too, and what worked instead; ``""`` when it
        has no such history (the usual answer). Facts, not a verdict: the host decides whether
        to run it. ``scope`` as in :meth:`attempts`. Raises :class:`InvalidInputError`."""
        return self._tool_block(action, task, scope, budget_chars, failed=False)

    def after_failure(
        self,
        action: str,
        *,
        task: str | None = None,
        scope: str | None = None,
        budget_chars: int = 1000,
    ) -> str:
        """For a host to show its agent right after ``action`` failed (call it before recording
        that failure): a fenced block saying whether it had failed here before on tasks like
        ``task``, and what worked instead on them; ``""`` when there is nothing to say."""
        return self._tool_block(action, task, scope, budget_chars, failed=True)

    def _tool_block(
        self, action: str, task: str | None, scope: str | None, budget: int, *, failed: bool
    ) -> str:
        from .observations.from_store import tool_lines
        from .tools.digest import render_block

        _check_text("action", action)
        if task is not None:
            _check_text("task", task)
        if scope is not None and not isinstance(scope, str):
            raise InvalidInputError("scope", f"must be a string; got {short(scope)}")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise InvalidInputError("budget_chars", f"must be a positive integer; got {budget!r}")
        self._drain_pending()
        from .ingest.validate import MAX_ACTION
        from .redact.core import sanitize

        stored = sanitize(action.strip(), limit=MAX_ACTION, extra_patterns=self.redact_patterns)
        lines = tool_lines(self, stored, task=task, scope=scope, failed=failed)
        return render_block([], budget, observations=[line.text for line in lines])

    def recent(self, n: int = 10, *, scope: str | None = None) -> list[Experience]:
        """The ``n`` most recently created experiences, newest first."""
        _check_k(n, "n")
        where, _prefer = self._scope_filter(scope)
        table = self.store.column(EXPERIENCES, ["id", "created_at"], where)
        if table.num_rows == 0:
            return []
        ids = table.column("id").to_pylist()
        ts = table.column("created_at").to_pylist()
        newest = [i for _t, i in sorted(zip(ts, ids, strict=True), reverse=True)[:n]]
        got = {e.id: e for e in self._get_many(newest)}
        return [got[i] for i in newest if i in got]

    def stats(self) -> Stats:
        """Counts by outcome, source and scope, lessons by status, and store facts."""
        store = self.store
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
            store_uri=self.store_uri,
            schema_version=int(store.meta().get("schema_version", "0")),
            embedder=self.embedder.name,
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

    # -- the capture spool -----------------------------------------------------------------------

    @property
    def spool_dir(self) -> Path:
        """Where hooks spool this store's captured records (``<home>/spool/...``)."""
        return _spool.spool_dir(self.home, self.store_uri)

    def ingest(self, *, compact: bool = True, lock_timeout: float = 60.0) -> _spool.DrainReport:
        """Drain the records hooks captured into the store, exactly once (see :mod:`.spool`).

        Records are stored in batches by the idempotency key each hook generated, so a drain
        that crashed half-way is simply run again. Lines that are not valid records are set
        aside in ``rejected.jsonl`` and counted in the report, never dropped silently. Episodes
        left open by a host that died are closed first. Raises :class:`StoreError`.
        """
        from pydantic import ValidationError

        from .ingest.capture import Capture
        from .observations.attempt_digest import digest_dir

        directory = self.spool_dir
        _spool.ensure_private_dir(digest_dir(directory))  # hooks read what the drain stores
        report = _spool.drain(
            directory,
            lambda items: self.record_many(items),
            is_invalid=lambda exc: isinstance(exc, (InvalidInputError, ValidationError)),
            lock_timeout=lock_timeout,
            before=lambda: Capture(directory, scope=self.scope).close_stale(),
        )
        if report.ingested and compact:  # the records are in: compaction is best effort
            self.store.maybe_optimize(EXPERIENCES, now=True)
        if report.rejected:
            log.warning(
                "set aside %d bad spool line(s) in %s",
                report.rejected,
                directory / "rejected.jsonl",
            )
        gone = _lost.read(directory)
        if gone is not None and gone.count > gone.reported:  # each loss is reported once here
            report.lost = gone.describe()
            log.warning("%s; they cannot be recovered", report.lost)
            _lost.mark_reported(directory)
        return report

    def _drain_pending(self) -> None:
        """Ingest records captured a moment ago before a read (a ``stat`` when there are none).

        A read never fails because of the spool: a drain error is logged and the read goes on."""
        if not _spool.has_pending(self.spool_dir):
            return
        try:
            self.ingest(compact=False, lock_timeout=10.0)
        except MimirError as exc:
            log.warning("could not drain the capture spool: %s", exc)

    # -- lessons (bodies in lessons/api.py) -------------------------------------------------------

    def lessons(
        self,
        query: str,
        k: int = 5,
        *,
        scope: str | None = None,
        min_confidence: float | None = None,
    ) -> list[Lesson]:
        """Active, verified lessons relevant to ``query``; empty when none clears the bar.

        ``scope``: ``None`` serves every project's lessons but prefers this instance's scope,
        ``"*"`` every project alike, any other string that project's lessons and global ones.
        ``min_confidence`` defaults to 0.2 (the 5% lower bound of the lesson's claim).
        Records captured a moment ago are ingested first.
        """
        self._drain_pending()
        return _lessons.lessons(self, query, k, scope=scope, min_confidence=min_confidence)

    def context(self, query: str, *, budget_chars: int = 2000, scope: str | None = None) -> str:
        """The block every adapter injects into a prompt: relevant lessons fenced as data.

        Each lesson is shown with its id and confidence inside ``<mimir-memory>`` ...
        ``</mimir-memory>`` with a note that it is recalled memory, not instructions (plus, when
        the evidence is strong, a recommendation that is not yet a lesson). Never longer than
        ``budget_chars``; ``""`` when nothing relevant clears the bar. Records captured a moment
        ago are ingested first.
        """
        self._drain_pending()
        return _lessons.context(self, query, budget_chars=budget_chars, scope=scope)

    def consolidate(
        self, *, dry_run: bool = False, judge: Judge | None = None, force: bool = False
    ) -> ConsolidationReport:
        """Distil new experiences into candidate lessons, gate, sign and admit them.

        Without ``judge`` it is deterministic and needs no LLM. It only looks at what changed
        since the last run (``force=True``: everything); when another process is consolidating
        the same store it returns at once with ``ran=False``. ``dry_run`` writes nothing.
        Records captured a moment ago are ingested first; a file that cannot be written (a full
        disk) is a :class:`StoreError`.
        """
        self._drain_pending()
        return _lessons.consolidate(self, dry_run=dry_run, judge=judge, force=force)

    def get_lesson(self, ident: str) -> Lesson:
        """The lesson with this id (signature verified: a failing one comes back quarantined)."""
        return _lessons.get_lesson(self, ident)

    def lesson_detail(self, ident: str) -> LessonDetail:
        """The lesson, its supporting and contradicting experiences and its audit trail."""
        return _lessons.lesson_detail(self, ident)

    def list_lessons(
        self, *, status: str | None = None, scope: str | None = None, limit: int = 100
    ) -> list[Lesson]:
        """Lessons, newest first, optionally filtered by status (or ``"untrusted"``) and scope."""
        return _lessons.list_lessons(self, status=status, scope=scope, limit=limit)

    def audit_log(self, subject_id: str | None = None, *, limit: int = 100) -> list[AuditEvent]:
        """Audit entries, newest first (all of them, or one subject's)."""
        return _lessons.audit_log(self.store, subject_id, limit=limit)

    def pin_lesson(self, ident: str, *, pinned: bool = True, actor: str = "api") -> Lesson:
        """Pin (or unpin) a lesson: pinned lessons are never quarantined automatically."""
        return _lessons.pin_lesson(self, ident, pinned=pinned, actor=actor)

    def quarantine_lesson(self, ident: str, reason: str, *, actor: str = "api") -> Lesson:
        """Stop serving a lesson (kept on record, with the reason in the audit log)."""
        return _lessons.stop_lesson(self, ident, "quarantined", reason, actor)

    def retire_lesson(self, ident: str, reason: str, *, actor: str = "api") -> Lesson:
        """Retire a lesson for good (kept on record, invalid from now on)."""
        return _lessons.stop_lesson(self, ident, "retired", reason, actor)

    def lesson_feedback(
        self,
        lesson_id: str,
        helped: bool,
        *,
        task: str | None = None,
        note: str | None = None,
        actor: str = "api",
        session_id: str | None = None,
    ) -> None:
        """Evidence from an agent on whether a recalled lesson helped (for the circuit breaker).

        It moves the lesson's confidence, and a lesson that credibly hurts is quarantined at
        once (unless pinned). Feedback on a lesson that is not active is recorded only.
        Feedback counts by independent source (``session_id``, else ``actor``): however often
        one session or client says a lesson hurt, that is one outcome, not many.
        """
        _lessons.lesson_feedback(
            self, lesson_id, helped, task=task, note=note, actor=actor, session_id=session_id
        )

    # -- maintenance -----------------------------------------------------------------------------

    def reindex(self, batch: int = 256) -> int:
        """Re-embed everything (experiences, lessons, kv documents) with the configured embedder.

        Returns how many experiences. Safe to rerun: each old table is kept as a backup table
        until the new one is complete.
        """
        from .hosting.kv import reembed_rows

        with self._lock:
            store = self._store or self._open_store(check_embedder=False)
            self._store = store
        # The configured embedder, even if this store was opened with the variant that matched
        # its old vectors: reindexing is how a store moves to it.
        emb = CachedEmbedder(self._configured_embedder())
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
                    experience_row(exp, vecs[i], vecs[len(chunk) + i])
                    for i, exp in enumerate(chunk)
                ]
                parts.append(store.arrow_table(EXPERIENCES, rows))
            new = store.arrow_table(EXPERIENCES, [], parts)
            store.replace_table(EXPERIENCES, new)
            lessons = store.column(LESSONS, [*store.lesson_columns(), "vector"]).to_pylist()
            if lessons:
                from .lessons.lifecycle import author_key, row_valid, signing_key
                from .lessons.storage import rebind

                vecs = emb.embed([str(r["trigger"]) for r in lessons])
                valid = [row_valid(self, dict(r))[1] for r in lessons]
                rebind(lessons, vecs, signing_key(self), author_key(self), valid)
            store.replace_table(LESSONS, lessons)
            docs = store.column(KV, [f.name for f in store.table(KV).schema]).to_pylist()
            reembed_rows(docs, emb, batch=batch)
            store.replace_table(KV, docs)
            store.set_meta({"embed_model": emb.name, "dim": str(emb.dim)})
        with self._lock:
            self._embedder, store.embed_model = emb, emb.name
        self.audit(
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

    def compact(self) -> None:
        """Compact every table of the store and clean old versions now (normally automatic)."""
        for name in TABLES:
            self.store.optimize(name)

    def close(self) -> None:
        """Release the store handle (the next call reopens it), once its pending upkeep is
        done: a closed Mimir leaves no thread of its own behind."""
        with self._lock:
            store, self._store = self._store, None
        if store is not None:
            store.close()

    def __enter__(self) -> Mimir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_EXPERIENCE_ONLY = frozenset({"id", "superseded_by", "embed_model"})
