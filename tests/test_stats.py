"""Medians, the order-statistic confidence interval, and timing over common steps."""

from __future__ import annotations

import math
import random

import pytest

from ledger.compare.stats import (
    ROLLOUT_TIME_PER_1K,
    compare_timing,
    expand_metrics,
    median,
    median_with_ci,
    order_statistic_rank,
    ratio_median,
    step_table,
)
from ledger.metrics.table import StepRow


def test_median() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert math.isnan(median([]))


@pytest.mark.parametrize(("n", "k"), [(5, None), (6, 1), (10, 2), (20, 6), (100, 40)])
def test_order_statistic_rank_matches_tables(n: int, k: int | None) -> None:
    # Published 95% ranks for the median: n=10 -> (2, 9), n=20 -> (6, 15), n=100 -> (40, 61).
    assert order_statistic_rank(n, 0.95) == k


def test_rank_is_exact_at_the_boundary() -> None:
    # n=6: the full range covers 1 - 2/64 = 0.96875, so 0.96875 is met and 0.97 is not.
    assert order_statistic_rank(6, 0.96875) == 1
    assert order_statistic_rank(6, 0.97) is None


def test_small_samples_have_no_interval() -> None:
    estimate = median_with_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    assert estimate.median == 3.0 and estimate.ci is None and estimate.n == 5


def test_interval_bounds_are_order_statistics() -> None:
    values = [float(v) for v in range(10, 0, -1)]  # 10 values, unsorted
    estimate = median_with_ci(values)
    assert estimate.ci == (2.0, 9.0)
    assert estimate.ci[0] <= estimate.median <= estimate.ci[1]


def test_non_finite_values_are_dropped() -> None:
    estimate = median_with_ci([1.0, math.nan, 2.0, math.inf, 3.0])
    assert estimate.n == 3 and estimate.median == 2.0


def test_coverage_is_near_nominal() -> None:
    rng = random.Random(1234)  # deterministic
    hits, trials = 0, 400
    true_median = 1.0  # lognormal(0, s) has median e**0
    for _ in range(trials):
        values = [rng.lognormvariate(0.0, 0.5) for _ in range(30)]
        ci = median_with_ci(values).ci
        assert ci is not None
        hits += ci[0] <= true_median <= ci[1]
    # The interval is conservative (>= 95% for n=30, exact coverage 95.7%).
    assert 0.92 <= hits / trials <= 0.99


def test_ratio_median_pairs_and_skips_zero_denominators() -> None:
    estimate = ratio_median([1.0, 2.0, 0.0, 4.0], [2.0, 4.0, 5.0, 8.0])
    assert estimate.n == 3 and estimate.median == 2.0
    with pytest.raises(ValueError, match="differ in length"):
        ratio_median([1.0], [1.0, 2.0])


def rows(times: dict[int, float], extra: dict[str, dict[int, float]] | None = None) -> dict[int, StepRow]:
    """Rows with perf/rollout_time per step, each step spanning [step*10, step*10+10)."""
    out = {}
    for step, value in times.items():
        metrics = {"perf/rollout_time": value}
        for name, by_step in (extra or {}).items():
            if step in by_step:
                metrics[name] = by_step[step]
        out[step] = StepRow(step, step * 10.0, step * 10.0 + 10.0, metrics)
    return out


def falling(steps: range, scale: float = 1.0) -> dict[int, float]:
    """Step times that fall with the step number, so naive all-step medians lie."""
    return {s: scale * (100.0 - 2.0 * s) for s in steps}


def test_b_with_more_steps_compares_common_steps_only() -> None:
    a = rows(falling(range(20)))
    b = rows(falling(range(30), scale=1.1))  # 10% slower on every step, and 10 more (fast) steps
    naive_ratio = median(list(falling(range(30), 1.1).values())) / median(list(falling(range(20)).values()))
    assert naive_ratio < 1.0  # the naive comparison says B is faster

    (result,) = compare_timing(a, b)
    assert result.metric == "perf/rollout_time"
    assert result.common_steps == 20
    assert result.only_a == [] and result.only_b == list(range(20, 30))
    assert result.median_ratio == pytest.approx(1.1)
    assert result.ratio_ci == pytest.approx((1.1, 1.1))
    assert result.median_a == median(list(falling(range(20)).values()))
    assert result.median_b == pytest.approx(1.1 * result.median_a)


