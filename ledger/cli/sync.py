"""The verbs that share runs through a git remote and DVC: `push` and `pull`."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.commands.sync import pull_runs, push_runs
from ledger.termstyle import say


@click.command()
@click.argument("remote", required=False)
def push(remote: str | None) -> int:
    """Push the experiments branch and the runs' DVC data."""
    return push_runs(Path.cwd(), remote, say)


@click.command()
@click.argument("remote", required=False)
@click.argument("runs", nargs=-1)
@click.option("--all-data", is_flag=True, help="Fetch the data of every run.")
def pull(remote: str | None, runs: tuple[str, ...], all_data: bool) -> int:
    """Fetch the experiments branch, and the data of the named runs.

    `ledger pull RUN...` (a first argument that is no git remote) pulls from the default remote.
    """
    return pull_runs(Path.cwd(), remote, list(runs), all_data, say)
