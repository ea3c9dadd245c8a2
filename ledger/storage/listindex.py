"""The listing index: what `ledger list` and its filters need of every run, kept by `runs/` tree id.

Reading 10,000 run folders means 10,000 tree reads and 20,000 JSON parses (~2-7 s); the index
turns a listing at an unchanged tip into a few table reads. It lives in the table
`x_<code version>` of `.git/ledger/manifests.sqlite` (`storage/listing.py`'s `ManifestCache`),
one row per part:

- `base`: the `runs/` tree id it was built from, each shard's tree id, each run folder's entry
  (its tree and blob ids), its listing fields (summary.json with meta.json laid over it) or why it
  is broken, and the names of every setting and summary metric;
- `settings` and `metrics`: every run's settings and summary metrics (`list --json`, compare);
- `s:<key>` and `m:<name>`: one setting or one metric for every run (what a filter reads).

Everything in it is named by the git ids it was derived from, so it is never stale: an index is
used only for the very `runs/` tree it names. For another tree (new runs, a tag, a pull) the
newest index is the starting point: a shard whose tree id is unchanged keeps its runs, a run
folder whose tree id is unchanged keeps its row, and only new or changed folders are read from
git (through the same size and depth limits as a cold read). Parts are `marshal`ed (plain data
only: loading one runs no code); a part that fails to load, or names another tree, is a miss and
the index is rebuilt from git.
"""

from __future__ import annotations

import marshal
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ledger.manifest import RUN_ID_RE, shard_of
from ledger.storage.git import MODE_TREE, Repo
from ledger.storage.store import SHARD_RE, RunEntry

KEEP_TREES = 3  # indexes kept (a few worktrees or branches listed in turn); older ones are dropped
FORMAT = 1


@dataclass
class RunRow:
    """One run folder as read from git: its listing fields (or why it is broken), settings, metrics."""

    entry: RunEntry
    fields: dict[str, Any] | None
    broken: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)


ReadRun = Callable[[RunEntry], RunRow]


@dataclass
class IndexData:
    """One index: every run at one `runs/` tree. `settings`/`metrics` are None until loaded."""

    runs_tree: str
    shards: dict[str, str] = field(default_factory=dict)
    entries: dict[str, RunEntry] = field(default_factory=dict)
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)
    setting_keys: set[str] = field(default_factory=set)
    metric_names: set[str] = field(default_factory=set)
    settings: dict[str, dict[str, Any]] | None = None
    metrics: dict[str, dict[str, Any]] | None = None

    def add(self, row: RunRow) -> None:
        e = row.entry
        self.entries[e.id] = e
        if row.fields is None:
            self.broken[e.id] = row.broken or f"{e.path}: unreadable"
            return
        self.fields[e.id] = row.fields
        assert self.settings is not None and self.metrics is not None
        self.settings[e.id] = row.settings
        self.metrics[e.id] = row.metrics
        self.setting_keys.update(row.settings)
        self.metric_names.update(row.metrics)

    def row(self, run_id: str) -> RunRow:
        e = self.entries[run_id]
        if run_id in self.broken:
            return RunRow(e, None, self.broken[run_id])
        assert self.settings is not None and self.metrics is not None
        return RunRow(e, self.fields[run_id], None, self.settings.get(run_id, {}), self.metrics.get(run_id, {}))


def _entry_tuple(e: RunEntry) -> tuple[str | None, ...]:
    return (e.id, e.path, e.tree, e.manifest_blob, e.summary_blob, e.settings_blob, e.meta_blob)


def _entry(t: Any) -> RunEntry:
    if type(t) is not tuple or len(t) != 7 or type(t[0]) is not str or type(t[2]) is not str:
        raise ValueError("not an entry")
    return RunEntry(*t)


