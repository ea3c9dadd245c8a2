"""Summary metrics (summary.json's `metrics`): last, min and max per metric with their steps."""

from __future__ import annotations

import math
import random

from ledger.metrics.summarymetrics import summarize
from ledger.metrics.table import MetricsTable, StepRow


def by_definition(table: MetricsTable) -> dict[str, dict[str, float | int]]:
    """The summary as the docs define it: each metric's finite points in step order (rollout ids,
    else train steps), the first of equal extremes."""
    points: dict[str, list[tuple[int, float]]] = {}
    for step in sorted(table.rows):
        for name, value in table.rows[step].metrics.items():
            if math.isfinite(value):
                points.setdefault(name, []).append((step, float(value)))
    per_rollout = set(points)
    for step in sorted(table.train_steps):
        for name, value in table.train_steps[step].items():
            if name not in per_rollout and math.isfinite(value):
                points.setdefault(name, []).append((step, float(value)))
    out: dict[str, dict[str, float | int]] = {}
    for name, series in sorted(points.items()):
        lo = min(series, key=lambda p: p[1])
        hi = max(series, key=lambda p: p[1])
        out[name] = {"last": series[-1][1], "last_step": series[-1][0], "min": lo[1], "min_step": lo[0], "max": hi[1], "max_step": hi[0]}
    return out


def test_summary_matches_its_definition() -> None:
    rng = random.Random(3)
    values = [0.0, -0.0, 1.0, 1.0, 2.5, -3.0, math.nan, math.inf, -math.inf]
    for _ in range(50):
        table = MetricsTable()
        for step in rng.sample(range(100), 30):  # rows arrive in any order
            names = rng.sample(["a", "b", "c", "loss"], rng.randint(0, 4))
            table.rows[step] = StepRow(step, None, None, {n: rng.choice(values) for n in names})
        for step in rng.sample(range(100), 20):
            table.train_steps[step] = {n: rng.choice(values) for n in rng.sample(["loss", "grad", "lr"], 2)}
        assert summarize(table) == by_definition(table)


def test_a_metric_with_no_finite_value_is_left_out() -> None:
    table = MetricsTable(rows={0: StepRow(0, None, None, {"a": math.nan, "b": 1.0})}, train_steps={0: {"c": math.inf}})
    assert summarize(table) == {"b": {"last": 1.0, "last_step": 0, "min": 1.0, "min_step": 0, "max": 1.0, "max_step": 0}}
