"""The :class:`Mimir` facade: the one object every adapter calls."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .deps import AutoConsolidation, Deps
from .embed.core import CachedEmbedder, Embedder
from .errors import InvalidInputError, short
from .ingest import record as _record
from .ingest import spool as _spool
from .ingest.validate import (
    ALL_SCOPES as ALL_SCOPES,  # re-exported: the facade's bounds (tests/unit/test_tools.py)
)
from .ingest.validate import (
    MAX_K,
    normalize_outcome,
    normalize_time,
    scope_key,
)
from .lessons import api as _lessons
from .search.recall import RecallTuning
from .search.recall import recall as _recall
from .search.recommend import RecommendTuning, recommend_in
from .search.scoring import Scoring
from .settings import MimirSettings, load_settings, valid_half_life
from .store.core import (
    TABLES,
    Store,
)
from .store.filters import LIVE, Eq, Range, all_of
from .types import (
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
        home_path = _check_home(home if home is not None else s.home if s else None)
        patterns = tuple(redact_patterns or (s.redact_patterns if s else ()))
        the_scope = scope if scope is not None else (s.scope if s else None)
        if isinstance(the_scope, str):  # the key as records store it (no secret in it)
            the_scope = scope_key(the_scope, patterns)
        # Lessons: the HMAC key (explicit, else <home>/keys/signing.key) and auto-consolidation.
        if signing_key is None and s is not None and s.signing_key is not None:
            signing_key = s.signing_key.get_secret_value()
        #: What the internals take instead of this facade (see :mod:`mimir_core.deps`).
        self.deps = Deps(
            home_path,
            store_uri=store_uri or (s.store_uri if s else None) or str(home_path / "store"),
            storage_options=storage_options or (s.storage_options if s else {}) or {},
            scope=the_scope,
            half_life_days=_check_half_life(
                half_life_days if half_life_days is not None else (s.half_life_days if s else None)
            ),
            redact_patterns=patterns,
            embedder_spec=embedder or (s.embedder if s else "fastembed"),
            signing_key_spec=signing_key,
            auto=AutoConsolidation(
                enabled=bool(
                    auto_consolidate
                    if auto_consolidate is not None
                    else (s.auto_consolidate if s else False)
                ),
                failures=s.auto_consolidate_failures if s else 5,
                hours=s.auto_consolidate_hours if s else 4.0,
            ),
        )

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

    # -- settings (read from the dependencies object) -------------------------------------------

    @property
    def home(self) -> Path:
        """The home directory (keys, spool, logs, models; the store unless ``store_uri``)."""
        return self.deps.home

    @property
    def store_uri(self) -> str:
        """Where the LanceDB store lives (a path or an object-store URI)."""
        return self.deps.store_uri

    @property
    def storage_options(self) -> dict[str, str]:
        """The object store's options (credentials, region), as given."""
        return self.deps.storage_options

    @property
    def half_life_days(self) -> float | None:
        """How fast old experiences weigh less in recall and recommend (``None``: never)."""
        return self.deps.half_life_days

    @property
    def redact_patterns(self) -> tuple[str, ...]:
        """Extra regular expressions redacted from everything stored, on top of the built-in
        ones."""
        return self.deps.redact_patterns

    @property
    def scope(self) -> str | None:
        """This handle's project: records without one get it, reads prefer it."""
        return self.deps.scope

    @scope.setter
    def scope(self, value: str | None) -> None:
        self.deps.scope = value

    @property
    def auto_consolidate(self) -> bool:
        """Whether enough new failures start a consolidation in the background."""
        return self.deps.auto.enabled

    @auto_consolidate.setter
    def auto_consolidate(self, value: bool) -> None:
        self.deps.auto.enabled = value

    @property
    def auto_consolidate_failures(self) -> int:
        """How many new failures make an automatic consolidation due."""
        return self.deps.auto.failures

    @auto_consolidate_failures.setter
    def auto_consolidate_failures(self, value: int) -> None:
        self.deps.auto.failures = value

    @property
    def auto_consolidate_hours(self) -> float:
        """The least time between two automatic consolidations."""
        return self.deps.auto.hours

    @auto_consolidate_hours.setter
    def auto_consolidate_hours(self, value: float) -> None:
        self.deps.auto.hours = value

    @property
    def recall_tuning(self) -> RecallTuning:
        """The recall scorer's constants (benchmarks tune them on a live handle)."""
        return self.deps.recall_tuning

    @recall_tuning.setter
    def recall_tuning(self, value: RecallTuning) -> None:
        self.deps.recall_tuning = value

    @property
    def recommend_tuning(self) -> RecommendTuning:
        """The recommender's constants (benchmarks tune them on a live handle)."""
        return self.deps.recommend_tuning

    @recommend_tuning.setter
    def recommend_tuning(self, value: RecommendTuning) -> None:
        self.deps.recommend_tuning = value

    @property
    def kv_scoring(self) -> Scoring:
        """The key-value store's search weights."""
        return self.deps.kv_scoring

    # -- lazy parts ------------------------------------------------------------------------------

    @property
    def embedder(self) -> CachedEmbedder:
        """The active embedder (loaded on first use): the configured one, or the variant of its
        model that made an existing store's vectors (see :meth:`FastEmbedder.for_store`). So the
        store is opened first: nothing is embedded before the variant is known."""
        return self.deps.embedder

    @property
    def store(self) -> Store:
        """The opened store (created and migrated on first use)."""
        return self.deps.store

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
        return _record.record_batch(self.deps, items)[0]

    def supersede(self, old_id: str, new_id: str) -> None:
        """Mark ``old_id`` as superseded by ``new_id`` (both must exist; no cycles)."""
        _check_text("old_id", old_id)
        _check_text("new_id", new_id)
        _record.supersede(self.deps, old_id, new_id)

    def forget(self, ident: str, *, with_experiences: bool = False) -> None:
        """Really remove an experience or lesson, including from older table versions.

        Forgetting a lesson with ``with_experiences=True`` also removes the experiences it was
        learned from; forgetting an experience also removes the lessons whose wording quotes it.
        Raises :class:`NotFoundError` when ``ident`` names neither.
        """
        from .ops.forget import forget

        forget(self.deps, _check_text("id", ident), with_experiences=with_experiences)

    def audit(self, actor: str, subject_id: str, event: str, detail: Mapping[str, Any]) -> None:
        """Append an entry to the audit log."""
        self.deps.audit(actor, subject_id, event, detail)

    # -- reading ---------------------------------------------------------------------------------

    def get(self, ident: str) -> Experience:
        """The experience with this id (:class:`NotFoundError` if none)."""
        return _record.get(self.deps, _check_text("id", ident))

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
        _record.drain_pending(self.deps)
        by_scope, prefer = self.deps.scope_filter(scope)
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
            now=self.deps.now(),
            tuning=self.recall_tuning,
        )
        _record.maybe_consolidate(self.deps)
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
        _check_text("task", task)
        _record.drain_pending(self.deps)
        return recommend_in(self.deps, task, explore=explore, scope=scope, seed=seed)

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
        _record.drain_pending(self.deps)
        by_scope, _prefer = self.deps.scope_filter(self.scope if scope is None else scope)
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
        _record.drain_pending(self.deps)
        from .ingest.validate import MAX_ACTION
        from .redact.core import sanitize

        stored = sanitize(action.strip(), limit=MAX_ACTION, extra_patterns=self.redact_patterns)
        lines = tool_lines(self.deps, stored, task=task, scope=scope, failed=failed)
        return render_block([], budget, observations=[line.text for line in lines])

    def recent(self, n: int = 10, *, scope: str | None = None) -> list[Experience]:
        """The ``n`` most recently created experiences, newest first."""
        from .ops.inventory import recent

        _check_k(n, "n")
        return recent(self.deps, n, scope)

    def stats(self) -> Stats:
        """Counts by outcome, source and scope, lessons by status, and store facts."""
        from .ops.inventory import stats

        return stats(self.deps)

    # -- the capture spool -----------------------------------------------------------------------

    @property
    def spool_dir(self) -> Path:
        """Where hooks spool this store's captured records (``<home>/spool/...``)."""
        return self.deps.spool_dir

    def ingest(self, *, compact: bool = True, lock_timeout: float = 60.0) -> _spool.DrainReport:
        """Drain the records hooks captured into the store, exactly once (see :mod:`.spool`).

        Records are stored in batches by the idempotency key each hook generated, so a drain
        that crashed half-way is simply run again. Lines that are not valid records are set
        aside in ``rejected.jsonl`` and counted in the report, never dropped silently. Episodes
        left open by a host that died are closed first. Raises :class:`StoreError`.
        """
        return _record.ingest(self.deps, compact=compact, lock_timeout=lock_timeout)

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
        _record.drain_pending(self.deps)
        return _lessons.lessons(self.deps, query, k, scope=scope, min_confidence=min_confidence)

    def context(self, query: str, *, budget_chars: int = 2000, scope: str | None = None) -> str:
        """The block every adapter injects into a prompt: relevant lessons fenced as data.

        Each lesson is shown with its id and confidence inside ``<mimir-memory>`` ...
        ``</mimir-memory>`` with a note that it is recalled memory, not instructions (plus, when
        the evidence is strong, a recommendation that is not yet a lesson). Never longer than
        ``budget_chars``; ``""`` when nothing relevant clears the bar. Records captured a moment
        ago are ingested first.
        """
        _record.drain_pending(self.deps)
        return _lessons.context(self.deps, query, budget_chars=budget_chars, scope=scope)

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
        _record.drain_pending(self.deps)
        return _lessons.consolidate(self.deps, dry_run=dry_run, judge=judge, force=force)

    def get_lesson(self, ident: str) -> Lesson:
        """The lesson with this id (signature verified: a failing one comes back quarantined)."""
        return _lessons.get_lesson(self.deps, ident)

    def lesson_detail(self, ident: str) -> LessonDetail:
        """The lesson, its supporting and contradicting experiences and its audit trail."""
        return _lessons.lesson_detail(self.deps, ident)

    def list_lessons(
        self, *, status: str | None = None, scope: str | None = None, limit: int = 100
    ) -> list[Lesson]:
        """Lessons, newest first, optionally filtered by status (or ``"untrusted"``) and scope."""
        return _lessons.list_lessons(self.deps, status=status, scope=scope, limit=limit)

    def audit_log(self, subject_id: str | None = None, *, limit: int = 100) -> list[AuditEvent]:
        """Audit entries, newest first (all of them, or one subject's)."""
        return _lessons.audit_log(self.store, subject_id, limit=limit)

    def pin_lesson(self, ident: str, *, pinned: bool = True, actor: str = "api") -> Lesson:
        """Pin (or unpin) a lesson: pinned lessons are never quarantined automatically."""
        return _lessons.pin_lesson(self.deps, ident, pinned=pinned, actor=actor)

    def quarantine_lesson(self, ident: str, reason: str, *, actor: str = "api") -> Lesson:
        """Stop serving a lesson (kept on record, with the reason in the audit log)."""
        return _lessons.stop_lesson(self.deps, ident, "quarantined", reason, actor)

    def retire_lesson(self, ident: str, reason: str, *, actor: str = "api") -> Lesson:
        """Retire a lesson for good (kept on record, invalid from now on)."""
        return _lessons.stop_lesson(self.deps, ident, "retired", reason, actor)

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
            self.deps, lesson_id, helped, task=task, note=note, actor=actor, session_id=session_id
        )

    # -- maintenance -----------------------------------------------------------------------------

    def reindex(self, batch: int = 256) -> int:
        """Re-embed everything (experiences, lessons, kv documents) with the configured embedder.

        Returns how many experiences. Safe to rerun: each old table is kept as a backup table
        until the new one is complete.
        """
        from .ops.reindex import reindex

        return reindex(self.deps, batch)

    def compact(self) -> None:
        """Compact every table of the store and clean old versions now (normally automatic)."""
        for name in TABLES:
            self.store.optimize(name)

    def close(self) -> None:
        """Release the store handle (the next call reopens it), once its pending upkeep is
        done: a closed Mimir leaves no thread of its own behind."""
        self.deps.close()

    def __enter__(self) -> Mimir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
