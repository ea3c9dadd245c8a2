"""The runs table of `ledger ui`'s `/`: `ledger list`'s rows, as a person reads them in a browser.

Rows come from `ledger.commands.listing.list_runs` (recorded runs and runs in progress, filtered
by `ledger list`'s own `RunFilter`); each shows name, state (a running run's current step), age,
what changed against the run before, tags, a note marker, the chosen metrics' last values. Any
column sorts (a link: no script needed). A checkbox per row picks runs for `/compare` or `/diff`.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.commands.listing import ListResult
from ledger.compare.runfilter import STATES
from ledger.metrics.summarymetrics import metric_value
from ledger.textfmt import change_text
from ledger.timefmt import parse_iso
from ledger.ui.layout import run_href, warning_html
from ledger.ui.query import METRIC_SORT, TableQuery, sort_link

if TYPE_CHECKING:
    from ledger.record.live import LiveRow
    from ledger.storage.listrow import FullRow


class TableRow(msgspec.Struct, frozen=True):
    """One run of the table."""

    id: str
    name: str | None
    state: str  # finished, failed, killed, lost, running, orphaned
    state_text: str  # what the cell says: `running: step 3`, `finished (replay: bitwise)`
    started: str | None
    changed: str
    tags: tuple[str, ...] = ()
    note: str | None = None
    metrics: dict[str, float | None] = msgspec.field(default_factory=dict)


def age_text(started: str | None, now: float) -> str:
    """How long ago a run started: `<1 min`, `12 min`, `5 h`, `3 d` (true to the minute: pages
    are made again each minute)."""
    t = parse_iso(started)
    if t is None:
        return "-"
    ago = max(0.0, now - t)
    if ago < 60:
        return "<1 min"
    for limit, unit, per in ((90 * 60, "min", 60), (48 * 3600, "h", 3600)):
        if ago < limit:
            return f"{ago / per:.0f} {unit}"
    return f"{ago / 86400:.0f} d"


def _recorded(result: ListResult, row: FullRow) -> TableRow:
    f = row.fields
    state = str(f.state or "-")
    text = state
    if f.replay_of:
        text += f" (replay: {f.fidelity})" if f.fidelity else " (replay)"
    changed = "(first run)" if f.id == result.oldest_id else change_text(result.changes.get(f.id, []))
    metrics = {name: metric_value(row.metrics, name) for name in result.metric_columns}
    return TableRow(f.id, f.name, state, text, f.started, changed, tuple(f.tags), f.note, metrics)


def _running(result: ListResult, live: LiveRow) -> TableRow:
    f = live.fields
    state = str(f.state or "running")
    if state == "orphaned":
        text = f"orphaned: {live.hint or ''}".rstrip(": ")
    else:
        text = "running" if live.step is None else f"running: step {live.step}"
    metrics: dict[str, float | None] = dict.fromkeys(result.metric_columns)
    return TableRow(f.id, f.name, state, text, f.started, "(running)", (), f.note, metrics)


def table_rows(result: ListResult) -> list[TableRow]:
    """The runs in progress and the recorded runs, newest first (as `ledger list`)."""
    running = [_running(result, live) for live in result.running]
    recorded = [_recorded(result, m) for m in result.rows]
    return running + recorded if result.running_first else recorded + running


def _sort_key(column: str) -> Callable[[TableRow], Any]:
    if column.startswith(METRIC_SORT):
        name = column[len(METRIC_SORT) :]
        return lambda r: r.metrics.get(name)
    keys: dict[str, Callable[[TableRow], Any]] = {
        "id": lambda r: r.id,
        "name": lambda r: (r.name or "").lower() or None,
        "state": lambda r: r.state_text,
        "age": lambda r: -(parse_iso(r.started) or 0.0) if r.started else None,
        "changed": lambda r: r.changed or None,
        "tags": lambda r: ",".join(r.tags) or None,
        "note": lambda r: r.note,
    }
    return keys[column]


def sort_rows(rows: list[TableRow], column: str, desc: bool) -> list[TableRow]:
    """Rows by one column (runs without a value last, in either order); ties keep their order."""
    key = _sort_key(column)
    present = [r for r in rows if key(r) is not None]
    missing = [r for r in rows if key(r) is None]
    return sorted(present, key=key, reverse=desc) + missing


def _head(query: TableQuery, columns: list[tuple[str, str]]) -> str:
    cells = ['<th class="pick" title="pick runs to compare"></th>']
    for key, label in columns:
        mark = (" ▼" if query.desc else " ▲") if query.sort == key else ""
        cells.append(f'<th data-column="{escape(key)}"><a href="{escape(sort_link(query, key))}">{escape(label)}{mark}</a></th>')
    return "<tr>" + "".join(cells) + "</tr>"


def _row(row: TableRow, metric_columns: list[str], now: float) -> str:
    note = f'<span class="note" data-note="{escape(row.note)}" title="{escape(row.note)}">✎</span>' if row.note else ""
    tags = " ".join(f'<span class="tag">{escape(t)}</span>' for t in row.tags)
    cells = [
        f'<td class="pick"><input type="checkbox" name="run" value="{escape(row.id)}" aria-label="pick {escape(row.name or row.id)}"></td>',
        f'<td data-column="name"><a href="{escape(run_href(row.id))}" title="{escape(row.id)}">{escape(row.name or row.id)}</a></td>',
        f'<td data-column="state" class="state-{escape(row.state)}">{escape(row.state_text)}</td>',
        f'<td data-column="age" title="{escape(row.started or "")}">{escape(age_text(row.started, now))}</td>',
        f'<td data-column="changed">{escape(row.changed)}</td>',
        f'<td data-column="tags">{tags}</td>',
        f'<td data-column="note">{note}</td>',
    ]
    for name in metric_columns:
        value = row.metrics.get(name)
        cells.append(f'<td data-column="{escape(METRIC_SORT + name)}" class="num">{"-" if value is None else f"{value:.4g}"}</td>')
    cells.append(f'<td data-column="id" class="id">{escape(row.id)}</td>')
    return f'<tr data-run="{escape(row.id)}" data-state="{escape(row.state)}">' + "".join(cells) + "</tr>"


def table_html(result: ListResult, query: TableQuery, warnings: list[str], now: float) -> str:
    """The live part of `/`: warnings, then the table inside the form that picks runs to compare."""
    rows = sort_rows(table_rows(result), query.sort, query.desc)
    columns = [("name", "name"), ("state", "state"), ("age", "age"), ("changed", "changed (vs the run before)")]
    columns += [("tags", "tags"), ("note", "note")]
    columns += [(METRIC_SORT + name, name) for name in result.metric_columns] + [("id", "id")]
    out = [warning_html(w) for w in warnings]
    out += [warning_html(f"run {rid} skipped: {why}") for rid, why in sorted(result.broken.items())]
    if result.unpulled:
        out.append(warning_html(result.unpulled))
    out.append(f'<p class="count" data-kind="count">{len(rows)} run{"s" if len(rows) != 1 else ""}</p>')
    out.append('<form id="pick" method="get" action="/compare"><table class="runs" data-kind="runs">')
    out.append(_head(query, columns))
    out += [_row(r, result.metric_columns, now) for r in rows]
    if not rows:
        empty = "no runs match" if result.filtered else "no runs recorded yet (record one with `ledger run -- CMD`)"
        out.append(f'<tr><td colspan="{len(columns) + 1}">{escape(empty)}</td></tr>')
    out.append("</table>")
    out.append(
        '<p class="actions"><button type="submit" id="compare">compare picked runs</button> '
        '<button type="submit" id="diff" formaction="/diff">diff two picked runs</button></p></form>'
    )
    return "\n".join(out)


def _inputs(name: str, values: list[str], placeholder: str, size: int = 22) -> str:
    return "".join(
        f'<input type="text" name="{name}" value="{escape(v)}" placeholder="{escape(placeholder)}" size="{size}">' for v in [*values, ""]
    )


def filter_form(query: TableQuery) -> str:
    """The filter, as `ledger list`'s options: each field is the option of its name."""

    def given(key: str) -> list[str]:
        return [v for k, v in query.pairs if k == key]

    states = given("state")
    options = "".join(f'<option value="{s}"{" selected" if s in states else ""}>{s}</option>' for s in ("", *STATES))
    archived = " checked" if query.flt.archived else ""
    sort = f'<input type="hidden" name="sort" value="{escape(query.sort)}">' + (
        '<input type="hidden" name="desc" value="1">' if query.desc else ""
    )
    return (
        '<form class="filter" id="filter" method="get" action="/">'
        f"<label>where {_inputs('where', given('where'), 'lr=1e-6 or train/loss<1')}</label> "
        f"<label>tag {_inputs('tag', given('tag'), 'baseline', 10)}</label> "
        f'<label>since <input type="text" name="since" value="{escape((given("since") or [""])[-1])}" placeholder="3d" size="10"></label> '
        f'<label>name <input type="text" name="name" value="{escape((given("name") or [""])[-1])}" placeholder="lr-*" size="10"></label> '
        f'<label>state <select name="state">{options}</select></label> '
        f"<label>metrics {_inputs('metric', given('metric'), 'train/*', 12)}</label> "
        f'<label><input type="checkbox" name="archived" value="1"{archived}> archived too</label> '
        f'{sort}<button type="submit" id="apply">filter</button> <a href="/">clear</a></form>'
    )
