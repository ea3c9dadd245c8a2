"""Per-step metrics of a recorded run, without re-parsing big logs.

A run's `metrics.jsonl` (written at the end of `ledger run`) is read from git. Older runs without
one are parsed once from their logs and the result is cached by the run folder's tree id in
`.git/ledger/metrics/`; a tree id names its content, so the cache never goes stale.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from ledger.cache import LocalCache
from ledger.compare.logparse import (
    MetricsTable,
    merge,
    parse_events,
    parse_logs,
    read_metrics_jsonl,
    write_metrics_jsonl,
)
from ledger.storage.git import Repo
from ledger.storage.store import RunEntry


def _cached(cache: LocalCache, key: str, build: Callable[[], MetricsTable]) -> MetricsTable:
    """A parsed table, pickled under the content id it came from (so never stale)."""
    table = cache.read_pickle(key, MetricsTable)
    if table is None:
        table = build()
        cache.write_pickle(key, table)
    return table


def _from_blob(repo: Repo, oid: str, cache: Path) -> MetricsTable:
    text = cache / f".{oid}.{os.getpid()}.jsonl"
    text.write_bytes(repo.read_blob(oid))
    try:
        return read_metrics_jsonl(text)
    finally:
        text.unlink(missing_ok=True)


# the code a cached metrics table comes from (see ledger/cache.py)
METRICS_CODE = ("ledger.compare.metrics_store", "ledger.compare.logparse", "ledger.compare.lineformats")


def load_metrics(repo: Repo, entry: RunEntry, data_dir: Path | None = None) -> MetricsTable | None:
    """The run's metrics table, or None when it logged no per-step metrics at all."""
    cache = LocalCache(repo.common_dir, "metrics", code=METRICS_CODE)
    cache.dir.mkdir(parents=True, exist_ok=True)
    blob = repo.tree_entry(entry.tree, "metrics.jsonl")
    if blob is not None:
        return _cached(cache, blob[0], lambda: _from_blob(repo, blob[0], cache.dir))
    parsed = cache.path(f"tree-{entry.tree}", ".jsonl")
    if parsed.exists():
        table = read_metrics_jsonl(parsed)
    else:
        with tempfile.TemporaryDirectory(prefix="ledger-logs-") as tmp:
            logs = []
            for name in ("trainer.log", "engine.log"):
                found = repo.tree_entry(entry.tree, name)
                if found is not None:
                    log = Path(tmp) / name
                    log.write_bytes(repo.read_blob(found[0]))
                    logs.append(log)
            table = parse_logs(logs)
        if data_dir is not None and (data_dir / "events").is_dir():
            table = merge(table, parse_events(data_dir / "events"))
        write_metrics_jsonl(parsed, table)
    return table if (table.rows or table.train_steps) else None
