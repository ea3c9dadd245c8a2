"""Is the difference real? Each metric of a diff judged against the noise between replicas.

Replicas are runs whose settings are equal except their seeds (`ledger.compare.replicas` finds
them). For every learning and timing metric of a diff, on the steps every run used has (heat-paused
steps left out):

- `diff`: B−A of the per-step means over each side's replicas (= mean of B's run means minus
  mean of A's run means);
- `noise_floor`: the spread between replicas of one side: the pooled standard deviation of one
  run's mean over those steps;
- `verdict`: `beyond noise` when the 95% interval of `diff`, computed across replicas, excludes
  zero; else `within noise`. The unit is one run's mean over the common steps, because the steps
  of one run are not independent (a run that starts a little better stays better): a per-step
  interval would call most seed-to-seed differences real. The interval is Welch's t on the run
  means (`noisestats.replica_difference`; docs/noise.md says why, with the error rates measured).
- `no replicas` when neither side has a second run: then the interval is the per-step one of
  `ledger.compare.learning` (median of per-step B−A), which ignores run-to-run noise and says so;
- `repeat` when A and B themselves are replicas (no setting, or only seeds, differ): their
  difference is the noise.

`noise_json` gives the `noise` object of `ledger diff --json` (schema in `ledger.compare.diffcore`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import msgspec

from ledger.compare.noisestats import permutation_p, replica_difference
from ledger.compare.stats import CONFIDENCE, ROLLOUT_TIME_PER_1K, Pause, median_with_ci, metric_value
from ledger.config import DEFAULTS
from ledger.metrics.table import MetricsTable

BEYOND, WITHIN, NO_REPLICAS, REPEAT = "beyond noise", "within noise", "no replicas", "repeat"
TRAIN_AXIS, ROLLOUT_AXIS = "train step", "rollout"
METHODS = {
    "welch": "Welch's t on replica means",
    "pooled-t": "Student's t on replica means (one side has a single run: the other side's spread stands for both)",
    "exact": "replicas agree exactly: no run-to-run noise, any difference is beyond it",
    "per-step": "no replicas: per-step interval (median of per-step B-A), ignores run-to-run noise",
    "repeat": "A and B are repeats: their difference is the noise",
    "mixed": "t on replica means per metric; exact where replicas agree bitwise",
}


class RunSeries(msgspec.Struct, frozen=True):
    """One run of a side: its id, metrics and heat pauses."""

    run: str
    table: MetricsTable | None
    pauses: Sequence[Pause] = ()


class NoiseMetric(msgspec.Struct, frozen=True):
    """One metric judged against the replica noise (see the module docstring)."""

    metric: str
    axis: str
    steps: int  # common steps the means are taken over
    replicas_a: int  # runs of each side that have every one of those steps
    replicas_b: int
    mean_a: float
    mean_b: float
    diff: float
    diff_ci: tuple[float, float] | None
    noise_floor: float | None
    verdict: str
    method: str
    df: float | None = None
    permutation_p: float | None = None
    confidence: float = CONFIDENCE


class NoiseReport(msgspec.Struct):
    """The noise section of a diff: which runs stood for each side, and every metric's verdict."""

    replicas_a: list[str]
    replicas_b: list[str]
    method: str
    metrics: list[NoiseMetric] = msgspec.field(default_factory=list)
    session: list[str] = msgspec.field(default_factory=list)  # replicas from another day, host, GPU, driver
    any_age: bool = False
    max_age_hours: float = DEFAULTS.diff.max_age_hours


def column(table: MetricsTable | None, metric: str, axis: str) -> dict[int, float]:
    """step -> finite value of `metric` on `axis` (train steps or rollout ids)."""
    if table is None:
        return {}
    out: dict[int, float] = {}
    if axis == TRAIN_AXIS:
        for step, metrics in table.train_steps.items():
            value = metrics.get(metric)
            if value is not None and math.isfinite(value):
                out[step] = value
        return out
    if metric == ROLLOUT_TIME_PER_1K:  # derived from two metrics of the row
        for step, row in table.rows.items():
            found = metric_value(row, metric)
            if found is not None:
                out[step] = found
        return out
    # one comprehension over 10,000s of steps (`v - v == 0` is isfinite), as `stats` reads columns
    return {s: v for s, row in table.rows.items() if (v := row.metrics.get(metric)) is not None and v - v == 0}


def _paused_steps(series: RunSeries, axis: str) -> set[int]:
    if axis != ROLLOUT_AXIS or not series.pauses or series.table is None:
        return set()
    return {
        s
        for s, row in series.table.rows.items()
        if row.t_start is not None
        and row.t_end is not None
        and any(row.t_start < end and start < row.t_end for start, end in series.pauses)
    }


