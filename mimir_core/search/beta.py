"""The Beta distribution's quantile, in pure Python (no scipy).

Used for honest confidences: the 5% lower bound of a Beta posterior.
"""

from __future__ import annotations

import math


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (Lentz's method)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-12:
            break
    return h


def beta_cdf(x: float, a: float, b: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if a <= 0 or b <= 0:
        raise ValueError(f"beta parameters must be positive, got a={a}, b={b}")
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def beta_ppf(q: float, a: float, b: float) -> float:
    """The q-quantile of Beta(a, b): Newton steps on the CDF, kept inside a shrinking bracket
    (a bisection step whenever Newton would leave it). Converges in ~5-10 CDF evaluations
    instead of the 60 of plain bisection, to within 1e-13 of the exact quantile."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    if a <= 0 or b <= 0:
        raise ValueError(f"beta parameters must be positive, got a={a}, b={b}")
    if q <= 0.0 or q >= 1.0:
        return q
    log_norm = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    lo, hi = 0.0, 1.0
    x = a / (a + b)
    for _ in range(200):
        err = beta_cdf(x, a, b) - q
        if err < 0:
            lo = x
        else:
            hi = x
        if hi - lo < 1e-15 or abs(err) < 1e-15:
            break
        pdf = math.exp(log_norm + (a - 1.0) * math.log(x) + (b - 1.0) * math.log1p(-x))
        step = x - err / pdf if pdf > 0 else -1.0
        if not lo < step < hi or abs(step - x) < 1e-16:
            step = (lo + hi) / 2.0  # Newton left the bracket (or stalled): bisect
        if abs(step - x) < 1e-14 * max(x, 1e-300):
            x = step
            break
        x = step
    return x


def jeffreys_lower_bound(successes: float, failures: float, q: float = 0.05) -> float:
    """The q lower bound of the Beta(0.5 + s, 0.5 + f) posterior (Jeffreys prior)."""
    return beta_ppf(q, 0.5 + max(successes, 0.0), 0.5 + max(failures, 0.0))
