"""The evidence behind a lesson: its topic's experiences, who followed it, and its confidence.

* A lesson's **topic** is the group of experiences it was mined from (``provenance.topic_ids``);
  a later experience joins the topic when its task embedding's mean cosine to those experiences
  clears :data:`TOPIC_LINK` (the same average-linkage rule that formed the topic). A lesson
  without topic members (written by hand or by an old version) falls back to its trigger.
* **Following** a lesson: for ``prefer``/``procedure`` doing its action; for ``avoid`` doing
  anything else. "Its action" means what :func:`mimir_core.search.action_clusters.cluster_actions`
  would pool (identical normalised text, or an action-embedding cosine of at least
  ``action_threshold``) *and*, for shell commands, the same **command signature**: the tools,
  their subcommands and long flags (:func:`mimir_core.search.actions.command_signature`).
* **Confidence** is the 5% lower bound of the Beta posterior of the lesson's claim (the action
  works, or fails for ``avoid``) from scored evidence only: the topic's experiences of its action
  and explicit feedback. Nothing else moves it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..observations.tally import evidence_source, independence_weights
from ..search.actions import command_signature, normalise_action
from ..search.beta import jeffreys_lower_bound
from ..search.recommend import DEFAULT_TUNING
from ..store.core import EXPERIENCES, Store, arrow_rows, experience_fields
from ..store.filters import LIVE, Filter, In
from ..types import Lesson
from .gate import Outcome

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vec = npt.NDArray[np.float32]

#: Average-linkage threshold of task cosine that makes experiences one topic.
TOPIC_LINK = 0.34
#: Action cosine that makes two actions the same (recommend's pooling threshold).
SAME_ACTION = DEFAULT_TUNING.action_threshold
#: How many topic members a lesson keeps in its provenance (the newest).
MAX_TOPIC_IDS = 60

EXP_COLUMNS = [
    "id",
    "task",
    "action",
    "outcome",
    "score",
    "reason",
    "scope",
    "created_at",
    "recalled_lesson_ids",
    "session_id",
    "thread_id",
    "source",
    "vector",
    "action_vector",
]


@dataclass
class Exp:
    """An experience as consolidation sees it: its texts, outcome and both embeddings."""

    id: str
    task: str
    action: str
    outcome: str
    score: float
    reason: str
    scope: str
    created_at: float
    recalled: tuple[str, ...]
    vec: Vec
    avec: Vec
    key: str = field(default="")
    sig: str | None = None
    origin: str | None = None
    """The independent source its evidence counts under (``None``: unattributed; see
    :func:`~mimir_core.observations.tally.evidence_source`)."""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Exp:
        """The experience of a table row with its ``vector`` and ``action_vector``, from the
        store's one row decoder (:func:`~mimir_core.store.core.experience_fields`)."""
        import numpy as np

        f = experience_fields(row)
        action = f["action"]
        return cls(
            id=f["id"],
            task=f["task"],
            action=action,
            outcome=f["outcome"],
            score=f["score"],
            reason=f["reason"],
            scope=f["scope"],
            created_at=f["created_at"],
            recalled=tuple(f["recalled_lesson_ids"]),
            vec=np.asarray(row["vector"], dtype=np.float32),
            avec=np.asarray(row["action_vector"], dtype=np.float32),
            key=normalise_action(action),
            sig=command_signature(action),
            origin=evidence_source(f),
        )

    def as_row(self) -> dict[str, Any]:
        """The mapping :func:`mimir_core.search.action_clusters.cluster_actions` clusters."""
        return {
            "id": self.id,
            "action": self.action,
            "score": self.score,
            "created_at": self.created_at,
            "action_vector": self.avec,
            "session_id": self.origin,  # what evidence_source reads: the same source key
            "exp": self,
        }


def load_exps(store: Store, where: Filter | None) -> list[Exp]:
    """Experiences (with vectors) matching ``where``, oldest first (ties by id)."""
    exps = [Exp.from_row(r) for r in arrow_rows(store.column(EXPERIENCES, EXP_COLUMNS, where))]
    exps.sort(key=lambda e: (e.created_at, e.id))
    return exps


def load_by_ids(store: Store, ids: Sequence[str]) -> list[Exp]:
    """The experiences with these ids that still exist."""
    out: list[Exp] = []
    for start in range(0, len(ids), 500):
        out.extend(load_exps(store, In("id", ids[start : start + 500])))
    out.sort(key=lambda e: (e.created_at, e.id))
    return out


def centroid(vectors: Sequence[Vec]) -> Vec:
    """The mean of some unit vectors (not renormalised: ``v @ c`` is the mean cosine)."""
    import numpy as np

    mean: Vec = np.mean(np.stack(list(vectors)), axis=0).astype(np.float32)
    return mean


def same_action(key: str, sig: str | None, avec: Vec, exp: Exp) -> bool:
    """Whether ``exp`` did the action: same normalised text, or same command signature and a
    close action embedding."""
    return exp.key == key or (exp.sig == sig and float(avec @ exp.avec) >= SAME_ACTION)


def followed(lesson_kind: str, did_action: bool) -> bool:
    """Following an ``avoid`` lesson means not doing its action; otherwise doing it."""
    return not did_action if lesson_kind == "avoid" else did_action


