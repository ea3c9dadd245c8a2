"""The listing index: what `ledger list`, its filters and run names need of every run, in SQLite.

Reading 100,000 run folders means 100,000 tree reads and 200,000 JSON parses; the index turns a
listing at a known tip into SQL over a few tables of `.git/ledger/manifests.sqlite`
(`storage/listing.py`'s `ManifestCache`), each named with the code version (`x?_<version>`):

- `xr` (runs): one row per run folder, keyed by (run id, folder tree id): its entry (tree and
  blob ids), listing fields (summary.json with meta.json laid over it) or why it is broken, the
  cells `ledger list` prints, its start time and name (what listings sort and names look up), and
  its settings and summary metrics as compressed JSON text (`list --json` prints them as they are);
- `xs` and `xm` (shards): per `runs/<xx>` shard tree id, that it is complete (its run count and
  the names of its runs' settings and metrics), and which `xr` rows it holds;
- `xt` (trees): per `runs/` tree id, its shard tree ids, and the default `ledger list` table
  once printed (a view of exactly that tree);
- `xc` and `xq` (columns): one setting or summary metric of each run (what a `--where` reads), made
  the first time a filter names it, and for which shards it is complete;
- `xk`: the sets of setting and metric names, shared by the runs that have the same set.

Nothing in it can be stale: every row is keyed by the git tree id it was derived from, and a
listing reads only the shards named by its own `runs/` tree. A new tip (a run, a tag, a pull)
changes a few shards; only those are indexed again, and in them only run folders whose tree id has
no row yet are read from git, through the same size and depth limits as a cold read. Values are
plain data (`marshal`, JSON text: loading one runs no code); a row that fails to load or does not
belong where it is filed is a miss: the index is emptied and read again from git.
"""

from __future__ import annotations

import json
import marshal
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ledger.errors import LedgerError
from ledger.manifest import RUN_ID_RE, shard_of
from ledger.storage.git import MODE_TREE, Repo
from ledger.storage.store import SHARD_RE, RunEntry, run_entry

KEEP_TREES = 3  # `runs/` trees whose shards are kept (a few worktrees or branches listed in turn)
STALE_SHARDS = 64  # shards no kept tree names, collected once there are this many
CHUNK = 500  # SQL parameters per statement


@dataclass
class RunRow:
    """One run folder as read from git: its listing fields (or why it is broken), settings,
    summary metrics and table cells (`listing.table_cells`)."""

    entry: RunEntry
    fields: dict[str, Any] | None
    broken: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    cells: tuple[str, ...] = ()


ReadRun = Callable[[RunEntry], RunRow]


class Damaged(Exception):
    """A part of the index that cannot be used: the caller reads again from git."""


