"""What each address of `ledger ui` answers, without the web framework: a status and a body.

Each view calls the library function its CLI command calls (`list_runs`, `show_run`,
`compare_runs`, `diff_runs`) and renders with the pages' own renderers. A `LedgerError` (an
unknown run, a bad filter, a damaged record) becomes one warning on a page of its own, with
the status it deserves; every other page keeps working.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ledger.commands.compare import compare_runs, write_compare_page
from ledger.commands.diff import diff_runs
from ledger.commands.listing import ListResult, list_runs
from ledger.commands.show import show_run
from ledger.errors import EXIT_NOT_FOUND, EXIT_USAGE, LedgerError, UsageError
from ledger.ui.layout import error_page, framed, ui_page
from ledger.ui.query import Pairs, TableQuery, last, read_query, values, without_where
from ledger.ui.runpage import run_live
from ledger.ui.runview import run_view
from ledger.ui.state import Made
from ledger.ui.table import filter_form, table_html


def status_of(exc: LedgerError) -> int:
    """The HTTP status of a ledger error: unknown run 404, bad usage 400, anything else 500."""
    return {EXIT_NOT_FOUND: 404, EXIT_USAGE: 400}.get(exc.exit_code, 500)


def answered(make: Callable[[], Made], title: str, as_json: bool = False) -> Made:
    """`make()`, or the one-line page (or JSON object) of the ledger error it raised."""
    try:
        return make()
    except LedgerError as exc:
        return refusal(exc, title, as_json)


def refusal(exc: LedgerError, title: str, as_json: bool = False) -> Made:
    """A ledger error as its page (or JSON object): one line, and the status it deserves."""
    if as_json:
        return Made(status_of(exc), json.dumps({"error": exc.one_line()}))
    return Made(status_of(exc), error_page(title, exc.one_line()))


def _listed(start: Path, query: TableQuery) -> tuple[ListResult, TableQuery, list[str]]:
    """`ledger list --changed`'s result for the query; a `where` key no run has is named and left out."""
    warnings = list(query.warnings)
    try:
        result = list_runs(start, changed=True, flt=query.flt, metric_globs=query.metric_globs)
    except UsageError as exc:  # check_keys: an unknown --where key (the nearest known keys named)
        warnings.append(f"left out every 'where': {exc.one_line()}")
        query = without_where(query)
        result = list_runs(start, changed=True, flt=query.flt, metric_globs=query.metric_globs)
    return result, query, warnings


def table_view(start: Path, pairs: Pairs, at: str, live_only: bool) -> Made:
    """`/`: the runs table (`live_only`: only its live part, for the script)."""

    def make() -> Made:
        result, query, warnings = _listed(start, read_query(pairs))
        live = table_html(result, query, warnings, time.time())
        if live_only:
            return Made(200, live)
        head = f"<h1>ledger: runs</h1>\n{filter_form(query)}"
        return Made(200, ui_page("ledger: runs", head, live, at))

    return answered(make, "ledger: runs")


def run_page_view(start: Path, name: str, at: str, live_only: bool) -> Made:
    """`/runs/<run>`: a run's page (`live_only`: its live part)."""

    def make() -> Made:
        live = run_live(run_view(start, name))
        return Made(200, live if live_only else ui_page(f"ledger: {name}", "", live, at))

    return answered(make, f"ledger: run {name}")


def _written(write: Callable[[Path], Any]) -> str:
    """A page as one of ledger's page writers writes it (the same file `--html` gives), read back."""
    with tempfile.TemporaryDirectory(prefix="ledger-ui-") as tmp:
        out = Path(tmp) / "page.html"
        write(out)
        return out.read_text(encoding="utf-8")


def compare_view(start: Path, pairs: Pairs) -> Made:
    """`/compare?run=A&run=B...[&metric=GLOB][&group_by=SETTING]`: `ledger compare --html`'s page."""

    def make() -> Made:
        runs, globs = values(pairs, "run"), tuple(values(pairs, "metric"))
        group_by = last(pairs, "group_by")
        result = compare_runs(start, runs, globs, with_tables=True)
        return Made(200, framed(_written(lambda out: write_compare_page(result, out, globs, group_by))))

    return answered(make, "ledger: compare")


def diff_view(start: Path, pairs: Pairs) -> Made:
    """`/diff?a=A&b=B[&force=1]` (or two `run=`): `ledger diff --html`'s page, a refusal included;
    a run still running is compared on its steps so far (`--partial`)."""

    def make() -> Made:
        sides = values(pairs, "a")[-1:] + values(pairs, "b")[-1:] or values(pairs, "run")
        if len(sides) != 2:
            raise UsageError(f"a diff compares two runs, {len(sides)} named", "pick exactly two runs in the table")
        force = last(pairs, "force") == "1"

        def write(out: Path) -> None:
            diff_runs(start, sides[0], sides[1], metrics=[], force=force, steps_metric=None, git_diff=False, html=out, partial=True)

        return Made(200, framed(_written(write)))

    return answered(make, "ledger: diff")


def api_runs_view(start: Path, pairs: Pairs) -> Made:
    """`/api/runs`: what `ledger list --json` prints (the table's filter applies)."""

    def make() -> Made:
        query = read_query(pairs)
        if query.warnings:  # as `ledger list --json` refuses a malformed filter (exit 2)
            raise UsageError(query.warnings[0].removeprefix("left out: "))
        result = list_runs(start, flt=query.flt, with_settings=True, metric_globs=query.metric_globs)
        return Made(200, json.dumps(result.to_json(), default=str))

    return answered(make, "", as_json=True)


def api_run_view(start: Path, name: str) -> Made:
    """`/api/runs/<run>`: what `ledger show RUN --json` prints."""

    def make() -> Made:
        manifest, _text, _note = show_run(start, name)
        return Made(200, json.dumps(manifest, default=str))

    return answered(make, "", as_json=True)


def query_key(path: str, pairs: Sequence[tuple[str, str]], live_only: bool) -> str:
    """A page's key in the memo: its address, query and part."""
    return json.dumps([path, list(pairs), live_only])
