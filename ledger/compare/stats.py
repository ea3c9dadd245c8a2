"""Per-step timing statistics: medians, a distribution-free CI, and common-step comparison.

`ledger diff` summarises a timing metric by the median of per-step ratios B/A over the steps both
runs share. Step times are skewed and occasionally wild (a slow checkpoint write, a heat pause that
slipped through), so the interval makes no distributional assumption: it is the classic
order-statistic interval for a median. With n sorted values x(1) <= ... <= x(n), the interval
[x(k), x(n+1-k)] covers the true median with probability 1 - 2 * P(Binomial(n, 1/2) <= k - 1),
whatever the distribution (for continuous data). We take the largest k that keeps this coverage at
or above the requested confidence. The computation is exact (integer arithmetic), so the result is
deterministic. At 95% confidence it needs n >= 6; below that no interval is given.

`compare_timing` compares metrics of two runs over the steps BOTH have (see `ledger.compare.diffcore`
for why); a step overlapping a heat pause in either run is left out. A step's span is
[t_start, t_end] of its `StepRow`; a step without times cannot be checked and is kept. Beside
`perf/rollout_time` come `rollout/response_len/mean` and the derived
`perf/rollout_time_per_1k_tokens` = rollout_time / (response_len_mean / 1000), seconds of rollout
per thousand tokens of mean response length, on exactly the steps rollout time was compared on:
it separates "the engine got slower" from "the model writes longer answers".
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Iterable, KeysView, Mapping, Sequence
from fnmatch import fnmatchcase
from fractions import Fraction
from typing import NamedTuple

import msgspec

from ledger.metrics.table import StepRow

ROLLOUT_TIME = "perf/rollout_time"
RESPONSE_LEN = "rollout/response_len/mean"
ROLLOUT_TIME_PER_1K = "perf/rollout_time_per_1k_tokens"
DEFAULT_METRICS = (ROLLOUT_TIME, "perf/train_time", "perf/step_time", "perf/update_weights_time")
CONFIDENCE = 0.95
Pause = tuple[float, float]  # (start, end) unix seconds


def is_timing(name: str) -> bool:
    """Timing metrics are compared here as ratios; the others are learning metrics (`learning.py`)."""
    return name.startswith("perf/") or name == RESPONSE_LEN or name.endswith("_time")


class MedianEstimate(msgspec.Struct, frozen=True):
    """A median with its order-statistic confidence interval (None when n is too small)."""

    n: int
    median: float
    ci: tuple[float, float] | None
    confidence: float


def median(values: Sequence[float]) -> float:
    """The median of `values` (mean of the middle two for an even count); nan when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[mid])
    return (ordered[mid - 1] + ordered[mid]) / 2.0


EXACT_RANK_LIMIT = 1000  # above this many values the normal approximation is exact to the rank


