"""Per-step metrics of a recorded run, without re-parsing big logs.

A run's `metrics.jsonl` (written at the end of `ledger run`) is read from git, each time: decoding
a file ledger wrote costs about what unpickling its table would. Older runs without
one are parsed once from their logs and the result is cached by the run folder's tree id in
`.git/ledger/metrics/`; a tree id names its content, so the cache never goes stale.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ledger.cache import LocalCache
from ledger.metrics.events import merge, parse_events
from ledger.metrics.jsonl import metrics_from_bytes, read_metrics_jsonl, write_metrics_jsonl
from ledger.metrics.logparse import parse_logs
from ledger.metrics.table import MetricsTable
from ledger.storage.git import Repo
from ledger.storage.limits import MAX_METRICS, MAX_METRICS_BYTES, MAX_STEPS, check_count, check_size, decoded
from ledger.storage.store import RunEntry, file_oid, read_file_at


def _from_blob(repo: Repo, oid: str, where: str) -> MetricsTable:
    """A run's metrics.jsonl, through the read limits (`storage/limits.py`): bytes and steps are
    counted before a line is parsed, metric names after. Read from git each time: a file ledger
    wrote is decoded in one pass (`metrics_from_bytes`), about as fast as unpickling its table."""
    check_size(repo.blob_size(oid), MAX_METRICS_BYTES, where)
    raw = repo.read_blob(oid)
    lines = raw.count(b"\n") + (0 if raw.endswith(b"\n") or not raw else 1)
    check_count(lines - raw.startswith(b'{"meta"'), MAX_STEPS, where, "steps")
    table = metrics_from_bytes(raw, "metrics.jsonl")
    decoded(where, len(table.rows) + len(table.train_steps))
    names = {n for row in table.rows.values() for n in row.metrics} | {n for values in table.train_steps.values() for n in values}
    check_count(len(names), MAX_METRICS, where, "metric names")
    return table


def load_metrics(repo: Repo, entry: RunEntry, data_dir: Path | None = None) -> MetricsTable | None:
    """The run's metrics table, or None when it logged no per-step metrics at all; ManifestError
    when its metrics.jsonl is over a read limit (too big, too many steps or metric names) or
    its metrics or logs are not files (`read_file_at`)."""
    blob = file_oid(entry.path, "metrics.jsonl", repo.tree_entry(entry.tree, "metrics.jsonl"))
    if blob is not None:
        return _from_blob(repo, blob, f"{entry.path}/metrics.jsonl")
    cache = LocalCache(repo.common_dir, "metrics")
    cache.dir.mkdir(parents=True, exist_ok=True)
    parsed = cache.path(f"tree-{entry.tree}", ".jsonl")
    if parsed.exists():
        table = read_metrics_jsonl(parsed)
    else:
        with tempfile.TemporaryDirectory(prefix="ledger-logs-") as tmp:
            logs = []
            for name in ("trainer.log", "engine.log"):
                data = read_file_at(repo, entry, name)
                if data is not None:
                    log = Path(tmp) / name
                    log.write_bytes(data)
                    logs.append(log)
            table = parse_logs(logs)
        if data_dir is not None and (data_dir / "events").is_dir():
            table = merge(table, parse_events(data_dir / "events"))
        write_metrics_jsonl(parsed, table)
    return table if (table.rows or table.train_steps) else None
