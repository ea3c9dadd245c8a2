"""Per-step metrics from files a run writes besides its output: a JSON-lines metrics file, and
the adding of such a source to what the logs gave.

A metrics file holds one JSON object per line (`{"step": 3, "loss": 0.41}`, nested objects
flattened to `train/loss`): its step is named as on a printed JSON line
(`ledger.metrics.lineformats.object_step`), else it is the line's place among the file's objects
(0, 1, ...). Lines that are not JSON objects are counted as malformed, except a last line cut
short while the job was killed.
"""

from __future__ import annotations

import json
from pathlib import Path

from ledger.metrics.lineformats import object_metrics, object_step
from ledger.metrics.table import MAX_EXAMPLES, MetricsTable, StepRow

FORMAT = "jsonl file"
MAX_LINE = 1 << 20  # a longer line is no metrics record


def parse_metrics_file(path: Path) -> MetricsTable:
    """The rows of one JSON-lines metrics file (an unreadable file gives an empty table)."""
    table = MetricsTable(sources=[str(path)])
    try:
        data = path.read_bytes()
    except OSError:
        return table
    lines = data.split(b"\n")
    index = 0
    for line_no, line in enumerate(lines, 1):
        line = line.strip()
        if not line.startswith(b"{") or len(line) > MAX_LINE:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            if line_no < len(lines) - (0 if data.endswith(b"\n") else 1):  # not a cut last line
                table.note_malformed(f"{path.name}:{line_no}: not a JSON object")
            continue
        if not isinstance(obj, dict):
            continue
        metrics = object_metrics(obj)
        if not metrics:
            continue
        step = object_step(obj)
        step = index if step is None else step
        index += 1
        table.rows.setdefault(step, StepRow(step, None, None, {})).metrics.update(metrics)
    table.rows = dict(sorted(table.rows.items()))
    if table.rows:
        table.add_format(FORMAT)
    return table


def metric_names(table: MetricsTable) -> set[str]:
    """Every metric name a table has, per rollout or per train step."""
    names = {k for row in table.rows.values() for k in row.metrics}
    return names | {k for metrics in table.train_steps.values() for k in metrics}


def add_missing(base: MetricsTable, extra: MetricsTable) -> MetricsTable:
    """`base` with the metrics of `extra` that `base` has under no name: the logs and metric
    events stay the record of what they logged; another source only adds what they lack. Rows
    new to `base` take `extra`'s times."""
    known = metric_names(base)
    added = False
    for step, row in extra.rows.items():
        new = {k: v for k, v in row.metrics.items() if k not in known}
        if not new:
            continue
        added = True
        mine = base.rows.get(step)
        if mine is None:
            base.rows[step] = StepRow(step, row.t_start, row.t_end, new)
        else:
            mine.metrics.update(new)
    base.rows = dict(sorted(base.rows.items()))
    base.sources += [s for s in extra.sources if s not in base.sources]
    base.malformed += extra.malformed
    base.malformed_examples = (base.malformed_examples + extra.malformed_examples)[:MAX_EXAMPLES]
    if added:
        for fmt in extra.formats:
            base.add_format(fmt)
    return base
