"""Past attempts of one action: "this command failed 3 times in this project".

Recall and recommend start from the *task* and find what was tried on similar tasks. An agent
about to run a command can also ask the other way round: what happened every earlier time this
very action was tried here? Paraphrases of a task often embed below the topic thresholds (a
sentence model cannot tell every paraphrase of one task from a neighbouring task), but the action
itself is exact: the same command, or one with the same command signature.

Matching is pushed down to LanceDB: a ``where`` on the action column narrows the table to rows
holding every word of the action (or every token of its signature); only those few rows are
compared exactly here. With a ``task``, an attempt counts only if its task is at least loosely
related (task cosine >= ``min_similarity``), so ``pytest`` failing on an unrelated task does not
count against ``pytest`` here.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from ..store.core import EXPERIENCE_COLUMNS, EXPERIENCES, Store, row_experience
from ..store.filters import And, Eq, Filter, Like, Or
from ..types import Hit
from .actions import command_signature, normalise_action

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

Match = Literal["exact", "signature"]
MATCHES: tuple[str, ...] = ("exact", "signature")
#: Words of the action used in the pushed-down ``where`` (the longest ones: the most selective).
WHERE_WORDS = 6
_WORD = re.compile(r"\w+", re.UNICODE)


def _contains(word: str) -> Filter:
    """A ``where`` clause: the lower-cased action contains ``word`` (``_`` and ``%`` in a LIKE
    pattern only widen it; every row is compared exactly afterwards)."""
    return Like("action", "%" + word.replace(chr(92), "%") + "%", lower=True)


def action_where(action: str, match: Match) -> tuple[Filter, str | None]:
    """(the ``where`` narrowing the experiences to candidate rows, the signature to compare or
    ``None`` for an exact comparison of the normalised text). A prose action (no command
    signature) is always compared exactly."""
    sig = command_signature(action) if match == "signature" else None
    tokens = sig.split() if sig else _WORD.findall(action.lower())
    words = sorted(set(tokens), key=lambda w: (-len(w), w))[:WHERE_WORDS]
    exact = Eq("action", action)
    return (Or(exact, And(*(_contains(w) for w in words))) if words else exact), sig


def find_attempts(
    store: Store,
    action: str,
    *,
    where: Filter | None,
    match: Match,
    qvec: npt.NDArray[np.float32] | None,
    min_similarity: float,
    k: int,
) -> list[Hit]:
    """The ``k`` most recent attempts of ``action`` (newest first) among rows matching
    ``where``; with ``qvec``, only those whose task cosine to it is at least ``min_similarity``."""
    import numpy as np

    narrow, sig = action_where(action, match)
    columns = [*EXPERIENCE_COLUMNS, "vector"] if qvec is not None else EXPERIENCE_COLUMNS
    rows = store.select(EXPERIENCES, And(where, narrow) if where else narrow, columns)
    key = normalise_action(action)
    same = [
        r
        for r in rows
        if (command_signature(r["action"]) == sig if sig else normalise_action(r["action"]) == key)
    ]
    same.sort(key=lambda r: (-float(r["created_at"]), r["id"]))
    why = f"same command signature ({sig})" if sig else "same action"
    out: list[Hit] = []
    q = None
    if qvec is not None:
        q = np.asarray(qvec, dtype=np.float32)
        q = q / (float(np.linalg.norm(q)) or 1.0)
    for r in same:
        sim = 1.0
        if q is not None:
            v = np.asarray(r["vector"], dtype=np.float32)
            sim = float(v @ q) / (float(np.linalg.norm(v)) or 1.0)
            if sim < min_similarity:
                continue
        note = why if q is None else f"{why}, task similarity {sim:.2f}"
        terms = sig.split() if sig else []
        out.append(
            Hit(
                experience=row_experience(r),
                score=sim,
                similarity=sim,
                matched_terms=terms,
                why=note,
            )
        )
        if len(out) >= k:
            break
    return out


__all__ = ["MATCHES", "Match", "action_where", "find_attempts"]
