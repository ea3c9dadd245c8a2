"""`ledger run`: run a job and record it as one commit."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.options import repeatable
from ledger.commands.run import run_job
from ledger.errors import EXIT_USAGE, LedgerError
from ledger.termstyle import say, terminal_fd


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--name", default=None, help="A short name for the run (usable wherever a run is named).")
@click.option("--note", default=None, help="Free text stored in the manifest.")
@click.option("--image", default=None, help="Docker image the job runs in (else detected from `docker run`, else .ledger.yaml).")
@click.option("--no-heat-guard", is_flag=True, help="Record GPU temperatures but never pause the job.")
@repeatable("--data", "data_paths", "Extra output path to track with DVC (repeatable).")
@click.option(
    "--debug-data/--no-debug-data",
    "debug_data",
    default=None,
    help="Add --save-debug-rollout-data/--save-debug-event-data when absent (default: .ledger.yaml).",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def run(
    command: tuple[str, ...],
    name: str | None,
    note: str | None,
    image: str | None,
    no_heat_guard: bool,
    data_paths: tuple[str, ...],
    debug_data: bool | None,
) -> int:
    """Run COMMAND and record it as one commit: ledger run [OPTIONS] -- COMMAND [ARGS]..."""
    if command and command[0] != "--" and command[0].startswith("-"):
        raise _not_an_option(command[0], click.get_current_context())
    return run_job(
        Path.cwd(),
        command,
        name=name,
        note=note,
        image=image,
        heat_guard=not no_heat_guard,
        data_paths=data_paths,
        debug_data=debug_data,
        say=say,
        terminal_fd=terminal_fd(),
    )


def _not_an_option(word: str, ctx: click.Context) -> LedgerError:
    """`ledger run --nmae x -- cmd`: an option ledger does not have is never passed on to the job."""
    import difflib  # only on this mistake: every `ledger run` would pay for it otherwise

    known = [opt for p in ctx.command.params for opt in p.opts + p.secondary_opts if opt.startswith("--")]
    close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    return LedgerError(
        f"ledger run has no option {word}", hint + "ledger's options go before `--`, the job's command after it", exit_code=EXIT_USAGE
    )
