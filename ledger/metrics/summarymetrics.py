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

from ledger.metrics.jsonl import read_metrics_jsonl
from ledger.metrics.table import MetricsTable


def _fold(out: dict[str, list[Any]], step: int, metrics: dict[str, float], skip: set[str] | frozenset[str]) -> None:
    """Fold one step's finite values into `out`: name -> [last, last_step, min, min_step, max,
    max_step]; a tie keeps the earlier step, as `min`/`max` over the steps in order would."""
    for name, value in metrics.items():
        if name in skip or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        value = float(value)
        seen = out.get(name)
        if seen is None:
            out[name] = [value, step, value, step, value, step]
            continue
        seen[0], seen[1] = value, step
        if value < seen[2]:
            seen[2], seen[3] = value, step
        if value > seen[4]:
            seen[4], seen[5] = value, step


def summarize(table: MetricsTable) -> dict[str, dict[str, float | int]]:
    """`{metric: {last, last_step, min, min_step, max, max_step}}`; metrics with no finite value
    are left out. A metric's steps are the rollout ids where it is logged per rollout, else the
    train steps. One pass over the steps in order."""
    folded: dict[str, list[Any]] = {}
    for step in sorted(table.rows):
        _fold(folded, step, table.rows[step].metrics, frozenset())
    rollout_keyed = set(folded)
    for step in sorted(table.train_steps):
        _fold(folded, step, table.train_steps[step], rollout_keyed)
    return {
        name: {"last": f[0], "last_step": f[1], "min": f[2], "min_step": f[3], "max": f[4], "max_step": f[5]}
        for name, f in sorted(folded.items())
    }


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
