"""`ledger tail`: the end of a run's trainer or engine log, followed while it runs."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ledger.commands.tail import tail_run
from ledger.termstyle import printable_bytes, say


@click.command()
@click.argument("run_name")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines while the run is running.")
@click.option("--engine", is_flag=True, help="The engine log (SGLang lines) instead of the trainer log.")
@click.option(
    "-n", "--lines", "count", type=click.IntRange(min=0), default=10, show_default=True, help="How many of the last lines to print."
)
@click.option("--raw", is_flag=True, help="The log's bytes as they are (control characters are shown escaped unless --raw).")
def tail(run_name: str, follow: bool, engine: bool, count: int, raw: bool) -> None:
    """The end of a running or recorded run's trainer (or engine) log; `latest` is the newest running run."""
    result = tail_run(Path.cwd(), run_name, engine=engine, count=count, follow=follow)
    out = sys.stdout.buffer
    shown = (lambda b: b) if raw else printable_bytes
    if follow and result.follow is None:
        say(f"ledger: run {result.run_id} is {result.state}, not running: nothing to follow")
    out.writelines(shown(line) for line in result.lines)
    out.flush()
    if result.follow is not None:
        try:
            for line in result.follow:
                out.write(shown(line))
                out.flush()
        except KeyboardInterrupt:
            return
