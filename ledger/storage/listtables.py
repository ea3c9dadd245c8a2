"""The listing index's tables in `.git/ledger/manifests.sqlite` and how their values are packed.

Each table is named with the code version (`x?_<version>`, `ledger/cache.py`): a new ledger starts
new tables, so no row is ever read by code other than the code that wrote it.

- `xr` (runs): one row per run folder, keyed by (run id, folder tree id): its entry (tree and
  blob ids), listing fields (summary.json with meta.json laid over it) or why it is broken, the
  cells `ledger list` prints and the `ListFields` it shows (their values' tuple), which of those
  decide the default table's columns (`flags`: tags, a note, a replay, archived: `TABLE_FLAGS`), its
  start time and name (what listings sort and names look up), and the key sets of its setting and
  metric names;
- `xx` (texts): a run's settings and summary metrics as compressed JSON text (`list --json`
  prints them as they are), written the first time something asks for them;
- `xs` and `xm` (shards): per `runs/<xx>` shard tree id, that it is complete (its run count and
  the key sets of its runs' settings and metrics), and which `xr` rows it holds;
- `xt` (trees): per `runs/` tree id, its shard tree ids, and the default `ledger list` table
  once printed (a view of exactly that tree);
- `xc` and `xq` (columns): one setting or summary metric of each run (what a `--where` reads), made
  the first time a filter names it, and for which shards it is complete;
- `xk`: the sets of setting and metric names, shared by the runs that have the same set.

Values are plain data (`marshal`, JSON text: loading one runs no code); one that fails to load or
has the wrong shape raises `Damaged`, and the caller reads again from git.
"""

from __future__ import annotations

import json
import marshal
import sqlite3
import zlib
from typing import Any

from ledger.storage.store import RunEntry

CHUNK = 500  # SQL parameters per statement


class Damaged(Exception):
    """A part of the index that cannot be used: the caller reads again from git."""


def table_names(version: str) -> dict[str, str]:
    return {k: f"x{k}_{version}" for k in "rxsmtcqk"}


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS {r} (k INTEGER PRIMARY KEY, id TEXT NOT NULL, tree TEXT NOT NULL, entry BLOB, broken TEXT,"
    " started BLOB, name BLOB, archived INTEGER, sk INTEGER, mk INTEGER, fields BLOB, cells BLOB, shown BLOB, flags INTEGER,"
    " UNIQUE (id, tree))",
    "CREATE TABLE IF NOT EXISTS {x} (k INTEGER PRIMARY KEY, settings BLOB, metrics BLOB)",
    "CREATE TABLE IF NOT EXISTS {s} (shard TEXT PRIMARY KEY, n INTEGER, skeys BLOB, mkeys BLOB)",
    "CREATE TABLE IF NOT EXISTS {m} (shard TEXT, k INTEGER, PRIMARY KEY (shard, k)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS {t} (tree TEXT PRIMARY KEY, shards BLOB, written REAL, view BLOB)",
    "CREATE TABLE IF NOT EXISTS {c} (col TEXT, k INTEGER, val TEXT, num REAL, PRIMARY KEY (col, k)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS {q} (col TEXT, shard TEXT, PRIMARY KEY (col, shard)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS {k} (ks INTEGER PRIMARY KEY, keys BLOB UNIQUE)",
    "CREATE INDEX IF NOT EXISTS {m}_k ON {m} (k)",  # a run looked up by id or name, then whether this tree's shards hold it
    "CREATE INDEX IF NOT EXISTS {r}_name ON {r} (name)",
    "CREATE INDEX IF NOT EXISTS {r}_broken ON {r} (broken) WHERE broken IS NOT NULL",
)


def create_tables(db: sqlite3.Connection, version: str) -> None:
    names = table_names(version)
    for sql in _SCHEMA:
        db.execute(sql.format(**names))


def copy_to_memory(source: sqlite3.Connection | None, version: str) -> sqlite3.Connection:
    """A database in memory: a copy of `source` (empty when there is none or it cannot be read),
    with the index's tables."""
    db = sqlite3.connect(":memory:")
    try:
        if source is not None:
            source.backup(db)
        create_tables(db, version)
    except sqlite3.Error:
        db.close()
        db = sqlite3.connect(":memory:")
        create_tables(db, version)
    return db


def text_key(text: str) -> bytes:
    """A text as SQLite compares it: UTF-8 bytes (a name with undecodable bytes keeps them as
    surrogates, which UTF-8 cannot hold; `surrogatepass` keeps the code-point order)."""
    return text.encode("utf-8", "surrogatepass")


def pack(value: Any) -> bytes:
    return zlib.compress(json.dumps(value, default=str).encode(), 1)


def unpack_json(blob: Any) -> bytes:
    """The JSON text of a run's settings or metrics as `pack` wrote it, as bytes: ASCII
    (`json.dumps` escapes every other character), so a JSON output takes them as they are;
    Damaged when they are not."""
    try:
        text = zlib.decompress(blob)
    except (zlib.error, TypeError) as exc:
        raise Damaged from exc
    if not text.isascii():
        raise Damaged
    return text


def loads(blob: Any, kind: type) -> Any:
    """A marshalled value of type `kind`; Damaged when it is not one."""
    try:
        value = marshal.loads(blob)
    except (ValueError, EOFError, TypeError) as exc:
        raise Damaged from exc
    if type(value) is not kind:
        raise Damaged
    return value


def entry_of(blob: Any) -> RunEntry:
    t = loads(blob, tuple)
    if len(t) != 7 or not all(type(x) is str for x in t[:3]):
        raise Damaged
    return RunEntry(*t)


def entry_tuple(e: RunEntry) -> tuple[str | None, ...]:
    return (e.id, e.path, e.tree, e.manifest_blob, e.summary_blob, e.settings_blob, e.meta_blob)
