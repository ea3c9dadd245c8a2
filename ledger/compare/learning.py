"""What a change did to learning: training metrics of two runs compared step by step.

A loss or reward change is tested by two runs (usually two replays on the same recorded samples)
one setting apart. Each learning metric is compared on the step numbers BOTH runs logged:

- train-step metrics (`step N: {...}` lines, `train/loss`, `train/grad_norm`, ...) on train steps;
- per-rollout metrics (`rollout N`, `eval N`, event metrics by rollout id) on rollout ids.

For each metric: the common steps, mean and median per run, the median of per-step differences
B−A with the same distribution-free 95% interval as timing (`stats.median_with_ci`), the first
common step where the runs differ beyond float noise (`NOISE_REL`/`NOISE_ABS`), whether they
are bitwise identical on every common step before it, and the first step that is not. For replays
on identical samples the steps before the divergence should be bitwise identical; where they are
not, the first bitwise difference says whether the change acted below float noise from the step the
other metrics diverge at, or the runs differ where nothing was changed yet (nondeterminism).

Timing metrics (`perf/*`, response length) are not learning metrics: `stats.compare_timing` has them.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase

import msgspec

from ledger.compare.stats import CONFIDENCE, is_timing, median, median_with_ci
from ledger.metrics.table import MetricsTable

# The default learning metrics, as globs over the names the runs logged (one source for them).
DEFAULT_LEARNING = (
    "*loss*",
    "*grad_norm*",
    "*reward*",
    "*score*",
    "*accuracy*",
    "*/kl*",
    "*_kl*",
    "*kl_loss*",
    "*entropy*",
    "*clipfrac*",
    "*clip_frac*",
    "*clip_ratio*",
    "eval/*",
)
NOISE_REL = 1e-6  # relative difference below which two values are the same up to float noise
NOISE_ABS = 1e-12
FIRST_DIFFS = 10  # per-step differences kept from the divergence on (text and JSON)
TRAIN_AXIS, ROLLOUT_AXIS = "train step", "rollout"


class StepDiff(msgspec.Struct, frozen=True):
    """One common step of a learning metric: both values and B−A."""

    step: int
    a: float
    b: float
    diff: float


class LearningResult(msgspec.Struct, frozen=True):
    """One learning metric compared over the steps both runs logged it on."""

    metric: str
    axis: str  # TRAIN_AXIS or ROLLOUT_AXIS
    common_steps: int
    only_a: int
    only_b: int
    mean_a: float
    mean_b: float
    median_a: float
    median_b: float
    median_diff: float  # median of per-step B−A
    diff_ci: tuple[float, float] | None
    first_divergence: int | None  # first common step beyond float noise; None: never
    identical_before: bool  # bitwise equal on every common step before first_divergence
    first_diffs: list[StepDiff] = msgspec.field(default_factory=list)
    first_bitwise_difference: int | None = None  # first common step not bitwise equal; None: none
    confidence: float = CONFIDENCE


def _columns(table: MetricsTable | None, wanted: Sequence[str] | None = None) -> dict[str, tuple[str, dict[int, float]]]:
    """metric -> (axis, step -> finite value); train-step numbering wins where a metric has both.

    Only learning metrics matching `wanted` globs (all of them when None); each name is judged once.
    """
    out: dict[str, tuple[str, dict[int, float]]] = {}
    if table is None:
        return out
    keep: dict[str, bool] = {}

    def kept(name: str) -> bool:
        found = keep.get(name)
        if found is None:
            found = keep[name] = not is_timing(name) and (wanted is None or any(fnmatchcase(name, p) for p in wanted))
        return found

    # the names first (C-level), then one comprehension per learning metric: a run's rows hold
    # mostly timing metrics, which are never walked step by step here (`v - v == 0` is isfinite)
    rows = table.rows
    for name in dict.fromkeys(itertools.chain.from_iterable(row.metrics for row in rows.values())):
        if kept(name):
            col = {s: v for s, row in rows.items() if (v := row.metrics.get(name)) is not None and v - v == 0}
            if col:
                out[name] = (ROLLOUT_AXIS, col)
    steps = table.train_steps
    for name in dict.fromkeys(itertools.chain.from_iterable(steps.values())):
        if kept(name):
            col = {s: v for s, metrics in steps.items() if (v := metrics.get(name)) is not None and v - v == 0}
            if col:
                out[name] = (TRAIN_AXIS, col)
    return out


def logged_metrics(*tables: MetricsTable | None) -> list[str]:
    """Every metric name the runs logged (timing included), sorted: for "matched nothing" messages."""
    names: set[str] = set()
    for table in tables:
        if table is not None:
            for row in table.rows.values():
                names.update(row.metrics)
            for metrics in table.train_steps.values():
                names.update(metrics)
    return sorted(names)


def unmatched_patterns(patterns: Iterable[str], logged: Sequence[str]) -> list[str]:
    """The `--metric` globs that match no metric either run logged."""
    return [p for p in patterns if not any(fnmatchcase(n, p) for n in logged)]


def _same(a: float, b: float) -> bool:
    return a == b or abs(b - a) <= max(NOISE_ABS, NOISE_REL * max(abs(a), abs(b)))


def _compare(metric: str, axis: str, col_a: Mapping[int, float], col_b: Mapping[int, float]) -> LearningResult:
    common = sorted(col_a.keys() & col_b.keys())
    va, vb = [col_a[s] for s in common], [col_b[s] for s in common]
    diffs = [y - x for x, y in zip(va, vb)]
    first = next((i for i, (x, y) in enumerate(zip(va, vb)) if not _same(x, y)), None)
    before = common if first is None else common[:first]
    estimate = median_with_ci(diffs, CONFIDENCE)
    start = 0 if first is None else first
    return LearningResult(
        metric=metric,
        axis=axis,
        common_steps=len(common),
        only_a=len(col_a.keys() - col_b.keys()),
        only_b=len(col_b.keys() - col_a.keys()),
        mean_a=statistics.fmean(va) if va else math.nan,
        mean_b=statistics.fmean(vb) if vb else math.nan,
        median_a=median(va),
        median_b=median(vb),
        median_diff=estimate.median,
        diff_ci=estimate.ci,
        first_divergence=None if first is None else common[first],
        identical_before=all(col_a[s] == col_b[s] for s in before),
        first_diffs=[StepDiff(s, col_a[s], col_b[s], col_b[s] - col_a[s]) for s in common[start : start + FIRST_DIFFS]]
        if first is not None
        else [],
        first_bitwise_difference=next((s for s in common if col_a[s] != col_b[s]), None),
    )


def compare_learning(table_a: MetricsTable | None, table_b: MetricsTable | None, patterns: Sequence[str] = ()) -> list[LearningResult]:
    """Learning metrics (defaults + `patterns`) that both runs logged, compared on common steps.

    A metric one run logs per train step and the other per rollout is compared on rollout ids.
    """
    wanted = [*DEFAULT_LEARNING, *patterns]
    cols_a, cols_b = _columns(table_a, wanted), _columns(table_b, wanted)
    results = []
    for name in sorted(cols_a.keys() & cols_b.keys()):
        (axis_a, col_a), (axis_b, col_b) = cols_a[name], cols_b[name]
        if axis_a != axis_b:
            continue  # numbered differently in the two runs: no common step to compare on
        if col_a.keys() & col_b.keys():
            results.append(_compare(name, axis_a, col_a, col_b))
    return results


def step_diffs(table_a: MetricsTable | None, table_b: MetricsTable | None, metric: str) -> list[StepDiff] | None:
    """Every common step of a learning metric (for `--steps METRIC`), or None when not one."""
    cols_a, cols_b = _columns(table_a, [metric]), _columns(table_b, [metric])
    if metric not in cols_a or metric not in cols_b:
        return None
    col_a, col_b = cols_a[metric][1], cols_b[metric][1]
    return [StepDiff(s, col_a[s], col_b[s], col_b[s] - col_a[s]) for s in sorted(col_a.keys() & col_b.keys())]


def _num(value: float) -> float | None:
    return value if math.isfinite(value) else None


def learning_json(r: LearningResult) -> dict[str, object]:
    """One learning result as plain JSON data (schema in `ledger.compare.diffcore`)."""
    return {
        "metric": r.metric,
        "axis": r.axis,
        "common_steps": r.common_steps,
        "only_a": r.only_a,
        "only_b": r.only_b,
        "mean_a": _num(r.mean_a),
        "mean_b": _num(r.mean_b),
        "median_a": _num(r.median_a),
        "median_b": _num(r.median_b),
        "median_diff": _num(r.median_diff),
        "diff_ci": list(r.diff_ci) if r.diff_ci else None,
        "confidence": r.confidence,
        "first_divergence": r.first_divergence,
        "identical_before": r.identical_before,
        "first_bitwise_difference": r.first_bitwise_difference,
        "first_diffs": [{"step": d.step, "a": d.a, "b": d.b, "diff": d.diff} for d in r.first_diffs],
    }
