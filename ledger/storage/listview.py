"""Reading the listing index (`storage/listindex.py`) at one `runs/` tree: every question a listing
or a run name asks is SQL over the rows of that tree's shards, each row checked as it is read (a
value of the wrong type, a row filed under another run's shard: `Damaged`, and the caller reads
again from git)."""

from __future__ import annotations

import json
import marshal
import sqlite3
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from ledger.manifest import RUN_ID_RE, shard_of
from ledger.storage.git import Repo
from ledger.storage.listindex import ListIndex
from ledger.storage.listrow import ALL_FLAGS, ARCHIVED, NOTE, REPLAY, TAGS, Listed, ListFields, RunReader
from ledger.storage.listtables import Damaged, entry_of, loads, unpack_json
from ledger.storage.store import RunEntry
from ledger.storage.summary import SettingValue


def index_view(index: ListIndex, repo: Repo, runs_tree: str, reader: RunReader) -> View:
    """The view of `runs_tree`, every shard of it indexed (from git where missing)."""
    return View(index, runs_tree, index.update(repo, runs_tree, reader))


_SHOWN = len(ListFields.__struct_fields__)  # the values of a run's `ListFields`, as the index keeps them


class TableRow(NamedTuple):
    """What the default `ledger list` table needs of a run: its cells (`listrow.table_cells`) and
    whether it has what decides the table's columns, its footnote and whether it is shown."""

    cells: tuple[str, ...]
    tags: bool
    note: bool
    replay_of: bool
    archived: bool


def _raise() -> Any:
    raise Damaged


class _Absent:
    """A run without the setting a test names."""


ABSENT = _Absent()


class Test(NamedTuple):
    """One condition of `View.passing`: the columns it reads and what must hold of them."""

    setting: str | None  # "s:<name>", or None
    metric: str | None  # "m:<name>", or None
    keeps: Callable[[Any, float | None], bool]  # (the setting's value or ABSENT, the metric's last value) -> passes
    # ("<", 4.5): for a run without the setting, `keeps` is "its metric's last value < 4.5" (run in SQL)
    bound: tuple[str, float] | None = None


_ORDER_OPS = ("<", ">", "<=", ">=")