def test_partial_overlap_names_unshared_steps() -> None:
    a = rows(falling(range(20)))
    b = rows(falling(range(5, 30), scale=0.8))
    (result,) = compare_timing(a, b)
    assert result.common_steps == 15
    assert result.only_a == [0, 1, 2, 3, 4]
    assert result.only_b == list(range(20, 30))
    assert result.median_ratio == pytest.approx(0.8)
    assert result.median_a == median([100.0 - 2.0 * s for s in range(5, 20)])


def test_heat_paused_steps_are_excluded_and_counted() -> None:
    a = rows(dict.fromkeys(range(10), 10.0))
    b = rows(dict.fromkeys(range(10), 12.0))
    a[3].metrics["perf/rollout_time"] = 1000.0  # the paused steps are outliers
    b[7].metrics["perf/rollout_time"] = 1000.0
    (result,) = compare_timing(a, b, pauses_a=[(35.0, 36.0)], pauses_b=[(75.0, 76.0)])
    assert result.excluded_paused == 2
    assert result.common_steps == 8
    assert result.median_a == 10.0 and result.median_b == 12.0
    assert result.ratio_ci == pytest.approx((1.2, 1.2))
    # A pause touching no step's span changes nothing.
    (untouched,) = compare_timing(a, b, pauses_a=[(500.0, 600.0)])
    assert untouched.excluded_paused == 0 and untouched.common_steps == 10


def test_rollout_time_brings_length_and_per_1k_tokens_on_the_same_steps() -> None:
    a = rows(
        dict.fromkeys(range(8), 100.0),
        {"rollout/response_len/mean": dict.fromkeys(range(8), 2000.0)},
    )
    # B: 20% slower, but answers 50% longer -> per-token rollout is faster. Step 2 is paused in B.
    b = rows(
        dict.fromkeys(range(8), 120.0),
        {"rollout/response_len/mean": dict.fromkeys(range(8), 3000.0)},
    )
    b[2].metrics["rollout/response_len/mean"] = 1.0  # would skew the medians if not excluded
    results = {r.metric: r for r in compare_timing(a, b, pauses_b=[(25.0, 26.0)])}
    assert list(results) == [
        "perf/rollout_time",
        "rollout/response_len/mean",
        ROLLOUT_TIME_PER_1K,
    ]
    assert all(r.common_steps == 7 for r in results.values())
    assert results["rollout/response_len/mean"].median_ratio == pytest.approx(1.5)
    per_1k = results[ROLLOUT_TIME_PER_1K]
    assert per_1k.median_a == pytest.approx(50.0)  # 100 s / 2k tokens
    assert per_1k.median_b == pytest.approx(40.0)  # 120 s / 3k tokens
    assert per_1k.median_ratio == pytest.approx(0.8)


def test_user_patterns_add_metrics_and_defaults_absent_from_both_are_left_out() -> None:
    extra = {
        "perf/train_time": {0: 1.0, 1: 1.0},
        "perf/log_probs_time": {0: 2.0, 1: 2.0},
    }
    a = rows({0: 1.0, 1: 1.0}, extra)
    b = rows({0: 2.0, 1: 2.0}, extra)
    names = [r.metric for r in compare_timing(a, b, metrics=["perf/log_*"])]
    assert names == ["perf/rollout_time", "perf/train_time", "perf/log_probs_time"]
    assert expand_metrics(["perf/*"], ["perf/b", "perf/a"])[-2:] == ["perf/a", "perf/b"]


def test_step_table_lists_every_step_with_ratio() -> None:
    a = rows({0: 10.0, 1: 20.0})
    b = rows({1: 30.0, 2: 5.0})
    assert step_table(a, b, "perf/rollout_time") == [
        (0, 10.0, None, None, None),
        (1, 20.0, 30.0, 1.5, None),
        (2, None, 5.0, None, None),
    ]
