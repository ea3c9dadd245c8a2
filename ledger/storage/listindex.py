"""The listing index: what `ledger list`, its filters and run names need of every run, in SQLite.

Reading 100,000 run folders means 100,000 tree reads and JSON parses; the index turns a listing at
a known tip into SQL over a few tables of `.git/ledger/manifests.sqlite` (`storage/listtables.py`
names them; `storage/listview.py` reads them).

Nothing in it can be stale: every row is keyed by the git tree id it was derived from, the tables
by the code version, and a listing reads only the shards named by its own `runs/` tree. A new tip
(a run, a tag, a pull) changes a few shards; only those are indexed again, and in them only run
folders whose tree id has no row yet are read from git, through the same size and depth limits as
a cold read. A cold read (no index yet) reads each folder's tree and record files in one pass over
the shard trees (shared with forked readers when there are many: `storage/coldread.py`) and
writes every row in one transaction; the settings and metrics text is written
the first time a filter, a `--json` or a comparison asks for it (`fill_texts`).
"""

from __future__ import annotations

import json
import marshal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from typing import Any

from ledger.manifest import RUN_ID_RE, shard_of
from ledger.storage.coldread import Prepared, read_batches, read_texts
from ledger.storage.git import MODE_TREE, Repo
from ledger.storage.listrow import RunReader
from ledger.storage.listtables import CHUNK, Damaged, copy_to_memory, entry_of, loads, table_names, unpack_json
from ledger.storage.store import SHARD_RE
from ledger.termstyle import progress

KEEP_TREES = 3  # `runs/` trees whose shards are kept (a few worktrees or branches listed in turn)
PROGRESS_AT = 2000  # run folders one update reads from git before a terminal is shown a bar (~0.4 s)
STALE_SHARDS = 64  # shards no kept tree names, collected once there are this many

Row = tuple[Any, ...]  # an `xr` row's values, in the table's column order


