"""The verbs that read the recorded runs from the branch: `log`, `show` and `path` (`list`: `listcmd.py`)."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.output import echo_text, emit_json, say_skipped
from ledger.commands.listing import change_log_json, list_runs, render_change_log
from ledger.commands.show import run_folder, show_run
from ledger.termstyle import say


@click.command()
@click.option("-n", "--limit", type=click.IntRange(min=1), default=None, help="Only the newest N runs.")
@click.option("--reverse", is_flag=True, help="Oldest run first (default: newest first, as git log).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: each run's id, name and changed settings.")
def log(limit: int | None, reverse: bool, as_json: bool) -> None:
    """For each run (newest first), the settings that changed from the run before it."""
    result = list_runs(Path.cwd(), changed=True, limit=limit, reverse=reverse)
    say_skipped(result.broken)
    if result.unpulled:
        say(f"ledger: {result.unpulled}")
    if as_json:
        emit_json(change_log_json(result))
    else:
        echo_text(render_change_log(result), nl=False)


@click.command()
@click.argument("run_name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of YAML.")
def show(run_name: str, as_json: bool) -> None:
    """Print one run's manifest (by id, id prefix, name, latest, latest~N)."""
    manifest, text, note = show_run(Path.cwd(), run_name)
    if note:
        say(f"ledger: {note}")
    if as_json:
        emit_json(manifest)
    else:
        echo_text(text, nl=False)


@click.command()
@click.argument("run_name")
def path(run_name: str) -> None:
    """Print the folder of a run inside the branch (runs/<shard>/<id>)."""
    echo_text(run_folder(Path.cwd(), run_name))
