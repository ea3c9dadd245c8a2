"""Per-step metrics from Miles' debug events, and one table from a run's logs and its events.

`--save-debug-event-data` writes JSON lines `{"type": "metric", "rollout_id": N, "metrics": {...}}`;
`parse_events` reads them and `merge` lets them win over log numbers, metric by metric.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ledger.metrics.payloads import numbers
from ledger.metrics.table import MAX_EXAMPLES, METRIC_EVENTS, MetricsTable, StepRow


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def parse_events(directory: Path) -> MetricsTable:
    """Per-step metrics from the `metric` events of `--save-debug-event-data` (`*.jsonl`).

    Events with a train `step` and no `rollout_id` go to `train_steps`; eval rollout ids
    (`eval_<n>`) and other event types are ignored. A line that is not JSON is counted as
    malformed. A missing directory gives an empty table.
    """
    table = MetricsTable()
    directory = Path(directory)
    if not directory.is_dir():
        return table
    for path in sorted(directory.glob("*.jsonl")):
        table.sources.append(str(path))
        with open(path, "rb") as fh:
            for line_no, line in enumerate(fh, 1):
                if b'"metric"' not in line:
                    continue  # cheap filter: most events are not metrics
                try:
                    event = json.loads(line)
                except ValueError:
                    table.note_malformed(f"{path.name}:{line_no}: not a JSON object")
                    continue
                if not isinstance(event, dict) or event.get("type") != "metric":
                    continue
                metrics = numbers(event.get("metrics"))
                if metrics is None:
                    table.note_malformed(f"{path.name}:{line_no}: metrics is not an object")
                    continue
                rollout_id = _as_int(event.get("rollout_id"))
                train_step = _as_int(event.get("step"))
                table.add_format(METRIC_EVENTS)
                if rollout_id is not None:
                    row = table.rows.get(rollout_id)
                    if row is None:
                        row = table.rows[rollout_id] = StepRow(rollout_id, None, None, {})
                    row.metrics.update(metrics)
                elif train_step is not None:
                    table.train_steps.setdefault(train_step, {}).update(metrics)
    table.rows = dict(sorted(table.rows.items()))
    table.train_steps = dict(sorted(table.train_steps.items()))
    return table


def merge(log_table: MetricsTable, event_table: MetricsTable) -> MetricsTable:
    """One table from both sources: event metrics win per metric name; times come from the logs."""
    out = MetricsTable(
        malformed=log_table.malformed + event_table.malformed,
        malformed_examples=(log_table.malformed_examples + event_table.malformed_examples)[:MAX_EXAMPLES],
        sources=log_table.sources + event_table.sources,
        formats=list(dict.fromkeys(log_table.formats + event_table.formats)),
    )
    for number in sorted(set(log_table.rows) | set(event_table.rows)):
        log_row = log_table.rows.get(number)
        event_row = event_table.rows.get(number)
        timed = log_row or event_row
        assert timed is not None
        metrics = dict(log_row.metrics) if log_row else {}
        if event_row:
            metrics.update(event_row.metrics)
        out.rows[number] = StepRow(number, timed.t_start, timed.t_end, metrics)
    for number in sorted(set(log_table.train_steps) | set(event_table.train_steps)):
        merged = dict(log_table.train_steps.get(number, {}))
        merged.update(event_table.train_steps.get(number, {}))
        out.train_steps[number] = merged
    return out
