"""Actions and their equivalent phrasings, clustered, with pooled evidence.

Recommend ranks clusters, not phrasings, and lesson mining mines them: "ran alembic upgrade
head first" and ``alembic upgrade head && pytest`` are one action. Two shell commands with
different signatures never pool (:func:`mimir_core.search.actions.command_signature`: ``pytest
tests/x`` is not ``alembic upgrade head && pytest tests/x``, however close their embeddings).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..observations.tally import evidence_source, independence_weights
from .actions import command_signature, normalise_action

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@dataclass
class ActionCluster:
    """One action and its equivalent phrasings, with pooled evidence."""

    vector: npt.NDArray[np.float32]
    key: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    sig: str | None = None
    """The command signature of its shell commands (``None``: prose only so far)."""
    _independence: list[float] | None = field(default=None, init=False, repr=False)
    _evidence: tuple[Any, tuple[float, float]] | None = field(default=None, init=False, repr=False)

    def independence(self) -> list[float]:
        """Each row's weight as evidence by its source: one session's many records of this
        action count with diminishing weight (:func:`~mimir_core.observations.tally.
        independence_weights`), so volume from one source cannot outvote independent ones."""
        if self._independence is None or len(self._independence) != len(self.rows):
            self._independence = independence_weights([evidence_source(r) for r in self.rows])
        return self._independence

    def counts(self, weighted: bool) -> tuple[float, float]:
        """(successes, failures), each record weighted by its source's independence and, when
        ``weighted``, by its relevance and recency."""
        s = f = 0.0
        for row, w, ind in zip(self.rows, self.weights, self.independence(), strict=True):
            mult = (w if weighted else 1.0) * ind
            score = float(row["score"])
            s += mult * score
            f += mult * (1.0 - score)
        return s, f

    def evidence(
        self, prefer_scope: str | None, *, recent_half_life: float, prior_strength: float
    ) -> tuple[float, float]:
        """(successes, failures) as evidence for the task at hand: what recommend's draw,
        ranking, confidence and point estimate are made from.

        * each record counts by its weight (in ``recommend``: how likely its task is this kind
          of task, :func:`mimir_core.search.family.family_probabilities`, so an exact match does not
          shut out the paraphrases; times the clock's decay when a half-life is set) and its
          source's independence;
        * an older outcome fades once newer ones of this action arrive (its weight halves with
          every ``recent_half_life`` newer outcomes; ``0``: no fading), so a fix that stopped
          working shows; recency runs within each side, as drift is per project;
        * other projects' evidence is worth at most ``prior_strength`` observations (the same
          fix may not work here). ``prefer_scope=None``: every record is this project's."""
        key = (prefer_scope, recent_half_life, prior_strength)
        if self._evidence is not None and self._evidence[0] == key:
            return self._evidence[1]
        here = [0.0, 0.0, 0.0]  # successes, failures, newer outcomes seen so far
        other = [0.0, 0.0, 0.0]
        half = recent_half_life
        order = sorted(
            zip(self.rows, self.weights, self.independence(), strict=True),
            key=lambda rwi: float(rwi[0]["created_at"]),
            reverse=True,
        )
        for row, w, ind in order:
            mine = prefer_scope is None or (row.get("scope") or "") == prefer_scope
            side = here if mine else other
            fade = 0.5 ** (side[2] / half) if half > 0 else 1.0
            score = float(row["score"])
            side[0] += w * ind * fade * score
            side[1] += w * ind * fade * (1.0 - score)
            side[2] += 1.0
        n_other = other[0] + other[1]
        scale = min(1.0, prior_strength / n_other) if n_other > 0 else 0.0
        found = (here[0] + scale * other[0], here[1] + scale * other[1])
        self._evidence = (key, found)
        return found

    def topic(self) -> float:
        """How likely its closest evidence is the same kind of task as the one at hand (the
        ``_topic`` recommend puts on each row; a row without one counts as certain)."""
        return max((float(row.get("_topic", 1.0)) for row in self.rows), default=0.0)

    def label(self) -> str:
        """The phrasing with the most success behind it (ties: the most recent)."""
        best: dict[str, float] = {}
        for row in self.rows:
            best[row["action"]] = best.get(row["action"], 0.0) + float(row["score"]) + 1e-6
        return max(best.items(), key=lambda kv: kv[1])[0]


