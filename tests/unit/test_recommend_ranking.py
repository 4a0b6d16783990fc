"""Recommend ranks only the head exactly: the head must equal ranking every option exactly."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from mimir_core.search import recommend as rec


class FakeCluster:
    """Just what the ranking reads of an action cluster: its evidence and how likely that
    evidence is this kind of task."""

    def __init__(self, sw: float, fw: float, p: float) -> None:
        self.sw, self.fw, self.p = sw, fw, p

    def evidence(self, *_args: object, **_kwargs: object) -> tuple[float, float]:
        return self.sw, self.fw

    def topic(self) -> float:
        return self.p


@pytest.mark.parametrize("seed", range(30))
def test_the_head_is_ranked_exactly_as_ranking_everything(seed: int) -> None:
    rng = random.Random(seed)
    q = 0.05
    bounded: list[tuple[float, Any, Any]] = []
    for i in range(rng.randint(1, 60)):
        sw = round(rng.uniform(0, 12), 3) * rng.choice([0, 1, 1, 1])
        fw = round(rng.uniform(0, 6), 3) * rng.choice([0, 1])
        p = rng.choice([1.0, round(rng.uniform(0.43, 1.0), 3)])
        up = rec._lower_bound(math.ceil(sw * 32.0) / 32.0, 0.0, q) * p  # as recommend() does
        bounded.append((up, FakeCluster(sw, fw, p), f"action-{i}"))
    exact = sorted((rec._lower_bound(c.sw, c.fw, q) * c.p for _u, c, _a in bounded), reverse=True)
    head_ranked = rec._exact_head(list(bounded), q, None, rec.DEFAULT_TUNING)
    got = sorted((r for r, _c, _a in head_ranked), reverse=True)
    head = min(rec.EXACT_HEAD, len(exact))
    assert got[:head] == pytest.approx(exact[:head], abs=1e-9)
    assert len(got) == len(exact)  # nothing dropped
