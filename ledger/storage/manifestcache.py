"""`.git/ledger/manifests.sqlite` and the run records read through it: parsed manifests by blob id,
the read-only switch of commands that promise to write nothing, and the checked parse of a run's
manifest.yaml.

A blob id names its content, so a parsed manifest kept under it never goes stale. The file lives in
the git common dir, shared by worktrees and never part of the working tree; it also holds the
listing index's tables (`storage/listindex.py`).
"""

from __future__ import annotations

import contextvars
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ledger import yamlio
from ledger.cache import code_version
from ledger.manifest import RUN_ID_RE, ManifestError, check_manifest
from ledger.runrecord import RunRecord
from ledger.storage.git import Repo
from ledger.storage.limits import MAX_SETTINGS, check_depth, decoded
from ledger.storage.listtables import create_tables, table_names
from ledger.storage.store import RunEntry

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


def is_read_only() -> bool:
    """Whether this is inside `read_only()`."""
    return _READ_ONLY.get()


# the modules whose code, with all they import, computes what the database holds: the rows, and
# the default table kept per `runs/` tree (laid out by `listtable`, which the listing never imports)
LISTING_CODE = ("ledger.storage.listing", "ledger.storage.listtable")


class ManifestCache:
    """`.git/ledger/manifests.sqlite`: parsed manifests by blob id (table `m_<code version>`) and
    the listing index (tables `x?_<code version>`, `storage/listindex.py`).

    A file sqlite cannot read (damaged, truncated, not a database) is removed and made again: a
    cache is never an error."""

    def __init__(self, common_dir: Path):
        self.path = common_dir / "ledger" / "manifests.sqlite"
        self._db: sqlite3.Connection | None = None
        # one table per version of the code that reads run folders into rows (ledger/cache.py);
        # older tables are dropped
        self.version = code_version(*LISTING_CODE)
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
        out = {}
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
    check_id(m, where, "manifest.yaml")
    decoded(what, len(m.get("settings") or {}))
    return RunRecord.from_dict(m, where), m


def check_id(data: dict[str, Any], where: str, name: str) -> None:
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


def yaml_manifest(repo: Repo, e: RunEntry, cache: ManifestCache) -> dict[str, Any]:
    """A run's manifest.yaml, parsed once per blob (the blob-id cache), as plain JSON data."""
    if e.manifest_blob is None:
        return {}
    found = cache.get(e.manifest_blob)
    if found is not None:
        return found
    m: dict[str, Any] = json.loads(json.dumps(parse_manifest(repo.read_blob(e.manifest_blob), e.path), default=str))
    cache.put_many({e.manifest_blob: m})
    return m
