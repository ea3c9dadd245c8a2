"""Per-step metrics of a run: read from its logs and files at record time, stored, read back.

- `table`: `StepRow`, `MetricsTable`, the formats metrics come from.
- `logparse`: Miles log lines (and other trainers' lines, `lineformats`) -> `MetricsTable`;
  `payloads` reads one line's dict literal.
- `events`: Miles' debug events, and merging them over the log numbers.
- `jsonl`: `metrics.jsonl` in and out; `store`: a committed run's table, cached by blob id.
- `metricfiles`, `tbevents`: a JSON-lines metrics file, TensorBoard event files.
- `summarymetrics`: last/min/max per metric, for summary.json; `trackers`: W&B/MLflow/TensorBoard
  links the job printed.

Recording a run writes through these and `ledger.compare` reads through them; none of them
compares two runs.
"""