class ListIndex:
    """The index table of one `ManifestCache` connection (None: no cache, every read is cold)."""

    def __init__(self, db: sqlite3.Connection | None, table: str):
        self.db = db
        self.table = table

    def _part(self, runs_tree: str, part: str) -> Any:
        if self.db is None:
            return None
        try:
            found = self.db.execute(f"SELECT data FROM {self.table} WHERE runs = ? AND part = ?", (runs_tree, part)).fetchone()
            return marshal.loads(found[0]) if found is not None else None
        except (sqlite3.Error, ValueError, EOFError, TypeError):
            return None

    def _newest_tree(self) -> str | None:
        if self.db is None:
            return None
        try:
            found = self.db.execute(f"SELECT runs FROM {self.table} WHERE part = 'base' ORDER BY written DESC LIMIT 1").fetchone()
        except sqlite3.Error:
            return None
        return found[0] if found is not None and isinstance(found[0], str) else None

    def load(self, runs_tree: str) -> IndexData | None:
        """The index of `runs_tree` without its settings and metrics, or None (absent, damaged, foreign)."""
        base = self._part(runs_tree, "base")
        try:
            if not isinstance(base, dict) or base.get("format") != FORMAT or base.get("runs") != runs_tree:
                return None
            data = IndexData(runs_tree, dict(base["shards"]))
            for t in base["entries"]:
                e = _entry(t)
                data.entries[e.id] = e
            data.fields = base["fields"]
            data.broken = base["broken"]
            data.setting_keys = set(base["setting_keys"])
            data.metric_names = set(base["metric_names"])
            if not all(isinstance(v, dict) for v in data.fields.values()) or not all(isinstance(v, str) for v in data.broken.values()):
                return None
            if set(data.fields) | set(data.broken) != set(data.entries) or not all(isinstance(s, str) for s in data.shards.values()):
                return None
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        return data

    def load_rows(self, data: IndexData) -> bool:
        """Fill in every run's settings and metrics; False when a part is missing or damaged."""
        settings, metrics = self._part(data.runs_tree, "settings"), self._part(data.runs_tree, "metrics")
        if not isinstance(settings, dict) or not isinstance(metrics, dict):
            return False
        data.settings, data.metrics = settings, metrics
        return True

    def column(self, data: IndexData, kind: str, key: str) -> dict[str, Any] | None:
        """One setting (`kind` "s") or one metric ("m") for every run that has it; None on a miss."""
        value = self._part(data.runs_tree, f"{kind}:{key}")
        return value if isinstance(value, dict) else None

    def save(self, data: IndexData) -> None:
        if self.db is None or data.settings is None or data.metrics is None:
            return
        base = {
            "format": FORMAT,
            "runs": data.runs_tree,
            "shards": data.shards,
            "entries": [_entry_tuple(e) for e in data.entries.values()],
            "fields": data.fields,
            "broken": data.broken,
            "setting_keys": sorted(data.setting_keys),
            "metric_names": sorted(data.metric_names),
        }
        parts: dict[str, Any] = {"settings": data.settings, "metrics": data.metrics}
        for kind, rows, keys in (("s", data.settings, data.setting_keys), ("m", data.metrics, data.metric_names)):
            columns: dict[str, dict[str, Any]] = {k: {} for k in keys}
            for rid, values in rows.items():
                for k, v in values.items():
                    columns[k][rid] = v
            parts.update({f"{kind}:{k}": col for k, col in columns.items()})
        parts["base"] = base
        now = time.time()
        try:
            blobs = [(data.runs_tree, part, marshal.dumps(value), now) for part, value in parts.items()]
        except ValueError:
            return  # a value marshal cannot write (never from JSON): no index, only slower listings
        try:
            with self.db:
                self.db.execute(f"DELETE FROM {self.table} WHERE runs = ?", (data.runs_tree,))
                self.db.executemany(f"INSERT INTO {self.table} VALUES (?, ?, ?, ?)", blobs)
                keep = [r for (r,) in self.db.execute(f"SELECT runs FROM {self.table} WHERE part = 'base' ORDER BY written DESC")][
                    :KEEP_TREES
                ]
                marks = ",".join("?" * len(keep))
                self.db.execute(f"DELETE FROM {self.table} WHERE runs NOT IN ({marks})", keep)
        except sqlite3.Error:
            pass

    def index_of(self, repo: Repo, runs_tree: str, read_run: ReadRun) -> IndexData:
        """The index of `runs_tree`: stored, updated from the newest stored one, or built from git."""
        found = self.load(runs_tree)
        if found is not None:
            return found
        prev: IndexData | None = None
        newest = self._newest_tree()
        if newest is not None and newest != runs_tree:
            prev = self.load(newest)
            if prev is not None and not self.load_rows(prev):
                prev = None
        data = build(repo, runs_tree, prev, read_run)
        self.save(data)
        return data


def build(repo: Repo, runs_tree: str, prev: IndexData | None, read_run: ReadRun) -> IndexData:
    """Every run folder under `runs_tree`; what `prev` holds for an unchanged shard or folder tree id
    is taken from it, everything else is read with `read_run`."""
    data = IndexData(runs_tree, settings={}, metrics={})
    by_shard: dict[str, list[str]] = {}
    if prev is not None:
        for rid in prev.entries:
            by_shard.setdefault(shard_of(rid), []).append(rid)
    for shard, shard_oid, mode in repo.list_tree(runs_tree):
        if mode != MODE_TREE or not SHARD_RE.match(shard):
            continue
        data.shards[shard] = shard_oid
        if prev is not None and prev.shards.get(shard) == shard_oid:
            for rid in by_shard.get(shard, []):
                data.add(prev.row(rid))
            continue
        for rid, tree_oid, rmode in repo.list_tree(shard_oid):
            if rmode != MODE_TREE or not RUN_ID_RE.match(rid) or shard_of(rid) != shard:
                continue
            if prev is not None and rid in prev.entries and prev.entries[rid].tree == tree_oid:
                data.add(prev.row(rid))
                continue
            data.add(read_run(_run_entry(repo, rid, f"runs/{shard}/{rid}", tree_oid)))
    return data


def _run_entry(repo: Repo, run_id: str, path: str, tree: str) -> RunEntry:
    manifest, summary, settings, meta = repo.entries_named(tree, ("manifest.yaml", "summary.json", "settings.json", "meta.json"))
    return RunEntry(run_id, path, tree, manifest, summary, settings, meta)
