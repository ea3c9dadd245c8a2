"""`ledger compare`: two or more runs side by side, in the terminal or on a page."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.options import html_page, repeatable
from ledger.cli.output import echo_report, emit_json
from ledger.commands.compare import compare_runs, render_compare, write_compare_page
from ledger.termstyle import say


@click.command()
@click.argument("runs", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="One JSON object: runs, differing settings, summary metrics.")
@repeatable("--metric", "metric_globs", "Only metrics matching GLOB (repeatable).", "GLOB")
@html_page("Also write a page with every metric of the runs overlaid on one step axis.")
@click.option(
    "--group-by", "group_by", metavar="SETTING", help="On the page, draw each value of SETTING as its runs' mean with a min-max band."
)
def compare(runs: tuple[str, ...], as_json: bool, metric_globs: tuple[str, ...], html: Path | None, group_by: str | None) -> None:
    """Compare two or more runs: the settings that differ (only those) and summary metrics side by side."""
    result = compare_runs(Path.cwd(), list(runs), metric_globs, with_tables=html is not None)
    if html is not None:
        write_compare_page(result, html, metric_globs, group_by)
        say(f"ledger: wrote {html}")
    if as_json:
        emit_json(result.to_json())
    else:
        echo_report(render_compare(result))
