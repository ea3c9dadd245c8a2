"""A metric of one run as chart points: the one reading of a metrics table the pages share."""

from __future__ import annotations

import math

from ledger.compare.stats import metric_value
from ledger.metrics.table import MetricsTable


def series_of(table: MetricsTable | None, metric: str) -> tuple[str, list[tuple[float, float]]]:
    """(axis name, points) of a metric: train steps where it is logged per train step, else rollouts."""
    if table is None:
        return "rollout", []
    train = [(float(s), m[metric]) for s, m in table.train_steps.items() if metric in m and math.isfinite(m[metric])]
    if train:
        return "train step", train
    points = []
    for step, row in table.rows.items():
        value = metric_value(row, metric)
        if value is not None:
            points.append((float(step), value))
    return "rollout", points
