"""`ledger replay`: re-run one side of a recorded run on its recorded samples."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ledger.cli.options import repeatable
from ledger.cli.output import echo_text
from ledger.commands.replay import ReplayOptions
from ledger.commands.replay import replay as replay_cmd
from ledger.termstyle import say, terminal_fd


@click.command()
@click.argument("run_name")
@click.option("--rollout-only", is_flag=True, help="Replay the engine side alone (--debug-rollout-only).")
@click.option("--step", "step", type=int, default=None, help="Replay only this rollout.")
@click.option("--steps", "steps", default=None, help="Replay rollouts A:B (B exclusive, as Python).")
@repeatable("--set", "sets", "KEY=VALUE: change a setting for the replay (repeatable).")
@click.option("--name", help="Name for the replay run.")
@click.option("--dry-run", is_flag=True, help="Print the command and change nothing.")
@click.option("--strict", is_flag=True, help="A different image digest or Miles commit is an error.")
@click.option("--in-image", is_flag=True, help="Run the replay inside the recorded image (by digest).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before running the command (asked only on a terminal).")
@click.option("--force", is_flag=True, help="Let --set add a setting the run never had.")
@click.option(
    "--address",
    default=None,
    metavar="URL",
    help="A ray-submitted run: the Ray Job API to replay on (default: the recorded one, else a local head).",
)
@click.option(
    "--seeds", "seeds", default=None, help="S1,S2,...: one replay per seed (--set seed=S), named NAME-sS: replicas of one another."
)
@click.option(
    "--trust-env", is_flag=True, help="Also set recorded variables that load code (LD_*, PYTHON*, BASH_ENV, ...); see docs/trust.md."
)
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
def replay(run_name: str, sets: tuple[str, ...], extra: tuple[str, ...], seeds: str | None, **options: Any) -> int:
    """Re-run one side of RUN on its recorded samples: ledger replay RUN [OPTIONS] [-- EXTRA ARGS]."""
    # the options above are ReplayOptions' fields by name: one spelling of each, checked by the Struct
    opts = ReplayOptions(run=run_name, sets=list(sets), extra=[x for x in extra if x != "--"], **options)
    ask = None if opts.yes or not sys.stdin.isatty() else (lambda q, default: click.confirm(q, default=default, err=True))
    return replay_cmd(Path.cwd(), opts, seeds, say=say, terminal_fd=terminal_fd(), stdout=echo_text, confirm=ask)
