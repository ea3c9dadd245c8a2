"""`ledger list` and `ledger log` (`ledger show` and `ledger path`: `commands/show.py`).

`ledger list` shows the recorded runs and the runs in progress (state `running`, read from the
staging area by `ledger.record.live`), newest first as `git log` does: the runs in progress on top
(`--reverse`: oldest first, the runs in progress last).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.compare.runfilter import RunFilter, Where
from ledger.config import CONFIG_NAME, Config
from ledger.errors import LedgerError
from ledger.globs import matcher
from ledger.metrics.summarymetrics import metric_value
from ledger.opening import open_branch
from ledger.storage.answers import config_fingerprint, repository
from ledger.storage.git import Repo
from ledger.storage.listanswer import KeptList, keep_list
from ledger.storage.listing import Listing, listing_at, load_listing, table_cells
from ledger.storage.listrow import FullRow, ListFields, fields_of
from ledger.storage.listtable import BASE_HEADER, NO_MATCH, NO_RUNS, default_table, layout, patched_table
from ledger.storage.listtables import Damaged, pack, unpack_json
from ledger.storage.listview import ABSENT, Test
from ledger.storage.staging import list_staged
from ledger.storage.store import branch_ref
from ledger.storage.summary import METRIC_KEYS as SUMMARY_KEYS
from ledger.storage.summary import MetricSummary
from ledger.storage.sync import local_only_runs, remote_ref
from ledger.termstyle import printable_cell
from ledger.textfmt import change_text, csv_text, is_absent, plural

if TYPE_CHECKING:
    from ledger.record.live import LiveRow


class ListResult(msgspec.Struct):
    """The runs to show (newest first unless reversed), with optional change sets."""

    rows: list[FullRow]
    broken: dict[str, str]
    changes: dict[str, list[dict[str, Any]]] = msgspec.field(default_factory=dict)
    unpulled: str | None = None  # runs on origin's branch this clone does not have yet
    oldest_id: str | None = None  # with `changes`: the oldest run of the ledger (it has no run before it)
    running: list[LiveRow] = msgspec.field(default_factory=list)  # `LiveRun.summary()`s, in `rows`' order
    running_first: bool = True  # newest first: the runs in progress come before the recorded ones
    metric_columns: list[str] = msgspec.field(default_factory=list)  # `--metric`: summary metrics shown as columns
    with_settings: bool = False  # `--json`/`--csv`: each run's settings and summary metrics too
    filtered: bool = False  # some recorded runs were left out (a filter, or archived)
    cells: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)  # each row's table cells (`listing.table_cells`)
    # each row's settings and metrics as stored: compressed JSON text (`unpack_json`), and what
    # drops a run's texts found damaged (`Listing.forget_text`)
    texts: dict[str, tuple[bytes, bytes]] = msgspec.field(default_factory=dict)
    forget_text: Callable[[str], None] | None = None
    table: str | None = None  # the whole table, when the listing index kept it (the default view)

    def _full(self, row: FullRow) -> FullRow:
        """A row with its settings and summary metrics, read from their JSON text if need be."""
        text = self.texts.get(row.fields.id)
        if text is None:
            return row
        settings, metrics = self._unpacked(row.fields.id, text)
        return FullRow(row.fields, json.loads(settings), json.loads(metrics))

    def _unpacked(self, rid: str, text: tuple[bytes, bytes]) -> tuple[bytes, bytes]:
        """A run's stored texts inflated; damaged ones are dropped from the index, so that the
        next listing reads them from git again, and the listing ends in an error (some of it may
        be written already: never a made-up value)."""
        try:
            return unpack_json(text[0]), unpack_json(text[1])
        except Damaged:
            if self.forget_text is not None:
                self.forget_text(rid)
            raise LedgerError(
                f"the listing index holds a damaged copy of run {rid}'s settings (now dropped)",
                "run the command again: the run is read from git",
            ) from None

    def to_json(self) -> list[dict[str, object]]:
        out = self._recorded_json()
        live = [r.to_dict() for r in self.running]
        return live + out if self.running_first else out + live

    def _recorded_json(self) -> list[dict[str, object]]:
        """The recorded runs' objects of `to_json`, in `rows`' order."""
        out = []
        for row in self.rows:
            item = summary(row)
            if self.with_settings:
                full = self._full(row)
                item["settings"] = full.settings
                item["metrics"] = full.metrics
            if self.changes:
                item["changed"] = self.changes.get(row.fields.id, [])
            out.append(item)
        return out

    def json_lines(self) -> Iterator[bytes]:
        """`to_json()`'s objects as compact JSON, one a line, as UTF-8:
        a run's settings and metrics go in as their stored text (`Listing.texts`), never parsed
        and written again, and its listing fields as msgspec encodes them (json's default=str for
        what JSON lacks)."""
        live = [json.dumps(r.to_dict(), default=str).encode() for r in self.running]
        if self.running_first:
            yield from live
        if self.with_settings and not self.changes and all(row.fields.id in self.texts for row in self.rows):
            encode = msgspec.json.Encoder(enc_hook=str).encode
            for row in self.rows:
                settings, metrics = self._unpacked(row.fields.id, self.texts[row.fields.id])
                yield b"".join((_head(encode, row.fields), b',"settings":', settings or b"{}", b',"metrics":', metrics or b"{}", b"}"))
        else:  # rows without stored text (`ledger log`, `--changed`): written whole
            for item in self._recorded_json():
                yield json.dumps(item, default=str).encode()
        if not self.running_first:
            yield from live


_EMPTY_TEXTS = (pack({}), pack({}))
_FEW_TEXTS = 1000  # runs shown (`list --json -n N`) under which their texts are asked for by id


def _head(encode: Callable[[Any], bytes], fields: ListFields) -> bytes:
    """A run's listing fields as the start of its JSON object (no closing brace). A text holding
    a lone surrogate (a pulled record's "\\ud800") is not UTF-8: json escapes it, as it did."""
    try:
        return encode(fields)[:-1]
    except UnicodeEncodeError:
        return json.dumps(msgspec.structs.asdict(fields), default=str).encode()[:-1]


def summary(row: FullRow) -> dict[str, object]:
    """The fields `ledger list` shows, as the mapping `--json` writes."""
    return msgspec.structs.asdict(row.fields)


def _unpulled(repo: Repo, branch: str, tip: str | None) -> tuple[str | None, str | None]:
    """Say so when `origin/<branch>` holds runs this clone never pulled; and that ref's tip."""
    remote_tip = repo.ref_tip(remote_ref("origin", branch))
    if remote_tip is None or (tip is not None and repo.is_ancestor(remote_tip, tip)):
        return None, remote_tip
    count = len(local_only_runs(repo, remote_tip, tip))
    if not count:
        return None, remote_tip
    return f"origin/{branch} has {plural(count, 'run')} not here; `ledger pull` would show them", remote_tip


def _keep_default(
    where: tuple[Path, Path] | None,
    repo: Repo,
    cfg: Config,
    config_sha: str | None,
    tips: tuple[str | None, str | None],
    result: ListResult,
) -> None:
    """Keep the default view as printed, for a repeated `ledger list` (`storage/listanswer.py`)."""
    if where is None or result.table is None or tips[0] is None:
        return
    asked = (branch_ref(cfg.branch), remote_ref("origin", cfg.branch))
    refs = {ref: tip for ref, tip in zip(asked, tips) if tip is not None}
    keep_list(*where, KeptList(result.table, dict(result.broken), result.unpulled, refs, asked, str(where[0] / CONFIG_NAME), config_sha))


def list_runs(
    start: Path,
    changed: bool = False,
    limit: int | None = None,
    reverse: bool = False,
    flt: RunFilter | None = None,
    with_settings: bool = False,
    metric_globs: tuple[str, ...] = (),
) -> ListResult:
    """Every run at the branch tip, newest first (`reverse`: oldest first), optionally with what
    changed from the run before each; `limit` keeps the newest N of those `flt` keeps, runs in progress first (archived
    runs are left out unless it says); `metric_globs` name the summary metrics to show as columns.

    Read from the listing index (`storage/listindex.py`): a `--where` reads the one setting or
    metric it names, the table the cells kept for each run, `--json` the settings and metrics as
    stored text; `ledger log` and `--changed` read every run's settings."""
    flt = flt or RunFilter()
    plain = not (changed or with_settings or metric_globs or limit or reverse)  # a table of kept cells, if no run is staged
    default = plain and flt == RunFilter()
    where = repository(start) if default else None  # as a repeated `ledger list` finds it (`storage/listanswer.py`)
    config_sha = config_fingerprint(where[0] / CONFIG_NAME) if where is not None else None  # read before the config is
    repo, cfg, tip = open_branch(start)
    listing = load_listing(repo, tip, with_settings=True) if changed else listing_at(repo, tip)
    if flt.where:  # every setting's name is read only for a filter that names one
        flt.check_keys(listing.setting_keys | listing.metric_names)
    running = _running(repo, listing, flt) if list_staged(repo.root) else []  # none staged: the live-run reader stays unimported
    unpulled, remote_tip = _unpulled(repo, cfg.branch, tip)
    if listing.view is not None and default and not running:  # the default view, kept for this very `runs/` tree
        table = listing.stored_table()
        if table is None:  # the table kept for the tree before, new runs on top; else made from each run's kept cells
            before = listing.kept_before()
            table = patched_table(*before) if before is not None else None
            if table is None:
                rows = listing.table_rows()
                table = default_table(rows, len(rows))
            listing.store_table(table)
        found = ListResult([], listing.broken, unpulled=unpulled, table=table)
        _keep_default(where, repo, cfg, config_sha, (tip, remote_tip), found)
        return found
    if listing.view is not None and plain and not running and flt == RunFilter(flt.where):  # `--where` alone: the passing runs' kept cells
        rows = listing.passing_table(tuple(_test(listing, w) for w in flt.where))
        return ListResult([], listing.broken, unpulled=unpulled, table=default_table(rows, listing.count()))
    newest = max(0, limit - len(running)) if limit and not listing.loaded else None  # `-n`: only those are decoded
    kept, cells, oldest_id, total = _recorded(listing, flt, cells=not with_settings, newest=newest)
    shown = kept
    if limit:  # the newest N of all: runs in progress are newer than every recorded run
        running = running[-limit:]
        left = limit - len(running)
        shown = kept[-left:] if left > 0 else []
    result = ListResult(
        shown if reverse else shown[::-1],
        listing.broken,
        unpulled=unpulled,
        oldest_id=oldest_id,
        running=running if reverse else running[::-1],
        running_first=not reverse,
        cells=cells,
    )
    result.filtered = len(kept) < total
    if metric_globs and listing.view is not None:
        names = sorted(filter(matcher(metric_globs), listing.metric_names))
        for name in names:
            column = listing.column(f"m:{name}")
            for row in shown:
                if row.fields.id in column:
                    row.metrics[name] = column[row.fields.id]  # type: ignore[assignment]  # a summary metric's mapping
    result.metric_columns = metric_columns(shown, metric_globs)
    result.with_settings = with_settings
    if with_settings and not changed and listing.view is not None:
        ids = [row.fields.id for row in shown]
        texts = listing.packed_texts(ids if len(ids) < _FEW_TEXTS else None)  # a few runs' texts, asked by id
        result.texts = {rid: texts.get(rid, _EMPTY_TEXTS) for rid in (row.fields.id for row in shown)}
        result.forget_text = listing.forget_text
    if changed:
        from ledger.compare.changes import change_log
        from ledger.understand.settings import DEFAULT_IGNORE

        ignore = [*DEFAULT_IGNORE, *cfg.ignore]
        for run_id, changes in change_log(listing.ordered(), ignore):
            result.changes[run_id] = [{"name": c.name, "a": c.a, "b": c.b} for c in changes]
    return result


def _running(repo: Repo, listing: Listing, flt: RunFilter) -> list[LiveRow]:
    """The runs in progress (and orphaned ones) that `flt` keeps and the branch does not hold yet."""
    from ledger.record.live import running_runs

    running = [r.summary() for r in running_runs(repo.root, orphaned=True) if listing.entry(r.id) is None]
    return [r for r in running if flt.keep(FullRow(r.fields, {}, {}))]


def _recorded(
    listing: Listing, flt: RunFilter, cells: bool = True, newest: int | None = None
) -> tuple[list[FullRow], dict[str, tuple[str, ...]], str | None, int]:
    """The recorded runs `flt` keeps, oldest first (`newest`: only the newest that many), and
    (`cells`: for a table) their table cells; the id of the oldest run of all (where every run's
    settings were read for the change sets) and how many runs there are. A `--where` is one
    query of the index (`Listing.passing`)."""
    if newest is not None and not listing.loaded:
        found = listing.newest(tuple(_test(listing, w) for w in flt.where), newest, flt.passes_fields, cells)
        return [FullRow(f.fields, {}, {}) for f in found.values()], {rid: f.cells for rid, f in found.items()}, None, listing.count()
    if listing.loaded:  # `ledger log`, `--changed`: every run's settings are at hand, filtered here
        rows = [FullRow(fields_of(m), m.get("settings") or {}, m.get("metrics") or {}) for m in listing.ordered()]
        kept = [r for r in rows if flt.keep(r)]
        return kept, {r.fields.id: table_cells(r.fields) for r in kept}, rows[0].fields.id if rows else None, len(rows)
    if flt.where:
        both = listing.passing(tuple(_test(listing, w) for w in flt.where))
        total = listing.count()
    else:
        both = listing.with_cells(cells)
        total = len(both)
    kept_ids = [rid for rid, listed in both.items() if flt.passes_fields(listed.fields)]
    rows = [FullRow(both[rid].fields, {}, {}) for rid in kept_ids]
    return rows, {rid: both[rid].cells for rid in kept_ids}, None, total


def _test(listing: Listing, w: Where) -> Test:
    """One `--where` as the index runs it: on the run's setting of that name, else on its summary
    metric's last value (`RunFilter`)."""

    def keeps(value: Any, num: float | None) -> bool:
        return w.matches(True, value) if value is not ABSENT else w.matches(num is not None, num)

    setting = f"s:{w.key}" if w.key in listing.setting_keys else None
    metric = f"m:{w.key}" if w.key in listing.metric_names else None
    return Test(setting, metric, keeps, w.bound())


def metric_columns(rows: list[FullRow], globs: tuple[str, ...]) -> list[str]:
    """The summary metrics of `rows` that the `--metric` globs name, in name order."""
    if not globs:
        return []
    names = {k for row in rows for k in row.metrics}
    return sorted(filter(matcher(globs), names))


def render_list(result: ListResult) -> str:
    """A table, one run a line."""
    if result.table is not None:
        return result.table
    if not result.rows and not result.running:
        return NO_MATCH if result.filtered else NO_RUNS
    header = list(BASE_HEADER)
    tags_column = any(row.fields.tags for row in result.rows)
    note_column = any(row.fields.note for row in result.rows)
    header += (["TAGS"] if tags_column else []) + list(result.metric_columns) + (["NOTE"] if note_column else [])
    lines = [_run_row(result, row, tags_column, note_column) for row in result.rows]
    running = [[printable_cell(c) for c in _running_row(result, live, len(header))] for live in result.running]
    lines = running + lines if result.running_first else lines + running
    if result.changes:
        header.append("CHANGED")
    return layout(header, lines, any(row.fields.replay_of for row in result.rows))


def _run_row(result: ListResult, row: FullRow, tags_column: bool, note_column: bool) -> list[str]:
    """One recorded run's cells (printable: `listing.table_cells`)."""
    rid = row.fields.id
    cells = result.cells.get(rid) or table_cells(row.fields)
    out = list(cells[:7])
    if tags_column:
        out.append(cells[7])
    if result.metric_columns:
        out += [printable_cell(c) for c in _metric_cells(result, row)]
    if note_column:
        out.append(cells[8])
    if result.changes:
        out.append(printable_cell(change_text(result.changes.get(rid, [])) if rid != result.oldest_id else "(first run)"))
    return out


def _running_row(result: ListResult, live: LiveRow, columns: int) -> list[str]:
    """One running (or orphaned) run's cells: its state and last step, the rest '-'."""
    f = live.fields
    state = "running" if live.step is None else f"running: step {live.step}"
    if live.last_step_at:
        state += f" ({live.last_step_at})"
    if live.on_ray:  # its ledger died, its Ray job runs on (`ledger recover` saw it)
        state = str(live.hint)
    elif f.state == "orphaned":  # its ledger died (SIGKILL): staged, waiting for recover
        state = f"orphaned: {live.hint}"
    row = [f.id, f.name or "-", state, "-", "-", "-", (f.started or "-")[:19].replace("T", " ")]
    row += ["-"] * (columns - len(row))
    if result.changes:
        row.append("(running)")
    return row


def _metric_cells(result: ListResult, row: FullRow) -> list[str]:
    """One cell per `--metric` column: the metric's last value."""
    cells = []
    for name in result.metric_columns:
        value = metric_value(row.metrics, name)
        cells.append("-" if value is None else f"{value:.4g}")
    return cells


def render_csv(result: ListResult, sep: str = ",") -> str:
    """`ledger list --csv`: one run a row; its listing fields, tags, note, every setting
    (`settings.NAME`) and every summary metric (`metrics.NAME.last`/`min`/`max` and their steps).
    A cell that would start a spreadsheet formula starts with `'` (`textfmt.csv_text`)."""
    base = ["id", "name", "state", "exit_code", "duration_s", "started", "replay_of", "tags", "note", "archived"]
    full = [result._full(row) for row in result.rows]
    settings = sorted({k for r in full for k in r.settings})
    metrics = sorted({k for r in full for k in r.metrics})
    header = base + [f"settings.{k}" for k in settings] + [f"metrics.{k}.{w}" for k in metrics for w in SUMMARY_KEYS]
    rows = []
    for r in full:
        s = r.fields
        row: list[Any] = [s.id, s.name, s.state, s.exit_code, s.duration_s, s.started, s.replay_of, " ".join(s.tags), s.note, s.archived]
        row += [_cell(r.settings.get(k)) for k in settings]
        row += [_cell(r.metrics.get(k, _NO_METRIC).get(w)) for k in metrics for w in SUMMARY_KEYS]
        rows.append(row)
    return csv_text(header, rows, sep)


_NO_METRIC: MetricSummary = {}


def _cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (list, dict)) else value


