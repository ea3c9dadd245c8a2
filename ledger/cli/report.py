"""`ledger report`: the runs table as an HTML page."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.options import html_page
from ledger.cli.output import say_skipped
from ledger.commands.report import write_report
from ledger.termstyle import say
from ledger.textfmt import plural


@click.command()
@click.argument("runs", nargs=-1)
@html_page("The page to write (one self-contained file).", required=True)
def report(runs: tuple[str, ...], html: Path) -> None:
    """Write the runs table (as `ledger list`, with change sets and small curves) as an HTML page."""
    result = write_report(Path.cwd(), list(runs), html)
    say_skipped(result.skipped)
    say(f"page written to {result.path} ({plural(result.runs, 'run')})")
