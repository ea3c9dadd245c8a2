"""`ledger heat`: a run's GPU temperatures over time, as text, JSON, a page or a plot."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.options import html_page
from ledger.cli.output import echo_text, emit_json
from ledger.commands.heat import heat_report
from ledger.termstyle import say


@click.command()
@click.argument("run_name")
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path), help="Also write a PNG plot (needs ledger[plot]).")
@html_page("Also write a self-contained HTML page.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: per-GPU temperatures, guard settings, events.")
def heat(run_name: str, png: Path | None, html: Path | None, as_json: bool) -> None:
    """Temperature over time for a run, with pauses and step boundaries."""
    result = heat_report(Path.cwd(), run_name, png, html)
    if as_json:
        emit_json(result.data)
    else:
        echo_text(result.text, nl=False)
    for path in result.written:
        say(f"plot written to {path}")
