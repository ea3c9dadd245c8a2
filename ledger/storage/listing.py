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
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ledger import yamlio
from ledger.cache import code_version
from ledger.errors import LedgerError
from ledger.manifest import NOT_LEDGERS, RUN_ID_RE, SCHEMA, ManifestError, check_manifest, duration_text
from ledger.runrecord import RunRecord
from ledger.storage.git import MODE_TREE, Repo
from ledger.storage.limits import MAX_METRICS, MAX_SETTINGS, check_count, check_depth, check_files, decoded, load_json, load_settings
from ledger.storage.listindex import Damaged, ListIndex, ReadRun, RunRow, View, copy_to_memory, create_tables, table_names, text_key
from ledger.storage.store import RunEntry
from ledger.storage.summary import check_metrics
from ledger.termstyle import printable_cell
from ledger.textfmt import MISSING, note_cell

T = TypeVar("T")


class Listing:
    """All runs at a branch tip: listing fields by id, entries, and runs that could not be read.

    Read from the listing index (`storage/listindex.py`) as asked: a verb naming one run looks it
    up by SQL (`named`, `with_prefix`, `entry`) and never loads the other runs; `manifests` and
    `entries` load every run the first time they are read."""

    def __init__(
        self,
        manifests: dict[str, dict[str, Any]] | None = None,
        entries: dict[str, RunEntry] | None = None,
        broken: dict[str, str] | None = None,
        setting_keys: set[str] | None = None,
        metric_names: set[str] | None = None,
        view: View | None = None,
        rebuild: Callable[[], View] | None = None,
    ):
        self._manifests = manifests if manifests is not None or view is not None else {}
        self._entries = entries if entries is not None or view is not None else {}
        self.view = view
        self._rebuild = rebuild
        self.broken: dict[str, str] = broken if broken is not None else self._ask(lambda v: v.broken()) if view else {}
        self._keys = (setting_keys or set(), metric_names or set()) if view is None or setting_keys is not None else None

    def _ask(self, question: Callable[[View], T]) -> T:
        """A question to the index; a damaged index is read again from git, once."""
        assert self.view is not None
        try:
            return question(self.view)
        except Damaged:
            if self._rebuild is None:
                raise
            self.view, self._rebuild = self._rebuild(), None
            return question(self.view)

    @property
    def setting_keys(self) -> set[str]:
        """Every setting any run has."""
        return self._key_names()[0]

    @property
    def metric_names(self) -> set[str]:
        """Every summary metric any run has."""
        return self._key_names()[1]

    def _key_names(self) -> tuple[set[str], set[str]]:
        if self._keys is None:
            self._keys = self._ask(lambda v: v.key_names())
        return self._keys

    @property
    def manifests(self) -> dict[str, dict[str, Any]]:
        """Every readable run's listing fields by id, oldest first."""
        if self._manifests is None:
            self._manifests = self._ask(lambda v: v.fields())
        return self._manifests

    @manifests.setter
    def manifests(self, value: dict[str, dict[str, Any]]) -> None:
        self._manifests = value

    @property
    def entries(self) -> dict[str, RunEntry]:
        """Every run folder's entry by id, the broken ones too."""
        if self._entries is None:
            self._entries = self._ask(lambda v: v.entries())
        return self._entries

    def entry(self, run_id: str) -> RunEntry | None:
        if self._entries is not None or self.view is None:
            return self.entries.get(run_id)
        return self._ask(lambda v: v.entries("id = ?", (run_id,))).get(run_id)

    def fields_of(self, entry: RunEntry) -> dict[str, Any]:
        """A run's listing fields; ManifestError saying why when the run could not be read."""
        if self._manifests is not None or self.view is None:
            found = self.manifests.get(entry.id)
        else:
            found = self._ask(lambda v: v.fields("id = ? AND tree = ?", (entry.id, entry.tree))).get(entry.id)
        if found is None:
            raise ManifestError(self.broken.get(entry.id) or f"{entry.path}: not in the listing", NOT_LEDGERS)
        return found

    def field(self, run_id: str, key: str) -> Any:
        """One listing field of a run (None: absent, or the run is broken or not listed)."""
        if self._manifests is not None or self.view is None:
            return (self.manifests.get(run_id) or {}).get(key)
        return (self._ask(lambda v: v.fields("id = ?", (run_id,))).get(run_id) or {}).get(key)

    def record_of(self, entry: RunEntry) -> dict[str, Any]:
        """A run's listing fields with its settings and summary metrics (`settings`, `metrics`),
        read for that run alone; ManifestError saying why when the run could not be read."""
        if self.view is None or (self._manifests is not None and "settings" in (self._manifests.get(entry.id) or {})):
            return self.fields_of(entry)
        found = self._ask(lambda v: v.record(entry.id, entry.tree))
        if found is None:
            raise ManifestError(self.broken.get(entry.id) or f"{entry.path}: not in the listing", NOT_LEDGERS)
        return found

    def ordered(self) -> list[dict[str, Any]]:
        """Manifests oldest first (by start time, then id)."""
        return sorted(self.manifests.values(), key=lambda m: (m.get("started") or "", m["id"]))

    def named(self, names: tuple[str, ...]) -> list[dict[str, Any]]:
        """The listing fields of the runs called one of `names`, oldest first (start time, id)."""
        if self._manifests is not None or self.view is None:
            return [m for m in self.ordered() if m.get("name") is not None and m.get("name") in names]
        keys = tuple(dict.fromkeys(text_key(n) for n in names))
        cond = f"name IN ({','.join('?' * len(keys))})"
        return list(self._ask(lambda v: v.fields(cond, keys)).values())

    def with_prefix(self, prefix: str) -> list[str]:
        """The ids of the runs (broken ones too) that start with `prefix`, sorted."""
        if self._entries is not None or self.view is None:
            return sorted(rid for rid in self.entries if rid.startswith(prefix))
        # a range of the id index: ids are ASCII, every one that starts with `prefix` sorts below prefix + U+FFFF
        found = self._ask(lambda v: v.entries("id >= ? AND id < ?", (prefix, prefix + "\uffff")))
        return sorted(rid for rid in found if rid.startswith(prefix))

    @property
    def loaded(self) -> bool:
        """Whether every run's listing fields are loaded (`manifests` was read)."""
        return self._manifests is not None or self.view is None

    def column(self, col: str, with_num: bool = False) -> dict[str, Any]:
        """One setting (`col` "s:<name>") or summary metric ("m:<name>") of every run that has it
        (`View.column`)."""
        return self._ask(lambda v: v.column(col, with_num)) if self.view is not None else {}

    def texts(self, kind: str) -> dict[str, str]:
        """Every run's settings (`kind` "settings") or summary metrics ("metrics") as JSON text."""
        return self._ask(lambda v: v.texts(kind)) if self.view is not None else {}

    def with_cells(self) -> dict[str, tuple[dict[str, Any], tuple[str, ...]]]:
        """Every readable run's listing fields and table cells, oldest first."""
        found: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = self._ask(lambda v: v.fields(cells=True)) if self.view else {}
        return found

    def stored_table(self) -> str | None:
        """The default `ledger list` table of this very `runs/` tree, as printed before."""
        return self.view.stored_view() if self.view is not None else None

    def store_table(self, text: str) -> None:
        if self.view is not None:
            self.view.store_view(text)

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
    the listing index (tables `x?_<code version>`, `storage/listindex.py`).

    A file sqlite cannot read (damaged, truncated, not a database) is removed and made again: a
    cache is never an error."""

    def __init__(self, common_dir: Path):
        self.path = common_dir / "ledger" / "manifests.sqlite"
        self._db: sqlite3.Connection | None = None
        # one table per version of the parsing code (ledger/cache.py); older tables are dropped
        self.version = code_version()
        self._table = f"m_{self.version}"
        self._tables = {self._table, *table_names(self.version).values()}
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
            if name not in self._tables:
                self._db.execute(f'DROP TABLE IF EXISTS "{name}"')
        self._db.execute(f"CREATE TABLE IF NOT EXISTS {self._table} (blob TEXT PRIMARY KEY, json TEXT)")
        create_tables(self._db, self.version)
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
    (`storage/listindex.py`), by git tree id; `cold` reads every folder from git instead.
    """
    listing = listing_at(repo, tip, cold)
    if listing.view is None:
        return listing
    if with_settings:
        settings, metrics = listing.texts("settings"), listing.texts("metrics")
        for rid, m in listing.manifests.items():
            m["settings"], m["metrics"] = json.loads(settings.get(rid, "{}")), json.loads(metrics.get(rid, "{}"))
        return listing
    names = set(metric_names) | {n for n in listing.metric_names if any(fnmatch.fnmatchcase(n, g) for g in metric_globs)}
    for kind, keys, known in (("settings", set(setting_keys), listing.setting_keys), ("metrics", names, listing.metric_names)):
        for key in sorted(keys & known):
            for rid, value in listing.column(f"{kind[0]}:{key}").items():
                if rid in listing.manifests:
                    listing.manifests[rid].setdefault(kind, {})[key] = value
    return listing