def outcomes(
    kind: str,
    key: str,
    sig: str | None,
    avec: Vec,
    exps: Sequence[Exp],
    groups: dict[str, str] | None = None,
) -> list[Outcome]:
    """The topic's experiences as gate outcomes (did each follow the lesson?), each labelled
    with its action: ``groups[id]`` (the miner's action cluster), else its normalised text."""
    labels = groups or {}
    return [
        Outcome(
            e.id,
            e.score,
            followed(kind, same_action(key, sig, avec, e)),
            labels.get(e.id, e.key),
            e.origin,
        )
        for e in exps
    ]


def claim_evidence(
    kind: str, key: str, sig: str | None, avec: Vec, exps: Sequence[Exp]
) -> tuple[list[str], list[str], float, float]:
    """(supporting ids, contradicting ids, successes, failures) of the lesson's claim.

    The claim is "the action works" (``prefer``/``procedure``) or "the action fails" (``avoid``);
    a partial outcome counts by its score on both sides, and one source's many records with
    diminishing weight (:func:`~mimir_core.observations.tally.independence_weights`).
    """
    sup: list[str] = []
    con: list[str] = []
    s = f = 0.0
    did = [e for e in exps if same_action(key, sig, avec, e)]
    for e, ind in zip(did, independence_weights([e.origin for e in did]), strict=True):
        good = e.score if kind != "avoid" else 1.0 - e.score
        s += ind * good
        f += ind * (1.0 - good)
        (sup if good >= 0.5 else con).append(e.id)
    return sup, con, s, f


@lru_cache(maxsize=8192)
def lower_bound(successes: float, failures: float) -> float:
    """:func:`~mimir_core.search.beta.jeffreys_lower_bound`, memoised (tallies repeat a lot)."""
    return jeffreys_lower_bound(successes, failures)


def confidence(successes: float, failures: float) -> float:
    """The 5% lower bound of the claim's Beta posterior (rounded)."""
    return round(lower_bound(round(successes, 4), round(failures, 4)), 4)


#: Where a lesson's provenance keeps its feedback by source: ``{source: [helped, hurt]}``.
FEEDBACK_SOURCES = "feedback_sources"


def note_feedback(lesson: Lesson, helped: bool, source: str) -> None:
    """Count one piece of feedback on ``lesson`` from ``source`` (its session, else its actor:
    :func:`~mimir_core.observations.tally.source_key`)."""
    if helped:
        lesson.feedback_helped += 1
    else:
        lesson.feedback_hurt += 1
    by = lesson.provenance.get(FEEDBACK_SOURCES)
    by = dict(by) if isinstance(by, dict) else {}
    h, u = _pair(by.get(source))
    by[source] = [h + int(helped), u + int(not helped)]
    lesson.provenance[FEEDBACK_SOURCES] = by


def _pair(value: object) -> tuple[int, int]:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        h, u = value
        if isinstance(h, int) and isinstance(u, int) and h >= 0 and u >= 0:
            return h, u
    return 0, 0


def feedback_scores(lesson: Lesson) -> list[float]:
    """A lesson's feedback as outcome scores, **one per independent source**: the share of that
    source's feedback that said it helped. Three "it hurt" from one client are one client's
    word, not three outcomes (one client could otherwise switch off a well-supported lesson).
    Feedback from before sources were kept counts as one source."""
    by = lesson.provenance.get(FEEDBACK_SOURCES)
    pairs = [_pair(v) for v in by.values()] if isinstance(by, dict) else []
    pairs = [p for p in pairs if p[0] + p[1] > 0]
    legacy = (
        max(lesson.feedback_helped - sum(h for h, _u in pairs), 0),
        max(lesson.feedback_hurt - sum(u for _h, u in pairs), 0),
    )
    if legacy[0] + legacy[1] > 0:
        pairs.append(legacy)
    return [h / (h + u) for h, u in pairs]


def apply_evidence(lesson: Lesson, key: str, avec: Vec, topic: Sequence[Exp]) -> Lesson:
    """Recompute a lesson's evidence lists, counts and confidence from its topic + feedback."""
    sig = command_signature(lesson.action) if lesson.action else None
    sup, con, s, f = claim_evidence(lesson.kind, key, sig, avec, topic)
    lesson.supporting_ids = sup
    lesson.contradicting_ids = con
    said = feedback_scores(lesson)
    lesson.successes = round(s + sum(said), 4)
    lesson.failures = round(f + sum(1.0 - x for x in said), 4)
    lesson.confidence = confidence(lesson.successes, lesson.failures)
    return lesson


def topic_of(
    store: Store, lesson: Lesson, trigger_vec: Vec, *, limit: int = 400
) -> tuple[Vec, list[Exp]]:
    """(topic centroid, the topic's current experiences) of a lesson."""
    ids = [str(i) for i in (lesson.provenance.get("topic_ids") or [])]
    members = load_by_ids(store, ids) if ids else []
    cen = centroid([e.vec for e in members]) if members else trigger_vec
    rows = store.vector_search(
        EXPERIENCES,
        cen,
        where=LIVE,
        limit=limit,
        columns=[c for c in EXP_COLUMNS if c != "vector"] + ["vector"],
    )
    floor = TOPIC_LINK if members else 0.5
    found = {e.id: e for e in members}
    for row in rows:
        exp = Exp.from_row(row)
        if exp.id not in found and float(exp.vec @ cen) >= floor:
            found[exp.id] = exp
    exps = sorted(found.values(), key=lambda e: (e.created_at, e.id))
    return cen, exps
