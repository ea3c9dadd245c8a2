"""The listing index: what `ledger list` and its filters need of every run, kept by `runs/` tree id.

Reading 10,000 run folders means 10,000 tree reads and 20,000 JSON parses (~2-7 s); the index
turns a listing at a known tip into a few table reads. It lives in the table `x_<code version>`
of `.git/ledger/manifests.sqlite` (`storage/listing.py`'s `ManifestCache`), one row per part,
each keyed by the git tree id it was derived from:

- per `runs/` shard tree id (`runs/<xx>`, ~1/256 of the runs): `shard` (each run folder's entry,
  its tree and blob ids, its listing fields, summary.json with meta.json laid over it, or why it
  is broken, and the names of its settings and metrics), `settings` and `metrics` (each run's,
  for `list --json` and compare), `s:<key>` and `m:<name>` (one setting or metric of each run:
  what a filter reads);
- per `runs/` tree id: `tree` (its shard tree ids), the newest of which says which shards the
  last listing saw.

Nothing in it can be stale: a shard's parts are used only for that very tree id (and a part must
name the id it is filed under). A new tip (a run, a tag, a pull) changes a few shards; only those
are indexed again, and in them only run folders whose tree id differs from the newest stored
shard of the same name are read from git, through the same size and depth limits as a cold read.
Parts are `marshal`ed (plain data only: loading one runs no code); a part that fails to load, or
names another tree, is a miss: read again from git and stored anew.
"""

from __future__ import annotations