def listing_at(repo: Repo, tip: str | None, cold: bool = False) -> Listing:
    """The runs at `tip`, read from the listing index as asked (nothing loaded yet but the
    broken runs and the names of every setting and metric)."""
    if tip is None:
        return Listing()
    runs_tree = repo.tree_entry(tip, "runs")
    if runs_tree is None or runs_tree[1] != MODE_TREE:
        return Listing()
    cache = ManifestCache(repo.common_dir)

    def read(e: RunEntry) -> RunRow:
        return read_run(repo, e, cache)

    if cold:
        return Listing(view=ListIndex(copy_to_memory(None, cache.version), cache.version).update(repo, runs_tree[0], read))

    def rebuild() -> View:  # found damaged while reading: emptied and every folder read again
        return _open_view(repo, runs_tree[0], cache, read, clear=True)

    return Listing(view=_open_view(repo, runs_tree[0], cache, read), rebuild=rebuild)


def _open_view(repo: Repo, runs_tree: str, cache: ManifestCache, read: ReadRun, clear: bool = False) -> View:
    """The index of `runs_tree` in the cache file, brought up to date (a read-only one in a copy in
    memory), or in memory alone when the file cannot be used or is found damaged twice; `clear`:
    emptied first (it was found damaged)."""
    read_only = _READ_ONLY.get()
    index = ListIndex(
        cache.db if cache.db is not None and not (clear and read_only) else copy_to_memory(None, cache.version), cache.version, read_only
    )
    if clear and not index.read_only and not index.clear():
        index = ListIndex(copy_to_memory(None, cache.version), cache.version)
    for _attempt in range(2):
        try:
            view = index.update(repo, runs_tree, read)
            view.check()
            return view
        except Damaged:
            if index.read_only:
                index = ListIndex(copy_to_memory(None, cache.version), cache.version)
            elif not index.clear():
                break
    return ListIndex(copy_to_memory(None, cache.version), cache.version).update(repo, runs_tree, read)


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
    return RunRow(e, m, None, settings if isinstance(settings, dict) else {}, metrics, table_cells(m))


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


def table_cells(m: dict[str, Any]) -> tuple[str, ...]:
    """A recorded run's cells in `ledger list`'s table: ID, NAME, STATE, EXIT, TIME, PAUSED,
    STARTED, then its TAGS and NOTE cells (shown when a listed run has tags, a note), each
    printable (`termstyle.printable_cell`: a pulled name's newline stays in its cell)."""
    s = list_fields(m)
    paused = "-" if s["paused"] is None else f"{s['paused']} ({_duration(s['paused_s'])})" if s["paused"] else "0"
    state = s["state"] or "-"
    if s["replay_of"]:
        state += "*" + (f" ({s['fidelity']})" if s.get("fidelity") else "")
    if s["archived"]:  # shown only with --archived
        state += " (archived)"
    exit_code = "-" if s["exit_code"] is None else str(s["exit_code"])
    started = (s["started"] or "-")[:19].replace("T", " ")
    tags = ",".join(s["tags"] or []) or "-"
    cells = (s["id"], s["name"] or "-", state, exit_code, _duration(s["duration_s"]), paused, started, tags, note_cell(s["note"]))
    return tuple(printable_cell(str(c)) for c in cells)


def _duration(s: Any) -> str:
    return duration_text(s) if isinstance(s, (int, float)) else MISSING
