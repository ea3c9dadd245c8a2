"""The statistics of run-to-run noise: the t distribution, Welch's interval and the permutation test.

`ledger diff` judges a difference against the noise between replicas (runs one seed apart): the
unit is one run's mean over the common steps, so the tests below compare a few numbers per side.
The t distribution is computed here in pure Python (no scipy): its CDF through the regularized
incomplete beta function (a continued fraction, DLMF 8.17.22, evaluated with Lentz's method),
its quantile by Newton's method inside a bisection bracket. docs/noise.md has the method.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Sequence

import msgspec

from ledger.compare.stats import CONFIDENCE

_TINY = 1e-300
_EPS = 1e-14


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (converges fast for x < (a + 1) / (a + b + 2))."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    value = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)), -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            value *= c * d
        if abs(c * d - 1.0) < _EPS:
            break
    return value


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = a * math.log(x) + b * math.log1p(-x) + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` (> 0, not necessarily whole) degrees of freedom."""
    if math.isinf(df):
        return statistics.NormalDist().cdf(t)
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def _t_pdf(t: float, df: float) -> float:
    log = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi) - (df + 1) / 2 * math.log1p(t * t / df)
    return math.exp(log)


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with `df` degrees of freedom (inverse of `t_cdf`)."""
    if not 0.0 < p < 1.0 or not df > 0:
        raise ValueError(f"t quantile needs 0 < p < 1 and df > 0 (got p={p}, df={df})")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    z = statistics.NormalDist().inv_cdf(p)
    if math.isinf(df):
        return z
    low, high = 0.0, max(1.0, z)
    while t_cdf(high, df) < p:
        low, high = high, high * 4.0
    # Cornish-Fisher start (Abramowitz & Stegun 26.7.5), then Newton kept inside [low, high]
    t = z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df * df)
    t = t if low < t < high else (low + high) / 2
    for _ in range(100):
        gap = t_cdf(t, df) - p
        if gap > 0:
            high = t
        else:
            low = t
        if abs(gap) < 1e-13 or high - low < 1e-12 * max(1.0, t):
            break
        step = t - gap / _t_pdf(t, df)
        t = step if low < step < high else (low + high) / 2
    return t


class MeanDifference(msgspec.Struct, frozen=True):
    """B−A of per-run means with its confidence interval, as `replica_difference` computes it.

    `method`: `welch` (both sides have 2+ runs), `pooled-t` (one side has a single run: the other
    side's spread stands for both) or `exact` (every replica agrees bitwise: no spread at all).
    `noise_floor` is the pooled standard deviation of one run's mean (the spread between replicas).
    """

    diff: float
    ci: tuple[float, float]
    noise_floor: float
    df: float | None
    method: str
    confidence: float = CONFIDENCE

    @property
    def beyond(self) -> bool:
        """Whether the interval excludes zero."""
        low, high = self.ci
        return low > 0 or high < 0


def _variance(values: Sequence[float]) -> float:
    return statistics.variance(values) if len(values) > 1 else 0.0


def replica_difference(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE) -> MeanDifference | None:
    """B−A of the means of per-run values `a` and `b` (one number per replica), with its interval.

    Welch's t interval when both sides have at least two runs; with a single run on one side the
    pooled (Student) interval borrows the other side's spread; None when neither side has two runs
    (no spread to measure). When every replica of both sides gives the same value there is no
    noise: the interval is the difference itself.
    """
    na, nb = len(a), len(b)
    if na < 1 or nb < 1 or (na < 2 and nb < 2):
        return None
    diff = statistics.fmean(b) - statistics.fmean(a)
    va, vb = _variance(a), _variance(b)
    pooled = ((na - 1) * va + (nb - 1) * vb) / (na + nb - 2)
    floor = math.sqrt(pooled)
    if va == 0 and vb == 0:
        return MeanDifference(diff, (diff, diff), 0.0, None, "exact", confidence)
    if na >= 2 and nb >= 2:
        ea, eb = va / na, vb / nb
        se = math.sqrt(ea + eb)
        df = (ea + eb) ** 2 / ((ea * ea / (na - 1) if na > 1 else 0.0) + (eb * eb / (nb - 1) if nb > 1 else 0.0))
        method = "welch"
    else:
        se = floor * math.sqrt(1 / na + 1 / nb)
        df = float(na + nb - 2)
        method = "pooled-t"
    half = t_quantile(1 - (1 - confidence) / 2, df) * se
    return MeanDifference(diff, (diff - half, diff + half), floor, df, method, confidence)


PERMUTATION_MIN_RUNS = 4  # per side: 4 against 4 has 70 splits (smallest two-sided p 2/70 < 0.05)
PERMUTATION_MAX_SPLITS = 20000


def permutation_p(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Exact two-sided permutation p-value of the difference in means (None: too few or too many runs).

    Every split of the pooled runs into sides of the same sizes is tried; p is the share of splits
    whose |difference| is at least the observed one. Only with `PERMUTATION_MIN_RUNS` or more a
    side: 3 against 3 gives 20 splits, whose smallest two-sided p is 0.1, so it could never say 5%.
    """
    na, nb = len(a), len(b)
    if min(na, nb) < PERMUTATION_MIN_RUNS or math.comb(na + nb, na) > PERMUTATION_MAX_SPLITS:
        return None
    pooled = [float(v) for v in (*a, *b)]
    total = sum(pooled)
    observed = abs(statistics.fmean(b) - statistics.fmean(a)) * (1 - 1e-12)
    gaps = [abs((total - s) / nb - s / na) for s in map(sum, itertools.combinations(pooled, na))]
    return sum(g >= observed for g in gaps) / len(gaps)
