"""Summary metrics: per logged metric, its last, min and max value and the step of each.

Computed once when a run is recorded (from its `metrics.jsonl`) and kept in the run's
`summary.json` under `metrics`, so `ledger list --where 'train/loss<1.0'` and `--metric` read
one small JSON file per run, never the per-step table (its keys: `storage/summary.py`'s
`METRIC_KEYS`, checked there when a record is read). A metric's step is the rollout id for
rollout-keyed metrics, the train step for the ones only logged per train step.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ledger.compare.logparse import MetricsTable, read_metrics_jsonl


def _series(table: MetricsTable) -> dict[str, list[tuple[int, float]]]:
    """Each metric's finite (step, value) points in step order."""
    out: dict[str, list[tuple[int, float]]] = {}
    for step in sorted(table.rows):
        for name, value in table.rows[step].metrics.items():
            if isinstance(value, (int, float)) and math.isfinite(value):
                out.setdefault(name, []).append((step, float(value)))
    rollout_keyed = set(out)
    for step in sorted(table.train_steps):
        for name, value in table.train_steps[step].items():
            if name not in rollout_keyed and isinstance(value, (int, float)) and math.isfinite(value):
                out.setdefault(name, []).append((step, float(value)))
    return out


def summarize(table: MetricsTable) -> dict[str, dict[str, float | int]]:
    """`{metric: {last, last_step, min, min_step, max, max_step}}`; metrics with no finite value are left out."""
    out: dict[str, dict[str, float | int]] = {}
    for name, points in sorted(_series(table).items()):
        lo = min(points, key=lambda p: p[1])
        hi = max(points, key=lambda p: p[1])
        out[name] = {"last": points[-1][1], "last_step": points[-1][0], "min": lo[1], "min_step": lo[0], "max": hi[1], "max_step": hi[0]}
    return out


def summarize_file(path: Path) -> dict[str, dict[str, float | int]]:
    """The summary of a `metrics.jsonl`, or {} when there is none."""
    return summarize(read_metrics_jsonl(path)) if path.is_file() else {}


def metric_value(metrics: Any, name: str, which: str = "last") -> float | None:
    """One number of a run's summary metrics (`summary.json`'s `metrics`), None when absent."""
    if not isinstance(metrics, dict):
        return None
    entry = metrics.get(name)
    value = entry.get(which) if isinstance(entry, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
