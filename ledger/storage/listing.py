"""Reading many manifests fast: parse each manifest blob once, cache it by blob id.

A blob id names its content, so the cache never goes stale. It lives in the git common dir
(`.git/ledger/manifests.sqlite`), shared by worktrees and never part of the working tree.
Listing 10,000 runs is then a tree walk plus one SQL read (see `make bench`).
"""

from __future__ import annotations

import contextvars
import fnmatch
import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.cache import code_version
from ledger.errors import LedgerError
from ledger.manifest import NOT_LEDGERS, RUN_ID_RE, SCHEMA, ManifestError, check_manifest
from ledger.runrecord import RunRecord
from ledger.storage.git import MODE_TREE, Repo
from ledger.storage.limits import MAX_METRICS, MAX_SETTINGS, check_count, check_depth, check_files, decoded, load_json, load_settings
from ledger.storage.listindex import IndexData, ListIndex, RunRow, build
from ledger.storage.store import RunEntry
from ledger.storage.summary import check_metrics


@dataclass
class Listing:
    """All runs at a branch tip: manifests by id, and runs that could not be read."""

    manifests: dict[str, dict[str, Any]] = field(default_factory=dict)
    entries: dict[str, RunEntry] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)
    setting_keys: set[str] = field(default_factory=set)  # every setting any run has
    metric_names: set[str] = field(default_factory=set)  # every summary metric any run has

    def fields_of(self, entry: RunEntry) -> dict[str, Any]:
        """A run's listing fields; ManifestError saying why when the run could not be read."""
        found = self.manifests.get(entry.id)
        if found is None:
            raise ManifestError(self.broken.get(entry.id) or f"{entry.path}: not in the listing", NOT_LEDGERS)
        return found

    def ordered(self) -> list[dict[str, Any]]:
        """Manifests oldest first (by start time, then id)."""
        return sorted(self.manifests.values(), key=lambda m: (m.get("started") or "", m["id"]))

    def refuse_broken(self, run_id: str) -> None:
        """A verb naming a run that listings skip refuses it, in one line (docs/trust.md)."""
        if run_id in self.broken:
            raise ManifestError(f"run {run_id} is refused: {self.broken[run_id]}", "the record is not one ledger wrote; listings skip it")


_READ_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("ledger_listing_read_only", default=False)


@contextmanager
def read_only() -> Iterator[None]:
    """Listings inside this block write nothing under `.git/ledger/` (the manifest cache and the
    listing index are read where they exist): for commands that promise to write nothing at all,
    such as `ledger replay --dry-run`."""
    token = _READ_ONLY.set(True)
    try:
        yield
    finally:
        _READ_ONLY.reset(token)


