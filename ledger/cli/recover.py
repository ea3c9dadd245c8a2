"""`ledger recover`: commit the staged runs whose ledger process died."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.commands.recover import recover_runs
from ledger.termstyle import say
from ledger.textfmt import plural


@click.command()
@click.option("--follow", is_flag=True, help="Wait for a run's Ray job still running to end, then record the run.")
@click.option("--no-ray", is_flag=True, help="Do not ask Ray about a run's jobs: record it as lost (its cluster is gone).")
def recover(follow: bool, no_ray: bool) -> None:
    """Commit every staged run whose ledger process died, with state `lost`.

    A run that submitted Ray jobs is recorded as Ray says they ended; one whose job still runs
    stays staged (`--follow` waits for its end), and so does one whose Ray does not answer.
    """
    result = recover_runs(Path.cwd(), say, follow=follow, ask_ray=not no_ray)
    say(f"ledger: recovered {plural(len(result.runs), 'run')}")