def table_names(version: str) -> dict[str, str]:
    return {k: f"x{k}_{version}" for k in "rxsmtcqk"}


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS {r} (k INTEGER PRIMARY KEY, id TEXT NOT NULL, tree TEXT NOT NULL, entry BLOB, broken TEXT,"
    " started BLOB, name BLOB, archived INTEGER, sk INTEGER, mk INTEGER, fields BLOB, cells BLOB, UNIQUE (id, tree))",
    "CREATE TABLE IF NOT EXISTS {x} (k INTEGER PRIMARY KEY, settings BLOB, metrics BLOB)",
    "CREATE TABLE IF NOT EXISTS {s} (shard TEXT PRIMARY KEY, n INTEGER, skeys BLOB, mkeys BLOB)",
    "CREATE TABLE IF NOT EXISTS {m} (shard TEXT, k INTEGER, PRIMARY KEY (shard, k)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS {t} (tree TEXT PRIMARY KEY, shards BLOB, written REAL, view BLOB)",
    "CREATE TABLE IF NOT EXISTS {c} (col TEXT, k INTEGER, val TEXT, num REAL, PRIMARY KEY (col, k)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS {q} (col TEXT, shard TEXT, PRIMARY KEY (col, shard)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS {k} (ks INTEGER PRIMARY KEY, keys BLOB UNIQUE)",
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


def _pack(value: Any) -> bytes:
    return zlib.compress(json.dumps(value, default=str).encode(), 1)


def unpack_text(blob: Any) -> str:
    """The JSON text of a run's settings or metrics as stored; Damaged when it is not."""
    try:
        return zlib.decompress(blob).decode()
    except (zlib.error, TypeError, UnicodeDecodeError) as exc:
        raise Damaged from exc


def _loads(blob: Any, kind: type) -> Any:
    try:
        value = marshal.loads(blob)
    except (ValueError, EOFError, TypeError) as exc:
        raise Damaged from exc
    if type(value) is not kind:
        raise Damaged
    return value


def _entry(blob: Any) -> RunEntry:
    t = _loads(blob, tuple)
    if len(t) != 7 or not all(type(x) is str for x in t[:3]):
        raise Damaged
    return RunEntry(*t)


def _entry_tuple(e: RunEntry) -> tuple[str | None, ...]:
    return (e.id, e.path, e.tree, e.manifest_blob, e.summary_blob, e.settings_blob, e.meta_blob)


class ListIndex:
    """The index in one SQLite connection: `update` makes it hold one `runs/` tree and returns the
    `View` of it. `read_only`: the file is never written; what it lacks is made in a copy of it
    in memory."""

    def __init__(self, db: sqlite3.Connection, version: str, read_only: bool = False):
        self.db = db
        self.version = version
        self.t = table_names(version)
        self.read_only = read_only
        self._keysets: dict[tuple[str, ...], int] = {}
        self._next_k: int | None = None
        self.read_run: ReadRun | None = None

    def _sql(self, text: str) -> str:
        return text.format(**self.t)

    def _writable(self) -> None:
        """A read-only index goes on as a copy of itself in memory (the file stays as it was)."""
        if self.read_only:
            self.db = copy_to_memory(self.db, self.version)
            self.read_only = False

    def clear(self) -> bool:
        """Empty every table of the index (found damaged); False when that fails too."""
        try:
            with self.db:
                for table in self.t.values():
                    self.db.execute(f"DELETE FROM {table}")
        except sqlite3.Error:
            return False
        self._keysets.clear()
        self._next_k = None
        return True

    def update(self, repo: Repo, runs_tree: str, read_run: ReadRun) -> View:
        """The view of `runs_tree`, every shard of it indexed (from git where missing)."""
        shards = [(name, oid) for name, oid, mode in repo.list_tree(runs_tree) if mode == MODE_TREE and SHARD_RE.match(name)]
        keys = {f"{oid}/{name}": name for name, oid in shards}
        self.read_run = read_run
        try:
            have = {s for s, _n in self._select("SELECT shard, n FROM {s} WHERE shard IN ({marks})", list(keys))}
            known = self.db.execute(self._sql("SELECT 1 FROM {t} WHERE tree = ?"), (runs_tree,)).fetchone() is not None
            missing = [k for k in keys if k not in have]
            if missing or not known:
                self._writable()
                with self.db:
                    for key in missing:
                        self._build_shard(repo, key, keys[key], read_run)
                    if not known:
                        row = (runs_tree, marshal.dumps(sorted(keys)), time.time())
                        self.db.execute(self._sql("INSERT OR REPLACE INTO {t} VALUES (?, ?, ?, NULL)"), row)
                        self._collect()
        except sqlite3.Error as exc:
            raise Damaged from exc
        return View(self, runs_tree, keys)

    def _select(self, sql: str, items: list[Any], *params: Any) -> Iterator[tuple[Any, ...]]:
        """Rows of `sql` ({marks}: the placeholders of one chunk of `items`), chunk by chunk."""
        for i in range(0, len(items), CHUNK):
            chunk = items[i : i + CHUNK]
            yield from self.db.execute(self._sql(sql.replace("{marks}", ",".join("?" * len(chunk)))), (*params, *chunk))

    def _keyset(self, names: tuple[str, ...]) -> int:
        found = self._keysets.get(names)
        if found is None:
            blob = marshal.dumps(names)
            self.db.execute(self._sql("INSERT OR IGNORE INTO {k} (keys) VALUES (?)"), (blob,))
            (found,) = self.db.execute(self._sql("SELECT ks FROM {k} WHERE keys = ?"), (blob,)).fetchone()
            self._keysets[names] = found
        return found

    def _build_shard(self, repo: Repo, key: str, name: str, read_run: ReadRun) -> None:
        """Index one shard tree: the rows its run folders already have, the others read from git."""
        oid = key.split("/", 1)[0]
        runs = [
            (rid, tree) for rid, tree, mode in repo.list_tree(oid) if mode == MODE_TREE and RUN_ID_RE.match(rid) and shard_of(rid) == name
        ]
        ids = [rid for rid, _tree in runs]
        stored = {
            (rid, tree): (k, sk, mk)
            for k, rid, tree, sk, mk in self._select("SELECT k, id, tree, sk, mk FROM {r} WHERE id IN ({marks})", ids)
        }
        rows: list[tuple[int, int, int]] = []
        new: list[tuple[Any, ...]] = []
        for rid, tree in runs:
            found = stored.get((rid, tree))
            if found is None:
                values = self._row(_read(repo, rid, f"runs/{name}/{rid}", tree, read_run))
                new.append(values)
                found = (values[0], values[8], values[9])
            rows.append(found)
        self.db.executemany(self._sql("INSERT INTO {r} VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"), new)
        self.db.executemany(self._sql("INSERT OR IGNORE INTO {m} VALUES (?, ?)"), [(key, r[0]) for r in rows])
        skeys, mkeys = sorted({r[1] for r in rows} - {0}), sorted({r[2] for r in rows} - {0})
        self.db.execute(
            self._sql("INSERT OR REPLACE INTO {s} VALUES (?, ?, ?, ?)"), (key, len(rows), marshal.dumps(skeys), marshal.dumps(mkeys))
        )

    def _row(self, row: RunRow) -> tuple[Any, ...]:
        """A new `xr` row: its key, then the run (its settings and metrics text are written when
        first asked for: `fill_texts`)."""
        if self._next_k is None:
            self._next_k = (self.db.execute(self._sql("SELECT max(k) FROM {r}")).fetchone()[0] or 0) + 1
        k, self._next_k = self._next_k, self._next_k + 1
        e, m = row.entry, row.fields
        entry = marshal.dumps(_entry_tuple(e))
        if m is None:
            return (k, e.id, e.tree, entry, row.broken or f"{e.path}: unreadable", b"", None, 0, 0, 0, None, None)
        name = text_key(m["name"]) if isinstance(m.get("name"), str) else None
        sk, mk = self._keyset(tuple(sorted(row.settings))), self._keyset(tuple(sorted(row.metrics)))
        started = text_key(m.get("started") or "")
        return (
            k,
            e.id,
            e.tree,
            entry,
            None,
            started,
            name,
            1 if m.get("archived") else 0,
            sk,
            mk,
            marshal.dumps(m),
            marshal.dumps(row.cells),
        )

    def fill_texts(self, shards: list[str]) -> None:
        """Write the settings and metrics text of the runs of `shards` that have none yet (read
        from git again, through the same limits)."""
        sql = "SELECT k, entry FROM {m} JOIN {r} USING (k) WHERE broken IS NULL AND k NOT IN (SELECT k FROM {x}) AND shard IN ({marks})"
        self._fill(list(self._select(sql, shards)))

    def _fill(self, todo: list[tuple[Any, ...]]) -> None:
        """Write the settings and metrics text of the rows `todo` names, as (k, entry)."""
        if not todo:
            return
        self._writable()
        assert self.read_run is not None
        done = []
        for k, blob in todo:
            row = self.read_run(_entry(blob))
            if row.fields is None:  # the same folder read before: read the same way again
                raise Damaged
            done.append((k, _pack(row.settings), _pack(row.metrics)))
        try:
            with self.db:
                self.db.executemany(self._sql("INSERT OR REPLACE INTO {x} VALUES (?, ?, ?)"), done)
        except sqlite3.Error as exc:
            raise Damaged from exc

    def _collect(self) -> None:
        """Drop what no kept `runs/` tree names, once enough of it has piled up."""
        trees = self.db.execute(self._sql("SELECT tree, shards FROM {t} ORDER BY written DESC")).fetchall()
        keep: set[str] = set()
        for i, (tree, blob) in enumerate(trees):
            if i >= KEEP_TREES:
                self.db.execute(self._sql("DELETE FROM {t} WHERE tree = ?"), (tree,))
                continue
            try:
                keep.update(_loads(blob, list))
            except Damaged:
                self.db.execute(self._sql("DELETE FROM {t} WHERE tree = ?"), (tree,))
        stale = [s for (s,) in self.db.execute(self._sql("SELECT shard FROM {s}")) if s not in keep]
        if len(stale) < STALE_SHARDS:
            return
        for table in ("s", "m", "q"):
            self.db.executemany(self._sql(f"DELETE FROM {{{table}}} WHERE shard = ?"), [(s,) for s in stale])
        self.db.execute(self._sql("DELETE FROM {r} WHERE k NOT IN (SELECT k FROM {m})"))
        self.db.execute(self._sql("DELETE FROM {x} WHERE k NOT IN (SELECT k FROM {r})"))
        self.db.execute(self._sql("DELETE FROM {c} WHERE k NOT IN (SELECT k FROM {r})"))

    def ensure_column(self, view: View, col: str) -> None:
        """Make the column `col` ("s:<setting>" or "m:<metric>") for every shard of `view`."""
        done = {s for (s,) in self._select("SELECT shard FROM {q} WHERE col = ? AND shard IN ({marks})", list(view.shards), col)}
        todo = [s for s in view.shards if s not in done]
        if not todo:
            return
        self._writable()
        self.fill_texts(todo)
        kind, key = col.split(":", 1)
        source = "settings" if kind == "s" else "metrics"
        rows: list[tuple[str, int, str, float | None]] = []
        for k, blob in self._select(f"SELECT k, {source} FROM {{m}} JOIN {{x}} USING (k) WHERE shard IN ({{marks}})", todo):
            try:
                values = json.loads(unpack_text(blob))
            except ValueError as exc:
                raise Damaged from exc
            if type(values) is not dict:
                raise Damaged
            if key in values:
                value = values[key]
                rows.append((col, k, json.dumps(value, default=str), _last(value) if kind == "m" else None))
        try:
            with self.db:
                self.db.executemany(self._sql("INSERT OR IGNORE INTO {c} VALUES (?, ?, ?, ?)"), rows)
                self.db.executemany(self._sql("INSERT OR IGNORE INTO {q} VALUES (?, ?)"), [(col, s) for s in todo])
        except sqlite3.Error as exc:
            raise Damaged from exc


def _raise() -> Any:
    raise Damaged


def _last(entry: Any) -> float | None:
    value = entry.get("last") if isinstance(entry, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class View:
    """Every run at one `runs/` tree, read from the index by SQL."""

    def __init__(self, index: ListIndex, runs_tree: str, shards: dict[str, str]):
        self.index = index
        self.runs_tree = runs_tree
        self.shards = shards  # "<shard tree id>/<name>" -> name

    def _sql(self, text: str) -> str:
        return self.index._sql(text)

    def _where(self) -> tuple[str, list[str]]:
        return f"shard IN ({','.join('?' * len(self.shards))})", list(self.shards)

    def rows(
        self, columns: str, cond: str = "", params: tuple[Any, ...] = (), order: str = "started, id", by_run: bool = False
    ) -> list[tuple[Any, ...]]:
        """`columns` of this view's runs (`xr` columns; `shard` too), `cond` holding, in `order`.
        `by_run`: `cond` picks a few rows by an indexed column (a name, an id), looked up first."""
        where, shard_params = self._where()
        cond_sql = f" AND ({cond})" if cond else ""
        if by_run:  # the rows `cond` names, then whether this view holds them
            sql = f"SELECT {columns} FROM {{r}} CROSS JOIN {{m}} USING (k) WHERE {where}{cond_sql}"
        else:  # the view's runs drive the loop
            sql = f"SELECT {columns} FROM {{m}} CROSS JOIN {{r}} USING (k) WHERE {where}{cond_sql}"
        sql += f" ORDER BY {order}" if order else ""
        try:
            return self.index.db.execute(self._sql(sql), (*shard_params, *params)).fetchall()
        except sqlite3.Error as exc:
            raise Damaged from exc

    def check(self) -> None:
        """Every shard's rows are there (a count that differs from the shard's: damaged); that
        each row is its shard's own run is checked as rows are read (`_own`)."""
        where, params = self._where()
        try:
            counts = dict(
                self.index.db.execute(self._sql(f"SELECT shard, count(*) FROM {{m}} WHERE {where} GROUP BY shard"), params).fetchall()
            )
            stored = dict(self.index.db.execute(self._sql(f"SELECT shard, n FROM {{s}} WHERE {where}"), params).fetchall())
        except sqlite3.Error as exc:
            raise Damaged from exc
        if any(stored.get(s) != counts.get(s, 0) for s in self.shards):
            raise Damaged

    def key_names(self) -> tuple[set[str], set[str]]:
        """Every setting name and every metric name any run of the view has."""
        where, params = self._where()
        sk: set[int] = set()
        mk: set[int] = set()
        settings: set[str] = set()
        metrics: set[str] = set()
        try:
            for s_ids, m_ids in self.index.db.execute(self._sql(f"SELECT skeys, mkeys FROM {{s}} WHERE {where}"), params):
                sk.update(_loads(s_ids, list))
                mk.update(_loads(m_ids, list))
            for ks, blob in self.index._select("SELECT ks, keys FROM {k} WHERE ks IN ({marks})", sorted(sk | mk)):
                names = _loads(blob, tuple)
                if ks in sk:
                    settings.update(names)
                if ks in mk:
                    metrics.update(names)
        except sqlite3.Error as exc:
            raise Damaged from exc
        return settings, metrics

    def broken(self) -> dict[str, str]:
        out = {}
        for rid, why in self.rows("id, broken", "broken IS NOT NULL", by_run=True):
            if type(rid) is not str or type(why) is not str:
                raise Damaged
            out[rid] = why
        return out

    def _own(self, shard: Any, rid: Any) -> None:
        """A row filed under a shard whose name is not its run's shard: damaged."""
        if type(rid) is not str or shard_of(rid) != self.shards.get(shard):
            raise Damaged

    def entries(self, cond: str = "", params: tuple[Any, ...] = ()) -> dict[str, RunEntry]:
        out = {}
        for shard, rid, blob in self.rows("shard, id, entry", cond, params, by_run=bool(cond)):
            self._own(shard, rid)
            e = _entry(blob)
            if e.id != rid:
                raise Damaged
            out[rid] = e
        return out

    def fields(self, cond: str = "", params: tuple[Any, ...] = (), cells: bool = False) -> dict[str, Any]:
        """Listing fields by run id, oldest first (by start time, then id); `cells`: with each
        run's table cells, as (fields, cells)."""
        out: dict[str, Any] = {}
        both = "broken IS NULL" + (f" AND ({cond})" if cond else "")
        for shard, rid, blob, cell_blob in self.rows("shard, id, fields, cells", both, params, by_run=bool(cond)):
            self._own(shard, rid)
            m = _loads(blob, dict)
            if m.get("id") != rid:
                raise Damaged
            if cells:
                c = _loads(cell_blob, tuple)
                if len(c) != 9 or not all(type(x) is str for x in c):
                    raise Damaged
                out[rid] = (m, c)
            else:
                out[rid] = m
        return out

    def texts(self, kind: str, cond: str = "", params: tuple[Any, ...] = ()) -> dict[str, str]:
        """Each run's settings (`kind` "settings") or summary metrics ("metrics") as JSON text."""
        assert kind in ("settings", "metrics")
        self.index.fill_texts(list(self.shards))
        where, shard_params = self._where()
        sql = f"SELECT r.id, x.{kind} FROM {{m}} m CROSS JOIN {{r}} r ON r.k = m.k CROSS JOIN {{x}} x ON x.k = m.k WHERE m.{where}" + (
            f" AND ({cond})" if cond else ""
        )
        try:
            found = self.index.db.execute(self._sql(sql), (*shard_params, *params)).fetchall()
        except sqlite3.Error as exc:
            raise Damaged from exc
        return {rid: unpack_text(blob) for rid, blob in found}

    def record(self, rid: str, tree: str) -> dict[str, Any] | None:
        """One run's listing fields with its `settings` and `metrics` (None: broken or not here);
        only its own text is read (or written, the first time)."""
        found = self.rows("k, shard, id, fields, entry", "broken IS NULL AND id = ? AND tree = ?", (rid, tree), by_run=True)
        if not found:
            return None
        k, shard, rid, blob, entry = found[0]
        self._own(shard, rid)
        m: dict[str, Any] = _loads(blob, dict)
        db = self.index.db
        try:
            if db.execute(self._sql("SELECT 1 FROM {x} WHERE k = ?"), (k,)).fetchone() is None:
                self.index._fill([(k, entry)])
                db = self.index.db  # a read-only index is copied into memory to be written
            texts = db.execute(self._sql("SELECT settings, metrics FROM {x} WHERE k = ?"), (k,)).fetchone()
            m["settings"], m["metrics"] = json.loads(unpack_text(texts[0])), json.loads(unpack_text(texts[1]))
        except (sqlite3.Error, ValueError, TypeError) as exc:
            raise Damaged from exc
        return m

    def column(self, col: str, with_num: bool = False) -> dict[str, Any]:
        """One setting or metric of every run that has it, by run id: its value (runs with the
        same value share one object), or (`with_num`) the metric's last value as a number."""
        self.index.ensure_column(self, col)
        where, params = self._where()
        pick = "c.num" if with_num else "c.val"
        # CROSS JOIN: the shards' runs drive the loop (SQLite would probe every shard per cell)
        joins = "{m} m CROSS JOIN {c} c ON c.col = ? AND c.k = m.k CROSS JOIN {r} r ON r.k = m.k"
        sql = f"SELECT r.id, {pick} FROM {joins} WHERE m.{where}"
        try:
            found = self.index.db.execute(self._sql(sql), (col, *params)).fetchall()
        except sqlite3.Error as exc:
            raise Damaged from exc
        if with_num:
            if not all(v is None or type(v) is float for _r, v in found):
                raise Damaged
            return dict(found)
        parsed: dict[Any, Any] = {}
        out = {}
        for rid, text in found:
            if text not in parsed:
                try:
                    parsed[text] = json.loads(text) if type(text) is str else _raise()
                except ValueError as exc:
                    raise Damaged from exc
            out[rid] = parsed[text]
        return out

    def stored_view(self) -> str | None:
        try:
            found = self.index.db.execute(self._sql("SELECT view FROM {t} WHERE tree = ?"), (self.runs_tree,)).fetchone()
            return zlib.decompress(found[0]).decode("utf-8", "surrogatepass") if found is not None and found[0] is not None else None
        except (sqlite3.Error, zlib.error, TypeError, UnicodeDecodeError):
            return None

    def store_view(self, text: str) -> None:
        """Keep the default table of this tree (a cache: a failure to write is only a miss)."""
        if self.index.read_only:
            return
        try:
            with self.index.db:
                self.index.db.execute(
                    self._sql("UPDATE {t} SET view = ? WHERE tree = ?"),
                    (zlib.compress(text.encode("utf-8", "surrogatepass"), 1), self.runs_tree),
                )
        except sqlite3.Error:
            pass


def _read(repo: Repo, run_id: str, path: str, tree: str, read_run: ReadRun) -> RunRow:
    """One run folder's row; a folder whose files are not files (`store.run_entry`) is a broken
    row, its entry naming none of them."""
    try:
        entry = run_entry(repo, run_id, path, tree)
    except LedgerError as exc:
        return RunRow(RunEntry(run_id, path, tree, None), None, exc.message)
    return read_run(entry)