class ManifestCache:
    """`.git/ledger/manifests.sqlite`: parsed manifests by blob id (table `m_<code version>`) and
    the listing index by `runs/` tree id (table `x_<code version>`, `storage/listindex.py`).

    A file sqlite cannot read (damaged, truncated, not a database) is removed and made again: a
    cache is never an error."""

    def __init__(self, common_dir: Path):
        self.path = common_dir / "ledger" / "manifests.sqlite"
        self._db: sqlite3.Connection | None = None
        # one table per version of the parsing code (ledger/cache.py); older tables are dropped
        version = code_version()
        self._table = f"m_{version}"
        self.index_table = f"x_{version}"
        if _READ_ONLY.get():  # reads what is there, writes nothing (a write is only a cache miss)
            try:
                if self.path.is_file():
                    self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5)
            except sqlite3.Error:
                self._db = None
            return
        for attempt in range(2):
            try:
                self._open()
                return
            except sqlite3.Error:
                self.close()
                if attempt == 0:
                    try:
                        self.path.unlink()  # damaged: rebuilt from git
                    except OSError:
                        return

    def _open(self) -> None:
        self.path.parent.mkdir(exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=5)
        for (name,) in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            if name not in (self._table, self.index_table):
                self._db.execute(f'DROP TABLE IF EXISTS "{name}"')
        self._db.execute(f"CREATE TABLE IF NOT EXISTS {self._table} (blob TEXT PRIMARY KEY, json TEXT)")
        self._db.execute(
            f"CREATE TABLE IF NOT EXISTS {self.index_table} (runs TEXT, part TEXT, data BLOB, written REAL, PRIMARY KEY (runs, part))"
        )
        self._db.commit()

    @property
    def db(self) -> sqlite3.Connection | None:
        return self._db

    def close(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
        self._db = None

    def get_many(self, blobs: list[str]) -> dict[str, dict[str, Any]]:
        if self._db is None or not blobs:
            return {}
        out: dict[str, dict[str, Any]] = {}
        try:
            wanted = set(blobs)
            for blob, text in self._db.execute(f"SELECT blob, json FROM {self._table}"):
                if blob in wanted:
                    out[blob] = json.loads(text)
        except (sqlite3.Error, ValueError):
            return {}
        return out

    def get(self, blob: str) -> dict[str, Any] | None:
        if self._db is None:
            return None
        try:
            found = self._db.execute(f"SELECT json FROM {self._table} WHERE blob = ?", (blob,)).fetchone()
            value = json.loads(found[0]) if found is not None else None
        except (sqlite3.Error, ValueError, TypeError):
            return None
        return value if isinstance(value, dict) else None

    def put_many(self, items: dict[str, dict[str, Any]]) -> None:
        if self._db is None or not items:
            return
        try:
            with self._db:
                self._db.executemany(
                    f"INSERT OR REPLACE INTO {self._table} VALUES (?, ?)", [(k, json.dumps(v, default=str)) for k, v in items.items()]
                )
        except sqlite3.Error:
            pass


def parse_manifest(raw: bytes, where: str) -> dict[str, Any]:
    """A run's manifest.yaml as its dict, checked: the schema, the id, every value's type (a
    `RunRecord` reads it), so a reader never meets a value of the wrong type."""
    return parse_record(raw, where)[1]


def parse_record(raw: bytes, where: str) -> tuple[RunRecord, dict[str, Any]]:
    """A run's manifest.yaml, typed, and its dict (what `ledger show` prints, diffcore reads)."""
    from ledger import yamlio  # lazily: ruamel costs ~15 ms of every command's start-up

    what = f"{where}/manifest.yaml"
    m = check_manifest(check_depth(yamlio.loads(raw, what, max_entries={"settings": MAX_SETTINGS}), what), where)
    _check_id(m, where, "manifest.yaml")
    decoded(what, len(m.get("settings") or {}))
    return RunRecord.from_dict(m, where), m


def _check_id(data: dict[str, Any], where: str, name: str) -> None:
    """A record whose `id` is not its folder's would be shown and replayed as another run."""
    for key in ("name", "note", "started", "finished", "replay_of"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise ManifestError(f"{where}: {name} has a {key!r} that is not text", "the record is not one ledger wrote")
    if not isinstance(data.get("status") or {}, dict):
        raise ManifestError(f"{where}: {name} has a 'status' that is not a mapping", "the record is not one ledger wrote")
    folder = where.rstrip("/").rsplit("/", 1)[-1]
    if RUN_ID_RE.match(folder) and data.get("id") != folder:
        raise ManifestError(
            f"{where}: {name} says it is run {str(data.get('id'))[:40]!r}, not {folder}", "the record is not one ledger wrote"
        )


def load_listing(
    repo: Repo,
    tip: str | None,
    with_settings: bool = False,
    *,
    setting_keys: Iterable[str] = (),
    metric_names: Iterable[str] = (),
    metric_globs: tuple[str, ...] = (),
    cold: bool = False,
) -> Listing:
    """Every run's summary at `tip`; corrupt runs are reported in `broken`, never fatal.

    `with_settings`: each run's settings and summary metrics too (`settings`, `metrics`); otherwise
    only the settings named in `setting_keys` and the metrics named in `metric_names` or matching
    a glob of `metric_globs` (what a filter or a `--metric` column reads). `Listing.setting_keys`
    and `Listing.metric_names` name every setting and metric any run has.

    A run folder keeps `summary.json` (what `ledger list` shows) and `settings.json` beside
    `manifest.yaml`: JSON parses ~100x faster than YAML. Folders without them fall back to the
    YAML, parsed once and cached by blob id. What was read is kept in the listing index
    (`storage/listindex.py`), by the `runs/` tree id; `cold` reads every folder from git instead.
    """
    listing = Listing()
    if tip is None:
        return listing
    runs_tree = repo.tree_entry(tip, "runs")
    if runs_tree is None or runs_tree[1] != MODE_TREE:
        return listing
    cache = ManifestCache(repo.common_dir)
    try:
        return _from_index(repo, runs_tree[0], cache, with_settings, set(setting_keys), set(metric_names), metric_globs, cold)
    finally:
        cache.close()


def _from_index(
    repo: Repo,
    runs_tree: str,
    cache: ManifestCache,
    with_settings: bool,
    setting_keys: set[str],
    metric_names: set[str],
    metric_globs: tuple[str, ...],
    cold: bool,
) -> Listing:
    index = ListIndex(None if cold or _READ_ONLY.get() else cache.db, cache.index_table)

    def from_git() -> IndexData:  # a damaged part of the index: read again, and stored anew
        index.forget()
        data = index.index_of(repo, runs_tree, lambda e: read_run(repo, e, cache))
        if data.settings is None and not index.load_rows(data):
            data = build(repo, runs_tree, lambda e: read_run(repo, e, cache))
        return data

    data = index.index_of(repo, runs_tree, lambda e: read_run(repo, e, cache))
    if with_settings and data.settings is None and not index.load_rows(data):
        data = from_git()
    columns: list[tuple[str, str, dict[str, Any]]] = []
    if not with_settings:
        metric_names |= {n for n in data.metric_names if any(fnmatch.fnmatchcase(n, g) for g in metric_globs)}
        for kind, keys, known in (("settings", setting_keys, data.setting_keys), ("metrics", metric_names, data.metric_names)):
            for key in sorted(keys & known):
                column = _column(index, data, kind, key)
                if column is None:
                    data = from_git()
                    column = _column(index, data, kind, key) or {}
                columns.append((kind, key, column))
    listing = Listing(entries=data.entries, broken=dict(data.broken), setting_keys=data.setting_keys, metric_names=data.metric_names)
    listing.manifests = data.fields  # freshly loaded or read: this listing's own dicts
    if with_settings:
        assert data.settings is not None and data.metrics is not None
        for rid, m in data.fields.items():
            m["settings"], m["metrics"] = data.settings.get(rid, {}), data.metrics.get(rid, {})
    for kind, key, column in columns:
        for rid, value in column.items():
            if rid in data.fields:
                data.fields[rid].setdefault(kind, {})[key] = value
    return listing


def _column(index: ListIndex, data: IndexData, kind: str, key: str) -> dict[str, Any] | None:
    rows = data.settings if kind == "settings" else data.metrics
    if rows is not None:
        return {rid: v[key] for rid, v in rows.items() if key in v}
    return index.column(data, "s" if kind == "settings" else "m", key)


def read_run(repo: Repo, e: RunEntry, cache: ManifestCache) -> RunRow:
    """One run folder from git: its listing fields (summary.json, meta.json over it), settings and
    summary metrics, through the read limits (`storage/limits.py`); a bad record is a broken row."""
    settings: Any
    try:
        check_files(repo, e.tree, e.path)
        if e.summary_blob is not None:
            m = check_summary(load_json(repo.read_blob(e.summary_blob), f"{e.path}/summary.json"), e.path)
            if e.settings_blob is not None:
                settings = load_settings(repo.read_blob(e.settings_blob), f"{e.path}/settings.json")
            else:
                settings = _yaml_manifest(repo, e, cache).get("settings")
        elif e.manifest_blob is None:
            raise ManifestError(f"{e.path}: no manifest.yaml in the run folder", "the record is damaged")
        else:
            m = dict(_yaml_manifest(repo, e, cache))
            settings = m.get("settings")
        m.pop("settings", None)
        metrics = check_metrics(m.pop("metrics", None), e.path)
        if e.meta_blob is not None:
            with_meta(m, repo.read_blob(e.meta_blob))
    except LedgerError as exc:
        return RunRow(e, None, exc.message)
    return RunRow(e, m, None, settings if isinstance(settings, dict) else {}, metrics)


def _yaml_manifest(repo: Repo, e: RunEntry, cache: ManifestCache) -> dict[str, Any]:
    """A run's manifest.yaml, parsed once per blob (the blob-id cache), as plain JSON data."""
    if e.manifest_blob is None:
        return {}
    found = cache.get(e.manifest_blob)
    if found is not None:
        return found
    m: dict[str, Any] = json.loads(json.dumps(parse_manifest(repo.read_blob(e.manifest_blob), e.path), default=str))
    cache.put_many({e.manifest_blob: m})
    return m


def with_meta(m: dict[str, Any], raw: bytes) -> None:
    """Lay a run's meta.json (tags, note, archived: `storage/runmeta.py`) over its listing fields."""
    from ledger.storage.runmeta import parse_meta

    meta = parse_meta(raw)
    m["tags"] = list(meta.tags)
    m["archived"] = meta.archived
    if meta.note is not None:
        m["note"] = meta.note


def check_summary(data: Any, where: str) -> dict[str, Any]:
    """Validate a run's summary.json (the listing fields of its manifest)."""
    if not isinstance(data, dict) or not isinstance(data.get("schema"), int) or "id" not in data:
        raise ManifestError(f"{where}: summary.json is not a run summary", "the record is corrupt")
    if data["schema"] > SCHEMA:
        raise ManifestError(
            f"{where}: manifest schema {data['schema']} is newer than this ledger understands ({SCHEMA})",
            "upgrade ledger (`pip install -U ledger`)",
        )
    _check_id(data, where, "summary.json")
    metrics = data.get("metrics")
    check_count(len(metrics) if isinstance(metrics, dict) else 0, MAX_METRICS, f"{where}/summary.json", "metric names")
    return data


def list_fields(m: dict[str, Any]) -> dict[str, Any]:
    """The fields `ledger list` (and `ledger report`) show for a run."""
    status = m.get("status") or {}
    gpu = m.get("gpu") or {}
    return {
        "id": m["id"],
        "name": m.get("name"),
        "state": status.get("state"),
        "exit_code": status.get("exit_code"),
        "duration_s": status.get("duration_s"),
        "started": m.get("started"),
        "paused": gpu.get("pauses") if isinstance(gpu, dict) else None,
        "paused_s": gpu.get("paused_s") if isinstance(gpu, dict) else None,
        "replay_of": m.get("replay_of"),
        "note": m.get("note"),
        "fidelity": m.get("fidelity") or ((m.get("replay") or {}).get("fidelity") or {}).get("verdict"),
        "tags": m.get("tags") or [],
        "archived": bool(m.get("archived")),
        "trackers": m.get("trackers"),
    }