class ListIndex:
    """The index in one SQLite connection: `update` makes it hold one `runs/` tree. `read_only`:
    the file is never written; what it lacks is made in a copy of it in memory."""

    def __init__(self, db: sqlite3.Connection, version: str, read_only: bool = False):
        self.db = db
        self.version = version
        self.t = table_names(version)
        self.read_only = read_only
        self._keysets: dict[tuple[str, ...], int] = {}
        self._next_k: int | None = None
        self.reader: RunReader | None = None

    def sql(self, text: str) -> str:
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

    def update(self, repo: Repo, runs_tree: str, reader: RunReader) -> dict[str, str]:
        """Index every shard of `runs_tree` (from git where missing); its shards, as
        "<shard tree id>/<name>" -> name."""
        shards = [(name, oid) for name, oid, mode in repo.list_tree(runs_tree) if mode == MODE_TREE and SHARD_RE.match(name)]
        keys = {f"{oid}/{name}": name for name, oid in shards}
        self.reader = reader
        try:
            have = {s for s, _n in self.select("SELECT shard, n FROM {s} WHERE shard IN ({marks})", list(keys))}
            known = self.db.execute(self.sql("SELECT 1 FROM {t} WHERE tree = ?"), (runs_tree,)).fetchone() is not None
            missing = [k for k in keys if k not in have]
            if missing or not known:
                self._writable()
                with self.db:
                    self._build_shards(repo, [(key, keys[key]) for key in missing], reader)
                    if not known:
                        row = (runs_tree, marshal.dumps(sorted(keys)), time.time())
                        self.db.execute(self.sql("INSERT OR REPLACE INTO {t} VALUES (?, ?, ?, NULL)"), row)
                        self._collect()
        except sqlite3.Error as exc:
            raise Damaged from exc
        return keys

    def select(self, sql: str, items: list[Any], *params: Any) -> Iterator[tuple[Any, ...]]:
        """Rows of `sql` ({marks}: the placeholders of one chunk of `items`), chunk by chunk."""
        for i in range(0, len(items), CHUNK):
            chunk = items[i : i + CHUNK]
            yield from self.db.execute(self.sql(sql.replace("{marks}", ",".join("?" * len(chunk)))), (*params, *chunk))

    def _keyset(self, names: tuple[str, ...]) -> int:
        found = self._keysets.get(names)
        if found is None:
            blob = marshal.dumps(names)
            self.db.execute(self.sql("INSERT OR IGNORE INTO {k} (keys) VALUES (?)"), (blob,))
            (found,) = self.db.execute(self.sql("SELECT ks FROM {k} WHERE keys = ?"), (blob,)).fetchone()
            self._keysets[names] = found
        return found

    def _build_shards(self, repo: Repo, shards: list[tuple[str, str]], reader: RunReader) -> None:
        """Index shard trees, as (key, name): the rows their run folders already have, the others
        read from git (`coldread`: shared with forked readers when there are many)."""
        plans = []
        for key, name in shards:
            oid = key.split("/", 1)[0]
            runs = [
                (rid, tree)
                for rid, tree, mode in repo.list_tree(oid)
                if mode == MODE_TREE and RUN_ID_RE.match(rid) and shard_of(rid) == name
            ]
            stored = {
                (rid, tree): (k, sk, mk)
                for k, rid, tree, sk, mk in self.select("SELECT k, id, tree, sk, mk FROM {r} WHERE id IN ({marks})", [r for r, _t in runs])
            }
            todo = [(rid, f"runs/{name}/{rid}", tree) for rid, tree in runs if (rid, tree) not in stored]
            plans.append((key, runs, stored, todo))
        total, done = sum(len(todo) for *_rest, todo in plans), 0
        # a fresh clone or a new ledger: seconds at 10,000s of runs, so a terminal sees them go by
        report = progress("reading runs into the listing index", unit="run") if total >= PROGRESS_AT else None
        # closed when the last batch is in: the readers end here, not whenever the generator is collected
        with closing(read_batches(reader, [todo for *_rest, todo in plans])) as read:
            for (key, runs, stored, _todo), prepared in zip(plans, read):
                if report is not None:
                    done += len(prepared)
                    report(done, total)
                new = [self._row(p) for p in prepared]
                stored.update({(r[1], r[2]): (r[0], r[8], r[9]) for r in new})
                rows = [stored[run] for run in runs]
                self.db.executemany(self.sql("INSERT INTO {r} VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"), new)
                self.db.executemany(self.sql("INSERT OR IGNORE INTO {m} VALUES (?, ?)"), [(key, r[0]) for r in rows])
                skeys, mkeys = sorted({r[1] for r in rows} - {0}), sorted({r[2] for r in rows} - {0})
                self.db.execute(
                    self.sql("INSERT OR REPLACE INTO {s} VALUES (?, ?, ?, ?)"), (key, len(rows), marshal.dumps(skeys), marshal.dumps(mkeys))
                )

    def _row(self, p: Prepared) -> Row:
        """A new `xr` row: its key, then the run as read (`coldread.prepare`), its name sets as
        key-set ids (its settings and metrics text are written when first asked for: `fill_texts`)."""
        if self._next_k is None:
            self._next_k = (self.db.execute(self.sql("SELECT max(k) FROM {r}")).fetchone()[0] or 0) + 1
        k, self._next_k = self._next_k, self._next_k + 1
        if p[3] is not None:  # broken
            return (k, *p[:7], 0, 0, *p[9:])
        return (k, *p[:7], self._keyset(p[7]), self._keyset(p[8]), *p[9:])

    def fill_texts(self, shards: list[str]) -> None:
        """Write the settings and metrics text of the runs of `shards` that have none yet (read
        from git again, through the same limits)."""
        sql = "SELECT k, entry FROM {m} JOIN {r} USING (k) WHERE broken IS NULL AND k NOT IN (SELECT k FROM {x}) AND shard IN ({marks})"
        self.fill(list(self.select(sql, shards)))

    def fill(self, todo: list[tuple[Any, ...]]) -> None:
        """Write the settings and metrics text of the rows `todo` names, as (k, entry)."""
        if not todo:
            return
        self._writable()
        assert self.reader is not None
        done = read_texts(self.reader, [(k, entry_of(blob)) for k, blob in todo])
        try:
            with self.db:
                self.db.executemany(self.sql("INSERT OR REPLACE INTO {x} VALUES (?, ?, ?)"), done)
        except sqlite3.Error as exc:
            raise Damaged from exc

    def key_names(self, shards: list[str]) -> tuple[set[str], set[str]]:
        """Every setting name and every metric name any run of `shards` has."""
        sk: set[int] = set()
        mk: set[int] = set()
        settings: set[str] = set()
        metrics: set[str] = set()
        try:
            for _shard, s_ids, m_ids in self.select("SELECT shard, skeys, mkeys FROM {s} WHERE shard IN ({marks})", shards):
                sk.update(loads(s_ids, list))
                mk.update(loads(m_ids, list))
            for ks, blob in self.select("SELECT ks, keys FROM {k} WHERE ks IN ({marks})", sorted(sk | mk)):
                names = loads(blob, tuple)
                if ks in sk:
                    settings.update(names)
                if ks in mk:
                    metrics.update(names)
        except sqlite3.Error as exc:
            raise Damaged from exc
        return settings, metrics

    def _collect(self) -> None:
        """Drop what no kept `runs/` tree names, once enough of it has piled up."""
        trees = self.db.execute(self.sql("SELECT tree, shards FROM {t} ORDER BY written DESC")).fetchall()
        keep: set[str] = set()
        for i, (tree, blob) in enumerate(trees):
            if i >= KEEP_TREES:
                self.db.execute(self.sql("DELETE FROM {t} WHERE tree = ?"), (tree,))
                continue
            try:
                keep.update(loads(blob, list))
            except Damaged:
                self.db.execute(self.sql("DELETE FROM {t} WHERE tree = ?"), (tree,))
        stale = [s for (s,) in self.db.execute(self.sql("SELECT shard FROM {s}")) if s not in keep]
        if len(stale) < STALE_SHARDS:
            return
        for table in ("s", "m", "q"):
            self.db.executemany(self.sql(f"DELETE FROM {{{table}}} WHERE shard = ?"), [(s,) for s in stale])
        self.db.execute(self.sql("DELETE FROM {r} WHERE k NOT IN (SELECT k FROM {m})"))
        self.db.execute(self.sql("DELETE FROM {x} WHERE k NOT IN (SELECT k FROM {r})"))
        self.db.execute(self.sql("DELETE FROM {c} WHERE k NOT IN (SELECT k FROM {r})"))

    def ensure_column(self, shards: list[str], col: str) -> None:
        """Make the column `col` ("s:<setting>" or "m:<metric>") for every one of `shards`."""
        done = {s for (s,) in self.select("SELECT shard FROM {q} WHERE col = ? AND shard IN ({marks})", shards, col)}
        todo = [s for s in shards if s not in done]
        if not todo:
            return
        self._writable()
        self.fill_texts(todo)
        kind, key = col.split(":", 1)
        source = "settings" if kind == "s" else "metrics"
        rows: list[tuple[str, int, str, float | None]] = []
        for k, blob in self.select(f"SELECT k, {source} FROM {{m}} JOIN {{x}} USING (k) WHERE shard IN ({{marks}})", todo):
            try:
                values = json.loads(unpack_json(blob))
            except ValueError as exc:
                raise Damaged from exc
            if type(values) is not dict:
                raise Damaged
            if key in values:
                value = values[key]
                rows.append((col, k, json.dumps(value, default=str), _last(value) if kind == "m" else None))
        try:
            with self.db:
                self.db.executemany(self.sql("INSERT OR IGNORE INTO {c} VALUES (?, ?, ?, ?)"), rows)
                self.db.executemany(self.sql("INSERT OR IGNORE INTO {q} VALUES (?, ?)"), [(col, s) for s in todo])
        except sqlite3.Error as exc:
            raise Damaged from exc


def _last(entry: Any) -> float | None:
    value = entry.get("last") if isinstance(entry, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