import marshal
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ledger.errors import LedgerError
from ledger.manifest import RUN_ID_RE, shard_of
from ledger.storage.git import MODE_TREE, Repo
from ledger.storage.store import SHARD_RE, RunEntry, run_entry

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
    """The index table of one `ManifestCache` connection (None: no cache, every read is cold).

    Rows are (key, part, data): for a `runs/` tree, part `tree` maps shard names to shard tree ids;
    for a shard tree id, part `shard` holds its runs' entries, listing fields and key names, and
    parts `settings`, `metrics`, `s:<key>`, `m:<name>` its runs' settings and metrics."""

    def __init__(self, db: sqlite3.Connection | None, table: str):
        self.db = db
        self.table = table
        self.shard_oids: list[str] = []
        self._keys: dict[str, dict[str, set[str]]] = {}  # per shard id: its setting ("s") and metric ("m") names

    def _parts(self, keys: list[str], part: str) -> dict[str, Any] | None:
        """`part` of each key that has it (unmarshalled), or None when the table cannot be read."""
        if self.db is None:
            return None
        out: dict[str, Any] = {}
        try:
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                marks = ",".join("?" * len(chunk))
                sql = f"SELECT runs, data FROM {self.table} WHERE part = ? AND runs IN ({marks})"
                for key, blob in self.db.execute(sql, (part, *chunk)):
                    try:
                        out[key] = marshal.loads(blob)
                    except (ValueError, EOFError, TypeError):
                        continue  # damaged: a miss
        except sqlite3.Error:
            return None
        return out

    def _newest_shards(self) -> dict[str, str]:
        if self.db is None:
            return {}
        try:
            found = self.db.execute(f"SELECT data FROM {self.table} WHERE part = 'tree' ORDER BY written DESC LIMIT 1").fetchone()
            value = marshal.loads(found[0]) if found is not None else None
        except (sqlite3.Error, ValueError, EOFError, TypeError):
            return {}
        return value if isinstance(value, dict) else {}

    def _shard(self, oid: str, value: Any) -> IndexData | None:
        """A stored shard, checked: it must name the tree id it is filed under."""
        try:
            if not isinstance(value, dict) or value.get("format") != FORMAT or value.get("oid") != oid:
                return None
            data = IndexData(oid)
            for t in value["entries"]:
                e = _entry(t)
                data.entries[e.id] = e
            data.fields, data.broken = value["fields"], value["broken"]
            data.setting_keys, data.metric_names = set(value["setting_keys"]), set(value["metric_names"])
            if type(data.fields) is not dict or type(data.broken) is not dict:
                return None
            if set(data.fields) | set(data.broken) != set(data.entries) or not all(type(v) is dict for v in data.fields.values()):
                return None
        except (KeyError, TypeError, ValueError):
            return None
        return data

    def load_rows(self, data: IndexData) -> bool:
        """Fill in every run's settings and metrics; False when a part is missing or damaged."""
        settings, metrics = self._parts(self.shard_oids, "settings"), self._parts(self.shard_oids, "metrics")
        if settings is None or metrics is None or len(settings) < len(self.shard_oids) or len(metrics) < len(self.shard_oids):
            return False
        data.settings, data.metrics = {}, {}
        for part in settings.values():
            if type(part) is not dict:
                return False
            data.settings.update(part)
        for part in metrics.values():
            if type(part) is not dict:
                return False
            data.metrics.update(part)
        return True

    def column(self, data: IndexData, kind: str, key: str) -> dict[str, Any] | None:
        """One setting (`kind` "s") or one metric ("m") for every run that has it; None on a miss."""
        found = self._parts(self.shard_oids, f"{kind}:{key}")
        if found is None:
            return None
        holders = [oid for oid in self.shard_oids if key in (self._keys.get(oid, {}).get(kind) or ())]
        if any(type(found.get(oid)) is not dict for oid in holders):
            return None  # a shard that has the key lost its column: damaged
        out: dict[str, Any] = {}
        for oid in holders:
            out.update(found[oid])
        return out

    def _save_shard(self, oid: str, data: IndexData, now: float) -> list[tuple[str, str, bytes, float]]:
        assert data.settings is not None and data.metrics is not None
        shard = {
            "format": FORMAT,
            "oid": oid,
            "entries": [_entry_tuple(e) for e in data.entries.values()],
            "fields": data.fields,
            "broken": data.broken,
            "setting_keys": sorted(data.setting_keys),
            "metric_names": sorted(data.metric_names),
        }
        parts: dict[str, Any] = {"shard": shard, "settings": data.settings, "metrics": data.metrics}
        for kind, rows, keys in (("s", data.settings, data.setting_keys), ("m", data.metrics, data.metric_names)):
            columns: dict[str, dict[str, Any]] = {k: {} for k in keys}
            for rid, values in rows.items():
                for k, v in values.items():
                    columns[k][rid] = v
            parts.update({f"{kind}:{k}": col for k, col in columns.items()})
        return [(oid, part, marshal.dumps(value), now) for part, value in parts.items()]

    def index_of(self, repo: Repo, runs_tree: str, read_run: ReadRun) -> IndexData:
        """The index of `runs_tree`: each shard from the table when stored, else read from git (a
        run folder whose tree id is unchanged since the newest stored index keeps its row)."""
        shards = {name: oid for name, oid, mode in repo.list_tree(runs_tree) if mode == MODE_TREE and SHARD_RE.match(name)}
        self.shard_oids = sorted(set(shards.values()))
        stored = self._parts(self.shard_oids, "shard") or {}
        data = IndexData(runs_tree, dict(shards))
        self._keys = {}
        built: dict[str, IndexData] = {}
        prev_shards: dict[str, str] | None = None
        for name, oid in sorted(shards.items()):
            part = self._shard(oid, stored.get(oid)) if oid in stored else None
            if part is None:
                if prev_shards is None:
                    prev_shards = self._newest_shards()
                part = self._build_shard(repo, name, oid, prev_shards.get(name), read_run)
                built[oid] = part
            data.entries.update(part.entries)
            data.fields.update(part.fields)
            data.broken.update(part.broken)
            data.setting_keys |= part.setting_keys
            data.metric_names |= part.metric_names
            self._keys[oid] = {"s": part.setting_keys, "m": part.metric_names}
        if built or self.db is not None:
            self._save(runs_tree, shards, built)
        if built and not stored:  # everything was read: the rows are at hand
            data.settings, data.metrics = {}, {}
            for part in built.values():
                assert part.settings is not None and part.metrics is not None
                data.settings.update(part.settings)
                data.metrics.update(part.metrics)
        return data

    def _build_shard(self, repo: Repo, name: str, oid: str, prev_oid: str | None, read_run: ReadRun) -> IndexData:
        prev: IndexData | None = None
        if prev_oid is not None and prev_oid != oid:
            prev = self._shard(prev_oid, (self._parts([prev_oid], "shard") or {}).get(prev_oid))
            if prev is not None:
                settings = (self._parts([prev_oid], "settings") or {}).get(prev_oid)
                metrics = (self._parts([prev_oid], "metrics") or {}).get(prev_oid)
                prev.settings, prev.metrics = settings, metrics
                if type(settings) is not dict or type(metrics) is not dict:
                    prev = None
        part = IndexData(oid, settings={}, metrics={})
        for rid, tree_oid, rmode in repo.list_tree(oid):
            if rmode != MODE_TREE or not RUN_ID_RE.match(rid) or shard_of(rid) != name:
                continue
            if prev is not None and rid in prev.entries and prev.entries[rid].tree == tree_oid:
                part.add(prev.row(rid))
            else:
                part.add(_read(repo, rid, f"runs/{name}/{rid}", tree_oid, read_run))
        return part

    def forget(self) -> None:
        """Drop the stored parts of the shards last indexed (one of them was found damaged)."""
        if self.db is None:
            return
        try:
            with self.db:
                self.db.executemany(f"DELETE FROM {self.table} WHERE runs = ?", [(oid,) for oid in self.shard_oids])
        except sqlite3.Error:
            pass

    def _save(self, runs_tree: str, shards: dict[str, str], built: dict[str, IndexData]) -> None:
        if self.db is None:
            return
        now = time.time()
        try:
            rows = [row for oid, part in built.items() for row in self._save_shard(oid, part, now)]
            rows.append((runs_tree, "tree", marshal.dumps(shards), now))
        except ValueError:
            return  # a value marshal cannot write (never from JSON): no index, only slower listings
        try:
            with self.db:
                for oid in built:
                    self.db.execute(f"DELETE FROM {self.table} WHERE runs = ?", (oid,))
                self.db.executemany(f"INSERT OR REPLACE INTO {self.table} VALUES (?, ?, ?, ?)", rows)
                if not built:
                    return
                trees = self.db.execute(f"SELECT runs, data FROM {self.table} WHERE part = 'tree' ORDER BY written DESC").fetchall()
                keep: set[str] = set()
                for i, (key, blob) in enumerate(trees):
                    if i >= KEEP_TREES:
                        self.db.execute(f"DELETE FROM {self.table} WHERE runs = ?", (key,))
                        continue
                    keep.add(key)
                    try:
                        keep.update(marshal.loads(blob).values())
                    except (ValueError, EOFError, TypeError, AttributeError):
                        pass
                stale = [k for (k,) in self.db.execute(f"SELECT DISTINCT runs FROM {self.table}") if k not in keep]
                self.db.executemany(f"DELETE FROM {self.table} WHERE runs = ?", [(k,) for k in stale])
        except sqlite3.Error:
            pass


def build(repo: Repo, runs_tree: str, read_run: ReadRun) -> IndexData:
    """Every run folder under `runs_tree`, read from git (no index)."""
    return ListIndex(None, "").index_of(repo, runs_tree, read_run)


def _read(repo: Repo, run_id: str, path: str, tree: str, read_run: ReadRun) -> RunRow:
    """One run folder's row; a folder whose files are not files (`store.run_entry`) is a broken
    row, its entry naming none of them."""
    try:
        entry = run_entry(repo, run_id, path, tree)
    except LedgerError as exc:
        return RunRow(RunEntry(run_id, path, tree, None), None, exc.message)
    return read_run(entry)
