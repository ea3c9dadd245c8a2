"""The verbs that organise and share runs: `tag`, `note`, `archive`, `unarchive`, `push` and `pull`."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.termstyle import say


@click.command()
@click.argument("run_name")
@click.argument("tags", nargs=-1)
@click.option("--rm", "remove", is_flag=True, help="Remove the tags instead of adding them.")
def tag(run_name: str, tags: tuple[str, ...], remove: bool) -> None:
    """Add tags to a run (or remove them with --rm): one metadata commit, the record unchanged."""
    from ledger.commands.meta import tag_run

    change = tag_run(Path.cwd(), run_name, list(tags), remove)
    say(f"ledger: run {change.run_id} tags: {' '.join(change.after.tags) or '(none)'}" + ("" if change.commit else " (unchanged)"))


@click.command()
@click.argument("run_name")
@click.argument("text")
def note(run_name: str, text: str) -> None:
    """Set a run's note (shown by list, show and pages): one metadata commit, the record unchanged."""
    from ledger.commands.meta import note_run

    change = note_run(Path.cwd(), run_name, text)
    say(f"ledger: run {change.run_id} note set" + ("" if change.commit else " (unchanged)"))


@click.command()
@click.argument("runs", nargs=-1)
def archive(runs: tuple[str, ...]) -> None:
    """Hide runs from `ledger list` (`--archived` shows them) and from NAME resolution."""
    from ledger.commands.meta import archive_runs

    for change in archive_runs(Path.cwd(), list(runs), True):
        say(f"ledger: archived run {change.run_id}" + ("" if change.commit else " (already archived)"))


@click.command()
@click.argument("runs", nargs=-1)
def unarchive(runs: tuple[str, ...]) -> None:
    """Show archived runs again."""
    from ledger.commands.meta import archive_runs

    for change in archive_runs(Path.cwd(), list(runs), False):
        say(f"ledger: unarchived run {change.run_id}" + ("" if change.commit else " (was not archived)"))


@click.command()
@click.argument("remote", required=False)
def push(remote: str | None) -> int:
    """Push the experiments branch and the runs' DVC data."""
    from ledger.commands.sync import push_runs

    return push_runs(Path.cwd(), remote, say)


@click.command()
@click.argument("remote", required=False)
@click.argument("runs", nargs=-1)
@click.option("--all-data", is_flag=True, help="Fetch the data of every run.")
def pull(remote: str | None, runs: tuple[str, ...], all_data: bool) -> int:
    """Fetch the experiments branch, and the data of the named runs.

    `ledger pull RUN...` (a first argument that is no git remote) pulls from the default remote.
    """
    from ledger.commands.sync import pull_runs

    return pull_runs(Path.cwd(), remote, list(runs), all_data, say)


# what `ledger.cli` adds to the `ledger` group
COMMANDS = (tag, note, archive, unarchive, push, pull)