def _side(runs: Sequence[RunSeries], metric: str, axis: str, steps: set[int], first: dict[int, float]) -> list[dict[int, float]]:
    """Columns of the runs that have the metric on every one of `steps`: the first run's (given,
    `first`) always, then each replica's that has them."""
    out = [first]
    for series in runs[1:]:
        col = column(series.table, metric, axis)
        if steps <= col.keys():
            out.append(col)
    return out


def judge_metric(
    metric: str,
    axis: str,
    side_a: Sequence[RunSeries],
    side_b: Sequence[RunSeries],
    repeat: bool = False,
    confidence: float = CONFIDENCE,
    permutation: bool = True,
) -> NoiseMetric | None:
    """One metric of two sides of replicas (each side's first run is A or B itself).

    None when A and B share no step of it. `permutation`: also the permutation test's p-value
    (a cross-check beside the verdict, where each side has enough runs).
    """
    col_a, col_b = column(side_a[0].table, metric, axis), column(side_b[0].table, metric, axis)
    steps = col_a.keys() & col_b.keys()
    for series in (*side_a, *side_b):  # a step paused in any run used is left out
        steps -= _paused_steps(series, axis)
    if not steps:
        return None
    if repeat:
        side_a, side_b = side_a[:1], side_b[:1]
    cols_a, cols_b = _side(side_a, metric, axis, steps, col_a), _side(side_b, metric, axis, steps, col_b)
    ordered = sorted(steps)
    # fmean of a list, not of a generator: the same sum, without a Python-level count of the items
    means_a = [statistics.fmean([c[s] for s in ordered]) for c in cols_a]
    means_b = [statistics.fmean([c[s] for s in ordered]) for c in cols_b]
    mean_a, mean_b = statistics.fmean(means_a), statistics.fmean(means_b)

    def result(
        diff: float,
        ci: tuple[float, float] | None,
        floor: float | None,
        verdict: str,
        method: str,
        df: float | None = None,
        perm: float | None = None,
    ) -> NoiseMetric:
        return NoiseMetric(
            metric, axis, len(ordered), len(cols_a), len(cols_b), mean_a, mean_b, diff, ci, floor, verdict, method, df, perm, confidence
        )

    if repeat:  # the two runs are replicas of each other: the size of their difference is the noise
        per_step = median_with_ci([cols_b[0][s] - cols_a[0][s] for s in ordered], confidence)
        return result(mean_b - mean_a, per_step.ci, abs(mean_b - mean_a) / math.sqrt(2), REPEAT, "repeat")
    judged = replica_difference(means_a, means_b, confidence)
    if judged is None:
        per_step = median_with_ci([col_b[s] - col_a[s] for s in ordered], confidence)
        return result(per_step.median, per_step.ci, None, NO_REPLICAS, "per-step")
    return result(
        judged.diff,
        judged.ci,
        judged.noise_floor,
        BEYOND if judged.beyond else WITHIN,
        judged.method,
        judged.df,
        permutation_p(means_a, means_b) if permutation else None,
    )


def judge(
    metrics: Sequence[tuple[str, str]], side_a: Sequence[RunSeries], side_b: Sequence[RunSeries], repeat: bool = False
) -> NoiseReport:
    """Every (metric, axis) judged; `side_a[0]` is A and `side_b[0]` is B, the rest their replicas."""
    judged = [m for metric, axis in metrics if (m := judge_metric(metric, axis, side_a, side_b, repeat))]
    methods = {m.method for m in judged}
    if repeat:
        method = "repeat"
    elif not judged:
        method = "per-step" if len(side_a) < 2 and len(side_b) < 2 else "welch"
    else:
        method = methods.pop() if len(methods) == 1 else "mixed"
    used_a = side_a[:1] if repeat else side_a
    used_b = side_b[:1] if repeat else side_b
    return NoiseReport([s.run for s in used_a], [s.run for s in used_b], method, judged)


def _num(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def noise_json(report: NoiseReport | None) -> dict[str, object] | None:
    """The `noise` object of `ledger diff --json` (None when the diff was refused)."""
    if report is None:
        return None
    return {
        "replicas_a": list(report.replicas_a),
        "replicas_b": list(report.replicas_b),
        "method": report.method,
        "method_text": METHODS.get(report.method, report.method),
        "any_age": report.any_age,
        "max_age_hours": report.max_age_hours,
        "session": list(report.session),
        "metrics": [
            {
                "metric": m.metric,
                "axis": m.axis,
                "steps": m.steps,
                "replicas": [m.replicas_a, m.replicas_b],
                "mean_a": _num(m.mean_a),
                "mean_b": _num(m.mean_b),
                "diff": _num(m.diff),
                "diff_ci": [_num(m.diff_ci[0]), _num(m.diff_ci[1])] if m.diff_ci else None,
                "noise_floor": _num(m.noise_floor),
                "verdict": m.verdict,
                "method": m.method,
                "df": _num(m.df),
                "permutation_p": m.permutation_p,
                "confidence": m.confidence,
            }
            for m in report.metrics
        ],
    }
