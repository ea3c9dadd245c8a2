"""Comparing runs: per-step metrics from logs and events, statistics, and `ledger diff`'s core.

- `logparse`: Miles log lines and debug events -> `MetricsTable`, and `metrics.jsonl` in and out.
- `stats`: medians and a distribution-free confidence interval for a median.
- `diffcore`: which settings changed, timing over common steps, warnings, `DiffReport`.
- `render`: the human text of a `DiffReport`.

Pure Python and the standard library only.
"""
