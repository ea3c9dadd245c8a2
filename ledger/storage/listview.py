"""Reading the listing index (`storage/listindex.py`) at one `runs/` tree: every question a listing
or a run name asks is SQL over the rows of that tree's shards, each row checked as it is read (a
value of the wrong type, a row filed under another run's shard: `Damaged`, and the caller reads
again from git)."""

from __future__ import annotations

import json
import sqlite3
import zlib
from typing import Any

from ledger.manifest import shard_of
from ledger.storage.git import Repo
from ledger.storage.listindex import ListIndex
from ledger.storage.listrow import Listed, ListFields, RunReader
from ledger.storage.listtables import Damaged, entry_of, loads, unpack_text
from ledger.storage.store import RunEntry
from ledger.storage.summary import SettingValue


def index_view(index: ListIndex, repo: Repo, runs_tree: str, reader: RunReader) -> View:
    """The view of `runs_tree`, every shard of it indexed (from git where missing)."""
    return View(index, runs_tree, index.update(repo, runs_tree, reader))


_SHOWN = len(ListFields.__struct_fields__)  # the values of a run's `ListFields`, as the index keeps them


def _raise() -> Any:
    raise Damaged


class View:
    """Every run at one `runs/` tree, read from the index by SQL."""

    def __init__(self, index: ListIndex, runs_tree: str, shards: dict[str, str]):
        self.index = index
        self.runs_tree = runs_tree
        self.shards = shards  # "<shard tree id>/<name>" -> name

    def sql(self, text: str) -> str:
        return self.index.sql(text)

    def _where(self) -> tuple[str, list[str]]:
        return f"shard IN ({','.join('?' * len(self.shards))})", list(self.shards)

    def rows(
        self, columns: str, cond: str = "", params: tuple[Any, ...] = (), order: str = "started, id", by_run: bool = False
    ) -> list[tuple[Any, ...]]:
        """`columns` of this view's runs (`xr` columns; `shard` too), `cond` holding, in `order`.
        `by_run`: `cond` picks a few rows by an indexed column (a name, an id), looked up first."""
        where, shard_params = self._where()
        cond_sql = f" AND ({cond})" if cond else ""
        if by_run:  # the rows `cond` names, then whether this view holds them (`+`: by the index on k, not one probe per shard)
            sql = f"SELECT {columns} FROM {{r}} CROSS JOIN {{m}} USING (k) WHERE +{where}{cond_sql}"
        else:  # the view's runs drive the loop
            sql = f"SELECT {columns} FROM {{m}} CROSS JOIN {{r}} USING (k) WHERE {where}{cond_sql}"
        sql += f" ORDER BY {order}" if order else ""
        try:
            return self.index.db.execute(self.sql(sql), (*shard_params, *params)).fetchall()
        except sqlite3.Error as exc:
            raise Damaged from exc

    def check(self) -> None:
        """Every shard's rows are there (a count that differs from the shard's: damaged); that
        each row is its shard's own run is checked as rows are read (`_own`)."""
        where, params = self._where()
        try:
            counts = dict(
                self.index.db.execute(self.sql(f"SELECT shard, count(*) FROM {{m}} WHERE {where} GROUP BY shard"), params).fetchall()
            )
            stored = dict(self.index.db.execute(self.sql(f"SELECT shard, n FROM {{s}} WHERE {where}"), params).fetchall())
        except sqlite3.Error as exc:
            raise Damaged from exc
        if any(stored.get(s) != counts.get(s, 0) for s in self.shards):
            raise Damaged

    def key_names(self) -> tuple[set[str], set[str]]:
        """Every setting name and every metric name any run of the view has."""
        return self.index.key_names(list(self.shards))

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

    def ids(self) -> list[str]:
        """Every readable run's id, oldest first (by start time, then id)."""
        out = []
        for shard, rid in self.rows("shard, id", "broken IS NULL"):
            self._own(shard, rid)
            out.append(rid)
        return out

    def entries(self, cond: str = "", params: tuple[Any, ...] = ()) -> dict[str, RunEntry]:
        out = {}
        for shard, rid, blob in self.rows("shard, id, entry", cond, params, by_run=bool(cond)):
            self._own(shard, rid)
            e = entry_of(blob)
            if e.id != rid:
                raise Damaged
            out[rid] = e
        return out

    def fields(self, cond: str = "", params: tuple[Any, ...] = ()) -> dict[str, dict[str, Any]]:
        """Listing fields as the record holds them, by run id, oldest first (by start time, then id)."""
        out = {}
        both = "broken IS NULL" + (f" AND ({cond})" if cond else "")
        for shard, rid, blob in self.rows("shard, id, fields", both, params, by_run=bool(cond)):
            self._own(shard, rid)
            m = loads(blob, dict)
            if m.get("id") != rid:
                raise Damaged
            out[rid] = m
        return out

    def listed(self, cond: str = "", params: tuple[Any, ...] = (), cells: bool = True) -> dict[str, Listed]:
        """The `ListFields` and (`cells`) table cells by run id, oldest first (by start time, then id)."""
        out = {}
        both = "broken IS NULL" + (f" AND ({cond})" if cond else "")
        for shard, rid, blob, cell_blob in self.rows(
            "shard, id, shown, " + ("cells" if cells else "NULL"), both, params, by_run=bool(cond)
        ):
            self._own(shard, rid)
            values = loads(blob, tuple)
            if len(values) != _SHOWN or values[0] != rid:
                raise Damaged
            c: tuple[str, ...] = ()
            if cells:
                c = loads(cell_blob, tuple)
                if len(c) != 9 or not all(type(x) is str for x in c):
                    raise Damaged
            out[rid] = Listed(ListFields(*values), c)
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
            found = self.index.db.execute(self.sql(sql), (*shard_params, *params)).fetchall()
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
        m: dict[str, Any] = loads(blob, dict)
        db = self.index.db
        try:
            if db.execute(self.sql("SELECT 1 FROM {x} WHERE k = ?"), (k,)).fetchone() is None:
                self.index.fill([(k, entry)])
                db = self.index.db  # a read-only index is copied into memory to be written
            texts = db.execute(self.sql("SELECT settings, metrics FROM {x} WHERE k = ?"), (k,)).fetchone()
            m["settings"], m["metrics"] = json.loads(unpack_text(texts[0])), json.loads(unpack_text(texts[1]))
        except (sqlite3.Error, ValueError, TypeError) as exc:
            raise Damaged from exc
        return m

    def column(self, col: str, with_num: bool = False) -> dict[str, SettingValue]:
        """One setting or metric of every run that has it, by run id: its value (runs with the
        same value share one object), or (`with_num`) the metric's last value as a number."""
        self.index.ensure_column(list(self.shards), col)
        where, params = self._where()
        pick = "c.num" if with_num else "c.val"
        # CROSS JOIN: the shards' runs drive the loop (SQLite would probe every shard per cell)
        joins = "{m} m CROSS JOIN {c} c ON c.col = ? AND c.k = m.k CROSS JOIN {r} r ON r.k = m.k"
        sql = f"SELECT r.id, {pick} FROM {joins} WHERE m.{where}"
        try:
            found = self.index.db.execute(self.sql(sql), (col, *params)).fetchall()
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
            found = self.index.db.execute(self.sql("SELECT view FROM {t} WHERE tree = ?"), (self.runs_tree,)).fetchone()
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
                    self.sql("UPDATE {t} SET view = ? WHERE tree = ?"),
                    (zlib.compress(text.encode("utf-8", "surrogatepass"), 1), self.runs_tree),
                )
        except sqlite3.Error:
            pass
