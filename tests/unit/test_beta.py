from __future__ import annotations

import math

import pytest

from mimir_core.search.beta import beta_cdf, beta_ppf, jeffreys_lower_bound


def _numeric_cdf(x: float, a: float, b: float, n: int = 20_000) -> float:
    """Midpoint integration of the Beta density after the substitution t = u**2 (tames a<1)."""
    log_norm = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    total = 0.0
    top = math.sqrt(x)
    h = top / n
    for i in range(n):
        u = (i + 0.5) * h
        t = u * u
        total += math.exp(log_norm + (a - 1) * math.log(t) + (b - 1) * math.log1p(-t)) * 2 * u
    return total * h


@pytest.mark.parametrize(("a", "b"), [(1, 1), (0.5, 0.5), (4.5, 1.5), (2.5, 10.5), (30.5, 3.5)])
@pytest.mark.parametrize("x", [0.05, 0.3, 0.5, 0.8])
def test_cdf_matches_numeric_integration(a: float, b: float, x: float) -> None:
    assert beta_cdf(x, a, b) == pytest.approx(_numeric_cdf(x, a, b), abs=5e-4)


def test_uniform_quantiles_are_identity() -> None:
    for q in (0.05, 0.25, 0.5, 0.95):
        assert beta_ppf(q, 1, 1) == pytest.approx(q, abs=1e-9)


def test_ppf_inverts_cdf() -> None:
    for a, b in [(0.5, 3.5), (5.5, 0.5), (12.5, 7.5)]:
        x = beta_ppf(0.05, a, b)
        assert beta_cdf(x, a, b) == pytest.approx(0.05, abs=1e-9)


def test_lower_bound_grows_with_evidence_and_is_honest() -> None:
    # the same 80% success rate is trusted more with more evidence
    few, many = jeffreys_lower_bound(4, 1), jeffreys_lower_bound(40, 10)
    assert few < many < 0.8
    assert jeffreys_lower_bound(0, 3) < 0.01
    assert jeffreys_lower_bound(0, 0) == pytest.approx(beta_ppf(0.05, 0.5, 0.5))


def test_bad_parameters_raise() -> None:
    with pytest.raises(ValueError, match="positive"):
        beta_cdf(0.5, 0, 1)
    with pytest.raises(ValueError, match="quantile"):
        beta_ppf(1.5, 1, 1)
