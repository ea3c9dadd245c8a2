"""The verbs that change a run's metadata, never its record: `tag`, `note`, `archive`, `unarchive`."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.commands.meta import archive_runs, note_run, tag_run
from ledger.termstyle import say


@click.command()
@click.argument("run_name")
@click.argument("tags", nargs=-1)
@click.option("--rm", "remove", is_flag=True, help="Remove the tags instead of adding them.")
def tag(run_name: str, tags: tuple[str, ...], remove: bool) -> None:
    """Add tags to a run (or remove them with --rm): one metadata commit, the record unchanged."""
    change = tag_run(Path.cwd(), run_name, list(tags), remove)
    say(f"ledger: run {change.run_id} tags: {' '.join(change.after.tags) or '(none)'}" + ("" if change.commit else " (unchanged)"))


@click.command()
@click.argument("run_name")
@click.argument("text")
def note(run_name: str, text: str) -> None:
    """Set a run's note (shown by list, show and pages): one metadata commit, the record unchanged."""
    change = note_run(Path.cwd(), run_name, text)
    say(f"ledger: run {change.run_id} note set" + ("" if change.commit else " (unchanged)"))


@click.command()
@click.argument("runs", nargs=-1)
def archive(runs: tuple[str, ...]) -> None:
    """Hide runs from `ledger list` (`--archived` shows them) and from NAME resolution."""
    for change in archive_runs(Path.cwd(), list(runs), True):
        say(f"ledger: archived run {change.run_id}" + ("" if change.commit else " (already archived)"))


@click.command()
@click.argument("runs", nargs=-1)
def unarchive(runs: tuple[str, ...]) -> None:
    """Show archived runs again."""
    for change in archive_runs(Path.cwd(), list(runs), False):
        say(f"ledger: unarchived run {change.run_id}" + ("" if change.commit else " (was not archived)"))