@functools.lru_cache(maxsize=256)
def order_statistic_rank(n: int, confidence: float = 0.95) -> int | None:
    """The 1-based rank k of the lower interval bound x(k) for a median of n values.

    Returns the largest k with 1 - 2 * P(Bin(n, 1/2) <= k - 1) >= confidence, or None when even
    k = 1 (the full range) covers less than `confidence`. Exact up to `EXACT_RANK_LIMIT` values;
    beyond, the normal approximation of Bin(n, 1/2) (with continuity correction) is used, which
    the exact sums would only confirm at a much higher cost.
    """
    if n <= 0 or not 0.0 < confidence < 1.0:
        return None
    if n > EXACT_RANK_LIMIT:
        z = statistics.NormalDist().inv_cdf(1 - (1 - confidence) / 2)
        return max(1, math.floor(n / 2 - z * math.sqrt(n) / 2 + 0.5))
    # Exact: compare cumulative binomial counts against (1 - confidence) / 2 * 2**n.
    half_alpha = (1 - Fraction(str(confidence))) / 2
    limit = half_alpha * (1 << n)
    cumulative = 0  # sum of C(n, i) for i <= k - 1
    term = 1  # C(n, i)
    k = 0
    for i in range(n // 2 + 1):
        if cumulative + term > limit:
            break
        cumulative += term
        k = i + 1
        term = term * (n - i) // (i + 1)
    return k if k >= 1 else None


def median_with_ci(values: Sequence[float], confidence: float = 0.95) -> MedianEstimate:
    """The median of `values` and its distribution-free confidence interval.

    Non-finite values are dropped first. The interval is None when too few values remain for the
    requested confidence (n < 6 at 95%).
    """
    isfinite = math.isfinite
    clean = sorted([v for v in values if isfinite(v)])
    n = len(clean)
    med = median(clean)
    k = order_statistic_rank(n, confidence)
    ci = None if k is None else (float(clean[k - 1]), float(clean[n - k]))
    return MedianEstimate(n=n, median=med, ci=ci, confidence=confidence)


def ratio_median(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> MedianEstimate:
    """Median of the paired ratios b[i] / a[i], with its confidence interval.

    `a` and `b` are aligned (same steps, same order). Pairs where a[i] is zero or either side is
    not finite give no ratio and are skipped.
    """
    if len(a) != len(b):
        raise ValueError(f"paired sequences differ in length: {len(a)} != {len(b)}")
    ratios = [y / x for x, y in zip(a, b) if x != 0 and math.isfinite(x) and math.isfinite(y)]
    return median_with_ci(ratios, confidence)


class TimingResult(msgspec.Struct, frozen=True):
    """One metric compared over the steps both runs have (pauses excluded)."""

    metric: str
    common_steps: int
    only_a: list[int]
    only_b: list[int]
    excluded_paused: int
    median_a: float
    median_b: float
    median_ratio: float
    ratio_ci: tuple[float, float] | None
    confidence: float = CONFIDENCE


class StepLine(NamedTuple):
    """One line of `--steps`: the metric in each run and the ratio B/A (None where missing)."""

    step: int
    a: float | None
    b: float | None
    ratio: float | None
    diff: float | None = None  # B−A, for learning metrics


def metric_value(row: StepRow | None, metric: str) -> float | None:
    """A finite metric value of a row, including the derived per-1k-tokens rollout time."""
    if row is None:
        return None
    if metric == ROLLOUT_TIME_PER_1K:
        time, length = row.metrics.get(ROLLOUT_TIME), row.metrics.get(RESPONSE_LEN)
        if time is None or length is None or not length > 0:
            return None
        value = time / (length / 1000.0)
    else:
        found = row.metrics.get(metric)
        if found is None:
            return None
        value = found
    return value if math.isfinite(value) else None


def _paused(row: StepRow, pauses: Sequence[Pause]) -> bool:
    if not pauses or row.t_start is None or row.t_end is None:
        return False  # no times: cannot tell, keep the step
    return any(row.t_start < end and start < row.t_end for start, end in pauses)


def _values(rows: Mapping[int, StepRow], metric: str, steps: Iterable[int]) -> dict[int, float]:
    """step -> finite value of `metric`, for the given steps that have one."""
    if metric == ROLLOUT_TIME_PER_1K:  # `metric_value`'s derivation, inline: it runs over every step
        out = {}
        for s in steps:
            row = rows.get(s)
            if row is None:
                continue
            time, length = row.metrics.get(ROLLOUT_TIME), row.metrics.get(RESPONSE_LEN)
            if time is not None and length is not None and length > 0 and math.isfinite(value := time / (length / 1000.0)):
                out[s] = value
        return out
    # the common case runs over 10,000s of steps: one comprehension, `v - v == 0` is isfinite
    if steps is rows:
        return {s: v for s, row in rows.items() if (v := row.metrics.get(metric)) is not None and v - v == 0}
    return {s: v for s in steps if (row := rows.get(s)) is not None and (v := row.metrics.get(metric)) is not None and v - v == 0}


def expand_metrics(patterns: Iterable[str], available: Iterable[str]) -> list[str]:
    """Default metrics, then the metric names matching user fnmatch patterns, without repeats."""
    names = sorted(set(available))
    out = list(DEFAULT_METRICS)
    for pattern in patterns:
        matches = [n for n in names if fnmatchcase(n, pattern)] or [pattern]
        out.extend(m for m in matches if m not in out)
    return out


Column = dict[int, float]  # step -> finite value of one metric


def _steps(
    col_a: Column,
    col_b: Column,
    rows: tuple[Mapping[int, StepRow], Mapping[int, StepRow]],
    steps: Iterable[int] | None,
    pauses: tuple[Sequence[Pause], Sequence[Pause]],
) -> tuple[list[int], list[int], list[int], int]:
    """(kept common steps, only-A steps, only-B steps, paused count) for one metric."""
    have_a: set[int] | KeysView[int] = col_a.keys()
    have_b: set[int] | KeysView[int] = col_b.keys()
    if steps is not None:
        wanted = set(steps)
        have_a, have_b = have_a & wanted, have_b & wanted
    common = sorted(have_a & have_b)
    if pauses[0] or pauses[1]:
        kept = [s for s in common if not (_paused(rows[0][s], pauses[0]) or _paused(rows[1][s], pauses[1]))]
    else:
        kept = common
    return kept, sorted(have_a - have_b), sorted(have_b - have_a), len(common) - len(kept)


def _result(
    metric: str,
    col_a: Column,
    col_b: Column,
    split: tuple[list[int], list[int], list[int], int],
) -> TimingResult:
    kept, only_a, only_b, paused = split
    values_a = [col_a[s] for s in kept]
    values_b = [col_b[s] for s in kept]
    estimate = ratio_median(values_a, values_b, CONFIDENCE)
    return TimingResult(
        metric=metric,
        common_steps=len(kept),
        only_a=only_a,
        only_b=only_b,
        excluded_paused=paused,
        median_a=median(values_a),
        median_b=median(values_b),
        median_ratio=estimate.median,
        ratio_ci=estimate.ci,
    )


def compare_timing(
    rows_a: Mapping[int, StepRow],
    rows_b: Mapping[int, StepRow],
    metrics: Sequence[str] = (),
    pauses_a: Sequence[Pause] = (),
    pauses_b: Sequence[Pause] = (),
) -> list[TimingResult]:
    """Compare each metric over the steps both runs have, leaving out heat-paused steps.

    `metrics` are extra fnmatch patterns on top of `DEFAULT_METRICS`; a metric neither run has is
    left out. Rollout time brings `rollout/response_len/mean` and `perf/rollout_time_per_1k_tokens`
    along, compared on exactly the steps rollout time was compared on.
    """
    available: set[str] = set().union(*(row.metrics.keys() for rows in (rows_a, rows_b) for row in rows.values()))
    if ROLLOUT_TIME in available and RESPONSE_LEN in available:
        available.add(ROLLOUT_TIME_PER_1K)
    companions = (RESPONSE_LEN, ROLLOUT_TIME_PER_1K) if ROLLOUT_TIME in available else ()
    pauses = (pauses_a, pauses_b)
    rows = (rows_a, rows_b)
    results = []
    for metric in expand_metrics(metrics, available):
        if metric not in available or metric in companions or not is_timing(metric):
            continue  # a learning metric asked for with --metric goes to the learning section
        col_a, col_b = _values(rows_a, metric, rows_a), _values(rows_b, metric, rows_b)
        split = _steps(col_a, col_b, rows, None, pauses)
        results.append(_result(metric, col_a, col_b, split))
        if metric == ROLLOUT_TIME:
            for extra in companions:
                ea, eb = _values(rows_a, extra, split[0]), _values(rows_b, extra, split[0])
                extra_split = _steps(ea, eb, rows, split[0], ((), ()))
                if extra_split[0]:
                    results.append(_result(extra, ea, eb, extra_split))
    return results


def step_table(rows_a: Mapping[int, StepRow], rows_b: Mapping[int, StepRow], metric: str) -> list[StepLine]:
    """Every step either run has, with the metric in A and B and the ratio B/A."""
    out = []
    for step in sorted(set(rows_a) | set(rows_b)):
        a, b = metric_value(rows_a.get(step), metric), metric_value(rows_b.get(step), metric)
        if a is None and b is None:
            continue
        ratio = b / a if a is not None and b is not None and a != 0 else None
        out.append(StepLine(step, a, b, ratio))
    return out
