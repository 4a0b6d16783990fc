"""Stale lessons fade: a lesson whose action stopped behaving as it says goes back to candidate.

The world drifts: a fix that worked for months stops working after an upgrade. A lesson is
admitted on its topic's whole history, and a long good record keeps that whole tally qualifying
long after the action turned, so neither mining nor the circuit breaker (which needs the lesson
to be credibly harmful against the topic's other outcomes) notices soon. Fading looks only at
what happened since the lesson was served:

* **Fade.** Take the newest :data:`WINDOW` outcomes of an active ``prefer``/``avoid`` lesson's
  action recorded after the evidence it was admitted on (in its scope when it has one). With at
  least :data:`MIN_FRESH` of them, the lesson fades when its claim ("the action works" for
  ``prefer``, "it fails" for ``avoid``) is credibly below the bar it was admitted at: the 95%
  upper bound of the claim's Jeffreys posterior on them is below ``PREFER_MIN_RATE`` (0.75;
  for ``avoid``, ``1 - AVOID_MAX_RATE``). Three failures in a row of a ``prefer`` action do it
  (upper bound 0.44), as do 1 of 4 (0.56) or 2 of 6 (0.66); an action that works 80% of the
  time does it in about 2% of windows. The lesson becomes a ``candidate`` (not served), kept
  with its audit trail (event ``faded``); pinned lessons never fade.
* **Not admitted stale.** For the same reason a candidate is not admitted, whatever the gate
  says of its whole history, while its action's newest tries in the evidence the gate weighed
  already break it by the same rule (:func:`broken`): it would fade at the next run.
* **Return.** A faded lesson is re-admitted only on evidence gathered since it faded: at least
  :data:`MIN_FRESH` outcomes whose own tally makes the lesson again (the miner's rule), besides
  passing the ε-gate. Otherwise the old history would re-admit it at the next run. The same
  holds for a new lesson of the same action in another scope while one faded (the miner
  narrows a faded global rule to the projects whose old tallies still make it): it waits for
  fresh outcomes in its own scope (:func:`made_again`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..search.actions import command_signature
from ..search.beta import jeffreys_lower_bound
from .evidence import Exp, claim_evidence, same_action
from .mine import AVOID_MAX_RATE, PREFER_MIN_RATE, tally_kind

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..types import Lesson

    Vec = npt.NDArray[np.float32]

#: The newest outcomes of the action looked at.
WINDOW = 6
#: Outcomes needed to fade a lesson, or to bring a faded one back.
MIN_FRESH = 3
#: Provenance key: the time (epoch seconds) up to which evidence was seen when it faded.
FADED_AT = "faded_at"
#: Provenance key: the newest evidence (epoch seconds) when the lesson was admitted; what
#: happened after it is what the lesson has been served against. (Older lessons: valid_from.)
ADMITTED_UNTIL = "admitted_until"


def _bar(kind: str) -> float:
    return PREFER_MIN_RATE if kind == "prefer" else 1.0 - AVOID_MAX_RATE


def _key(lesson: Lesson) -> tuple[str, str | None]:
    key = str(lesson.provenance.get("action_key") or "")
    return key, command_signature(lesson.action) if lesson.action else None


def _since(lesson: Lesson, topic: Sequence[Exp], after: float) -> list[Exp]:
    return [
        e for e in topic if e.created_at > after and (not lesson.scope or e.scope == lesson.scope)
    ]


def _admitted(lesson: Lesson) -> float:
    until = lesson.provenance.get(ADMITTED_UNTIL)
    return float(until) if until is not None else lesson.valid_from.timestamp()


def _newest_break(
    kind: str, key: str, sig: str | None, avec: Vec, exps: Sequence[Exp]
) -> str | None:
    """How the action's newest :data:`WINDOW` tries among ``exps`` break a ``prefer``/``avoid``
    claim (credibly below its bar, with at least :data:`MIN_FRESH`), or ``None``."""
    tried = [e for e in exps if same_action(key, sig, avec, e)]
    newest = sorted(tried, key=lambda e: (e.created_at, e.id))[-WINDOW:]
    _sup, _con, held, broke = claim_evidence(kind, key, sig, avec, newest)
    if held + broke < MIN_FRESH:
        return None
    upper = 1.0 - jeffreys_lower_bound(broke, held)
    bar = _bar(kind)
    if upper >= bar:
        return None
    verb = "worked" if kind == "prefer" else "failed"
    return (
        f"its action {verb} {held:g} of its last {held + broke:g} tries "
        f"(95% upper bound {upper:.2f} < {bar:.2f})"
    )


def stale(lesson: Lesson, avec: Vec, topic: Sequence[Exp]) -> str | None:
    """Why an active lesson should fade (its fresh tally), or ``None`` while it holds."""
    if lesson.kind not in ("prefer", "avoid") or lesson.pinned or lesson.status != "active":
        return None
    why = _newest_break(lesson.kind, *_key(lesson), avec, _since(lesson, topic, _admitted(lesson)))
    return f"since it was admitted {why}" if why else None


def broken(kind: str, key: str, sig: str | None, avec: Vec, evidence: Sequence[Exp]) -> str | None:
    """Why a candidate must not be admitted now: its action's newest tries in ``evidence`` (what
    the gate weighed) already break it as :func:`stale` would; ``None`` when they do not."""
    if kind not in ("prefer", "avoid"):
        return None
    why = _newest_break(kind, key, sig, avec, evidence)
    return f"but lately {why}" if why else None


def made_again(
    kind: str, key: str, sig: str | None, avec: Vec, topic: Sequence[Exp], scope: str, since: float
) -> bool:
    """Whether the action's outcomes after ``since`` (in ``scope``, or anywhere for ``""``)
    make a ``kind`` lesson again: at least :data:`MIN_FRESH` of them, tallying the miner's way."""
    fresh = [e for e in topic if e.created_at > since and (not scope or e.scope == scope)]
    _sup, _con, held, broke = claim_evidence(kind, key, sig, avec, fresh)
    if held + broke < MIN_FRESH:
        return False
    return (tally_kind(held, broke) if kind == "prefer" else tally_kind(broke, held)) == kind


def may_return(lesson: Lesson, avec: Vec, topic: Sequence[Exp]) -> bool:
    """Whether a lesson may be (re-)admitted: always, unless it faded and the evidence since
    has not made it again."""
    faded_at = lesson.provenance.get(FADED_AT)
    if faded_at is None:
        return True
    key, sig = _key(lesson)
    return made_again(lesson.kind, key, sig, avec, topic, lesson.scope, float(faded_at))


__all__ = [
    "ADMITTED_UNTIL",
    "FADED_AT",
    "MIN_FRESH",
    "WINDOW",
    "broken",
    "made_again",
    "may_return",
    "stale",
]