def render_change_log(result: ListResult) -> str:
    """`ledger log`: one change set per run, so comparable pairs stand out."""
    out = []
    for row in result.rows:
        f = row.fields
        changes = result.changes.get(f.id, [])
        label = f"{f.id} {f.name or ''}".rstrip()
        if f.id == result.oldest_id:
            text = "(first run)"
        else:
            text = change_text(changes)
            if len(changes) == 1:  # a replay is compared with its source
                text += f"   <- comparable with its source {f.replay_of}" if f.replay_of else "   <- comparable with the run before it"
        out.append(printable_cell(f"{label}: {text}"))
    return "\n".join(out) + ("\n" if out else "no runs recorded yet\n")


def change_log_json(result: ListResult) -> list[dict[str, Any]]:
    """`ledger log --json`: per run its id, name, whether it is the first run, and its changes."""

    def plain(v: Any) -> Any:
        return None if is_absent(v) else v

    return [
        {
            "id": f.id,
            "name": f.name,
            "first": f.id == result.oldest_id,
            "changed": [
                {"name": c["name"], "a": plain(c["a"]), "b": plain(c["b"]), "absent_in": [k for k in ("a", "b") if is_absent(c[k])]}
                for c in result.changes.get(f.id, [])
            ],
        }
        for f in (row.fields for row in result.rows)
    ]