def _predicate(keeps: Callable[[Any, float | None], bool]) -> Callable[[Any, Any], bool]:
    """`keeps` as SQLite calls it: the setting's JSON text decoded, each value checked for its type
    (a wrong one raises, failing the query: `Damaged`), once per distinct pair of values."""
    memo: dict[tuple[Any, Any], bool] = {}

    def call(text: Any, num: Any) -> bool:
        got = memo.get((text, num))
        if got is None:
            if (num is not None and type(num) is not float) or (text is not None and type(text) is not str):
                raise Damaged
            got = memo[(text, num)] = keeps(ABSENT if text is None else json.loads(text), num)
        return got

    return call


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

    def fields_entries(self, cond: str, params: tuple[Any, ...] = ()) -> dict[str, tuple[dict[str, Any], RunEntry]]:
        """Listing fields and entry of the readable runs `cond` picks, by run id, oldest first."""
        out = {}
        for shard, rid, blob, entry in self.rows("shard, id, fields, entry", f"broken IS NULL AND ({cond})", params):
            self._own(shard, rid)
            m, e = loads(blob, dict), entry_of(entry)
            if m.get("id") != rid or e.id != rid:
                raise Damaged
            out[rid] = (m, e)
        return out

    def listed(self, cond: str = "", params: tuple[Any, ...] = (), cells: bool = True) -> dict[str, Listed]:
        """The `ListFields` and (`cells`) table cells by run id, oldest first (by start time, then id)."""
        both = "broken IS NULL" + (f" AND ({cond})" if cond else "")
        found = self.rows("shard, id, shown, " + ("cells" if cells else "NULL"), both, params, by_run=bool(cond))
        return self._decoded(found, cells)

    def newest(self, tests: Sequence[Test], n: int, keep: Callable[[ListFields], bool], cells: bool = True) -> dict[str, Listed]:
        """`passing(tests)` (every readable run without tests), only the newest `n` runs whose
        fields `keep` passes, oldest first: the rows are decoded from the newest back until there
        are `n` (`list -n 20` of 100,000 runs decodes ~20 rows, not every one)."""
        if tests:
            found = self.passing_rows(tests)
        else:
            found = self.rows("shard, id, shown, " + ("cells" if cells else "NULL"), "broken IS NULL")
        out: list[tuple[str, Listed]] = []
        for values, c in self._checked(reversed(found), cells) if n > 0 else ():
            fields = ListFields(*values)
            if keep(fields):
                out.append((values[0], Listed(fields, c)))
                if len(out) == n:
                    break
        return dict(reversed(out))

    def _decoded(self, found: Iterable[tuple[Any, ...]], cells: bool = True) -> dict[str, Listed]:
        """(shard, id, shown, cells) rows as `Listed` by run id (`_checked`)."""
        return {values[0]: Listed(ListFields(*values), c) for values, c in self._checked(found, cells)}

    def _checked(self, found: Iterable[tuple[Any, ...]], cells: bool = True, flags: bool = False) -> Iterator[tuple[Any, tuple[str, ...]]]:
        """(shard, id, shown, cells) rows as the values of their `ListFields` and their cells, each
        checked as it is decoded: a row of another run's shard, values of the wrong shape or cells
        that are not 9 texts: `Damaged`. `flags`: the rows hold the run's `table_flags` instead (an
        int, nothing decoded), and the first cell must be the run id."""
        names = self.shards
        try:
            for shard, rid, blob, cell_blob in found:
                if type(rid) is not str or shard_of(rid) != names.get(shard):  # `_own`, inlined: 100,000 rows
                    raise Damaged
                values = blob if flags else marshal.loads(blob)
                c = marshal.loads(cell_blob) if cells else ()
                if flags:
                    shape = type(values) is int and not values & ~ALL_FLAGS and type(c) is tuple and c[:1] == (rid,)
                else:
                    shape = type(values) is tuple and len(values) == _SHOWN and values[0] == rid and type(c) is tuple
                if not shape or (cells and (len(c) != 9 or type("".join(c)) is not str)):
                    raise Damaged
                yield values, c
        except (ValueError, EOFError, TypeError) as exc:  # not marshal data; a cell that is not a text
            raise Damaged from exc

    def _table_rows(self, found: Iterable[tuple[Any, ...]]) -> list[TableRow]:
        """(shard, id, flags, cells) rows as `TableRow`s, no `ListFields` decoded (`_checked`)."""
        checked = self._checked(found, flags=True)
        return [TableRow(c, bool(f & TAGS), bool(f & NOTE), bool(f & REPLAY), bool(f & ARCHIVED)) for f, c in checked]

    def table_rows(self) -> list[TableRow]:
        """Every readable run's `TableRow`, oldest first (by start time, then id)."""
        return self._table_rows(self.rows("shard, id, flags, cells", "broken IS NULL"))

    def passing(self, tests: Sequence[Test]) -> dict[str, Listed]:
        """The `ListFields` and table cells of the runs that pass every test (`passing_rows`)."""
        return self._decoded(self.passing_rows(tests))

    def passing_table(self, tests: Sequence[Test]) -> list[TableRow]:
        """`passing`, as the rows of a table (`table_rows`): no `ListFields` decoded."""
        return self._table_rows(self.passing_rows(tests, flags=True))

    def passing_rows(self, tests: Sequence[Test], flags: bool = False) -> list[tuple[Any, ...]]:
        """The (shard, id, shown, cells) rows of the runs that pass every test (`flags`: the table
        flags in shown's place), oldest first (by start time, then id), not yet decoded
        (`_checked`): one query, the tests run by SQLite on each run's row as it is read and the
        order made in SQL. A `Test` names a setting column, a metric column (either may
        be None: no run has it) and a predicate of the run's setting value (`ABSENT` when it has
        none) and its metric's last value (None when it has none); a test with a `bound` compares
        the metric in SQL for the runs without the setting."""
        joins, conds, cols, bounds = [], [], [], []
        self.index.db.create_function("ledger_damaged", 0, _raise)
        for i, test in enumerate(tests):
            for kind, col in (("s", test.setting), ("n", test.metric)):
                if col is not None:
                    self.index.ensure_column(list(self.shards), col)
                    joins.append(f"LEFT JOIN {{c}} {kind}{i} ON {kind}{i}.col = ? AND {kind}{i}.k = m.k")
                    cols.append(col)
            name = f"ledger_test_{i}"
            self.index.db.create_function(name, 2, _predicate(test.keeps), deterministic=True)
            s_val = f"s{i}.val" if test.setting is not None else "NULL"
            n_val = f"n{i}.num" if test.metric is not None else "NULL"
            if test.bound is None:
                conds.append(f"{name}({s_val}, {n_val})")
                continue
            op, bound = test.bound  # a number compared in SQL: no call for the runs without the setting
            if op not in _ORDER_OPS or type(bound) is not float:
                raise ValueError(f"not a bound: {test.bound!r}")
            cond = f"(CASE typeof({n_val}) WHEN 'real' THEN {n_val} {op} ? WHEN 'null' THEN 0 ELSE ledger_damaged() END)"
            bounds.append(bound)
            conds.append(cond if test.setting is None else f"(CASE WHEN {s_val} IS NULL THEN {cond} ELSE {name}({s_val}, NULL) END)")
        where, params = self._where()
        sql = (
            f"SELECT m.shard, r.id, r.{'flags' if flags else 'shown'}, r.cells"
            f" FROM {{m}} m CROSS JOIN {{r}} r ON r.k = m.k {' '.join(joins)}"
            f" WHERE m.{where} AND r.broken IS NULL AND {' AND '.join(conds) or '1'} ORDER BY r.started, r.id"
        )
        try:
            return self.index.db.execute(self.sql(sql), (*cols, *params, *bounds)).fetchall()
        except sqlite3.Error as exc:  # a damaged value makes a predicate raise: the query fails
            raise Damaged from exc

    def count(self) -> int:
        """How many run folders the view holds, broken ones too (the shards' stored counts, which
        `check` found equal to their rows)."""
        where, params = self._where()
        try:
            (total,) = self.index.db.execute(self.sql(f"SELECT coalesce(sum(n), 0) FROM {{s}} WHERE {where}"), params).fetchone()
        except sqlite3.Error as exc:
            raise Damaged from exc
        if type(total) is not int:
            raise Damaged
        return total

    def texts(self) -> dict[str, tuple[bytes, bytes]]:
        """Each run's settings and summary metrics as JSON text (ASCII bytes, `unpack_json`), by
        run id (one query). Inflated on this thread: two threads measured no faster (the GIL and
        the allocations: 2.3-3.2 s against 2.4 s for 100,000 runs)."""
        return {rid: (unpack_json(settings), unpack_json(metrics)) for rid, (settings, metrics) in self.packed_texts().items()}

    def packed_texts(self, ids: Sequence[str] | None = None) -> dict[str, tuple[bytes, bytes]]:
        """`texts` as stored, compressed (`unpack_json` reads one): a listing of every run's
        settings inflates each as it writes it, never all of them at once (~5 KB a run). `ids`:
        only those runs' (`list --json -n 20`), read and, the first time, written for their shards alone."""
        names = None if ids is None else {shard_of(rid) for rid in ids}
        self.index.fill_texts([key for key, name in self.shards.items() if names is None or name in names])
        where, params = self._where()
        joins = "{m} m CROSS JOIN {r} r ON r.k = m.k CROSS JOIN {x} x ON x.k = m.k"
        sql = f"SELECT r.id, x.settings, x.metrics FROM {joins} WHERE m.{where}"
        try:
            found: Iterable[tuple[Any, ...]]
            if ids is None:
                found = self.index.db.execute(self.sql(sql), params)
            else:
                found = self.index.select(f"{sql} AND r.id IN ({{marks}})", list(ids), *params)
            return {rid: (settings, metrics) for rid, settings, metrics in found}
        except sqlite3.Error as exc:
            raise Damaged from exc

    def forget_text(self, rid: str) -> None:
        """Drop a run's stored texts (found damaged): the next listing that needs them reads
        them from git again (`ListIndex.fill_texts`)."""
        try:
            with self.index.db:
                self.index.db.execute(self.sql("DELETE FROM {x} WHERE k IN (SELECT k FROM {r} WHERE id = ?)"), (rid,))
        except sqlite3.Error:
            pass  # a damaged file: the next command finds it so and reads every run again

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
            m["settings"], m["metrics"] = json.loads(unpack_json(texts[0])), json.loads(unpack_json(texts[1]))
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

    def kept_before(self) -> tuple[str, list[TableRow]] | None:
        """The default table kept for the latest other `runs/` tree whose runs are all in this one,
        unchanged, and this tree's readable runs it lacks (oldest first), when each of them comes
        after the newest run it shows (by start time, then id): then that table, the new runs'
        lines on top, is this tree's (`storage/listtable.py` `patched_table`). None otherwise, or
        where anything does not read as it should: the table is made whole."""
        try:
            return self._kept_before()
        except (sqlite3.Error, Damaged, zlib.error, TypeError, ValueError, UnicodeDecodeError):
            return None

    def _kept_before(self) -> tuple[str, list[TableRow]] | None:
        db = self.index.db
        found = db.execute(
            self.sql("SELECT shards, view FROM {t} WHERE tree != ? AND view IS NOT NULL ORDER BY written DESC LIMIT 1"), (self.runs_tree,)
        ).fetchone()
        if found is None:
            return None
        old_shards: set[str] = set(loads(found[0], list))
        gone, came = sorted(old_shards - self.shards.keys()), sorted(self.shards.keys() - old_shards)
        if not came:
            return None  # a tree with fewer shards: not a tree of new runs
        counts = dict(self.index.select("SELECT shard, n FROM {s} WHERE shard IN ({marks})", gone))
        before = [k for _s, k in self.index.select("SELECT shard, k FROM {m} WHERE shard IN ({marks})", gone)]
        if len(counts) != len(gone) or sum(counts.values()) != len(before):  # a shard collected, or damaged
            return None
        now = {k for _s, k in self.index.select("SELECT shard, k FROM {m} WHERE shard IN ({marks})", came)}
        if not now.issuperset(before):
            return None  # a run removed or changed (a tag, a note, an archive): its line is not the same
        text: str = zlib.decompress(found[1]).decode("utf-8", "surrogatepass")
        added = sorted(now.difference(before))
        sql = "SELECT m.shard, r.id, r.flags, r.cells, r.started FROM {m} m CROSS JOIN {r} r ON r.k = m.k"
        sql += " WHERE m.k IN ({marks}) AND r.broken IS NULL"
        rows = [row for row in self.index.select(sql, added) if row[0] in self.shards]
        rows.sort(key=lambda r: (r[4], r[1]))
        newest = self._newest_shown(text, old_shards)
        if newest is None or any((r[4], r[1]) <= newest for r in rows):
            return None
        return text, self._table_rows([r[:4] for r in rows])

    def _newest_shown(self, text: str, old_shards: set[str]) -> tuple[bytes, str] | None:
        """The (start time, id) of the run on the first line of a kept table, as its tree holds it."""
        first = text.split("\n", 2)[1:2]  # the line of the newest run shown, if any
        rid = first[0].split(" ", 1)[0] if first else ""
        if not RUN_ID_RE.fullmatch(rid):
            return None
        keys = [key for key in old_shards if key.rpartition("/")[2] == shard_of(rid)]
        if len(keys) != 1:
            return None
        found = self.index.db.execute(
            self.sql("SELECT r.started FROM {r} r CROSS JOIN {m} m ON m.k = r.k WHERE r.id = ? AND m.shard = ?"), (rid, keys[0])
        ).fetchall()
        return (found[0][0], rid) if len(found) == 1 and type(found[0][0]) is bytes else None

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