def cluster_actions(
    rows: list[dict[str, Any]],
    weights: list[float],
    threshold: float,
    *,
    single_linkage: bool = True,
) -> list[ActionCluster]:
    """Greedy clustering of actions by identical normalised text or embedding cosine to any
    phrasing already in a cluster (single linkage: a cluster is not pinned to its first
    phrasing's wording).

    A shell command never joins a cluster holding a command of another signature (prose, which
    has none, pools by embedding alone: "ran the migrations first" may describe a command).
    ``single_linkage=False`` compares an action with each cluster's first phrasing only
    (stricter, no chaining: what lesson mining wants, as a lesson names one exact action).
    """
    return cluster_index(rows, weights, threshold, single_linkage=single_linkage).clusters


def cluster_index(
    rows: list[dict[str, Any]],
    weights: list[float],
    threshold: float,
    *,
    single_linkage: bool = True,
) -> ClusterIndex:
    """:func:`cluster_actions`, as the index that found the clusters (to look more actions up
    in them)."""
    import numpy as np

    index = ClusterIndex(threshold, single_linkage=single_linkage)
    for row, w in sorted(zip(rows, weights, strict=True), key=lambda rw: rw[0]["created_at"]):
        vec = np.asarray(row["action_vector"], dtype=np.float32)
        key = normalise_action(row["action"])
        sig = command_signature(row["action"])
        home = index.find(key, sig, vec)
        if home is None:
            home = index.add(ActionCluster(vector=vec, key=key, sig=sig))
        else:
            index.join(home, key, vec)
            if home.sig is None:
                home.sig = sig
        home.rows.append(row)
        home.weights.append(w)
    return index


class ClusterIndex:
    """Action clusters with their phrasings' vectors stacked, so that finding an action's
    cluster is one matrix product rather than a numpy call per cluster (~200 lookups per
    ``recommend``). An action belongs to the cluster of its closest indexed phrasing."""

    def __init__(self, threshold: float, *, single_linkage: bool = True) -> None:
        self.threshold = threshold
        self.single_linkage = single_linkage
        self.clusters: list[ActionCluster] = []
        self._by_key: dict[str, ActionCluster] = {}
        self._vectors: npt.NDArray[np.float32] | None = None
        self._owner: list[int] = []
        """The cluster (position in :attr:`clusters`) of each indexed phrasing's vector."""
        self._position: dict[int, int] = {}

    def add(self, cluster: ActionCluster) -> ActionCluster:
        """Index ``cluster`` (by its key and vector); returns it."""
        self.clusters.append(cluster)
        self._by_key.setdefault(cluster.key, cluster)
        self._position[id(cluster)] = len(self.clusters) - 1
        self._push(len(self.clusters) - 1, cluster.vector)
        return cluster

    def join(self, cluster: ActionCluster, key: str, vec: npt.NDArray[np.float32]) -> None:
        """Index one more phrasing of ``cluster`` (an action that joined it), so that later
        actions close to *any* of its phrasings find it (single linkage), not only those close
        to its first one: "terraform force-unlock 51d0…" and "ran terraform force-unlock with
        the lock ID" sit at cosine 0.66, each at 0.7 or more to a third phrasing of the fix.
        A phrasing already indexed (the same normalised text) adds nothing, and nothing is
        added without :attr:`single_linkage`."""
        if not self.single_linkage or key in self._by_key:
            return
        self._by_key[key] = cluster
        self._push(self._position[id(cluster)], vec)

    def _push(self, owner: int, vec: npt.NDArray[np.float32]) -> None:
        import numpy as np

        n = len(self._owner)
        if self._vectors is None or n == len(self._vectors):
            grown = np.zeros((max(8, 2 * n), len(vec)), dtype=np.float32)
            if self._vectors is not None:
                grown[:n] = self._vectors
            self._vectors = grown
        self._vectors[n] = vec
        self._owner.append(owner)

    def find(self, key: str, sig: str | None, vec: npt.NDArray[np.float32]) -> ActionCluster | None:
        """The cluster an action belongs to (same normalised text as one of its phrasings, else
        the cluster of the closest indexed phrasing at or above the threshold among clusters of
        a compatible command signature; ties go to the newer phrasing), or ``None``."""
        same = self._by_key.get(key)
        if same is not None or self._vectors is None:
            return same
        n = len(self._owner)
        sims = self._vectors[:n] @ vec
        best = n - 1 - int(sims[::-1].argmax())  # the newest of the closest
        if float(sims[best]) < self.threshold:
            return None  # the usual answer, without sorting
        cl = self.clusters[self._owner[best]]
        if sig is None or cl.sig is None or cl.sig == sig:
            return cl
        for i in sims.argsort(kind="stable")[::-1]:  # best first; ties: the newer one first
            if float(sims[i]) < self.threshold:
                break
            cl = self.clusters[self._owner[int(i)]]
            if sig is not None and cl.sig is not None and cl.sig != sig:
                continue  # two different commands, however close their embeddings
            return cl
        return None
