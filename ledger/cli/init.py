"""`ledger init`: set ledger up in a git repository (once)."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.commands.init import init_repo
from ledger.termstyle import say


@click.command()
def init() -> None:
    """Set up ledger in this git repository (.ledger.yaml, DVC, runs/)."""
    result = init_repo(Path.cwd())
    for line in result.done:
        say(line)
    say(f"commit the set-up: {result.next_step}")
