"""The verbs that record runs: `init` (once per repository), `run`, `replay` and `recover`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ledger.cli.output import echo_text
from ledger.errors import EXIT_USAGE, LedgerError
from ledger.termstyle import say, terminal_fd
from ledger.textfmt import plural


@click.command()
def init() -> None:
    """Set up ledger in this git repository (.ledger.yaml, DVC, runs/)."""
    from ledger.commands.init import init_repo

    result = init_repo(Path.cwd())
    for line in result.done:
        say(line)
    say(f"commit the set-up: {result.next_step}")


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--name", default=None, help="A short name for the run (usable wherever a run is named).")
@click.option("--note", default=None, help="Free text stored in the manifest.")
@click.option("--image", default=None, help="Docker image the job runs in (else detected from `docker run`, else .ledger.yaml).")
@click.option("--no-heat-guard", is_flag=True, help="Record GPU temperatures but never pause the job.")
@click.option("--data", "data_paths", multiple=True, help="Extra output path to track with DVC (repeatable).")
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
    from ledger.commands.run import run_job

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
    import difflib

    known = [opt for p in ctx.command.params for opt in p.opts + p.secondary_opts if opt.startswith("--")]
    close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    return LedgerError(
        f"ledger run has no option {word}", hint + "ledger's options go before `--`, the job's command after it", exit_code=EXIT_USAGE
    )


@click.command()
@click.argument("run_name")
@click.option("--rollout-only", is_flag=True, help="Replay the engine side alone (--debug-rollout-only).")
@click.option("--step", "step", type=int, default=None, help="Replay only this rollout.")
@click.option("--steps", "steps", default=None, help="Replay rollouts A:B (B exclusive, as Python).")
@click.option("--set", "sets", multiple=True, help="KEY=VALUE: change a setting for the replay (repeatable).")
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
    from ledger.commands.replay import ReplayOptions
    from ledger.commands.replay import replay as replay_cmd

    # the options above are ReplayOptions' fields by name: one spelling of each, checked by the dataclass
    opts = ReplayOptions(run=run_name, sets=list(sets), extra=[x for x in extra if x != "--"], **options)
    ask = None if opts.yes or not sys.stdin.isatty() else (lambda q, default: click.confirm(q, default=default, err=True))
    return replay_cmd(Path.cwd(), opts, seeds, say=say, terminal_fd=terminal_fd(), stdout=echo_text, confirm=ask)


@click.command()
@click.option("--follow", is_flag=True, help="Wait for a run's Ray job still running to end, then record the run.")
@click.option("--no-ray", is_flag=True, help="Do not ask Ray about a run's jobs: record it as lost (its cluster is gone).")
def recover(follow: bool, no_ray: bool) -> None:
    """Commit every staged run whose ledger process died, with state `lost`.

    A run that submitted Ray jobs is recorded as Ray says they ended; one whose job still runs
    stays staged (`--follow` waits for its end), and so does one whose Ray does not answer.
    """
    from ledger.commands.recover import recover_runs

    result = recover_runs(Path.cwd(), say, follow=follow, ask_ray=not no_ray)
    say(f"ledger: recovered {plural(len(result.runs), 'run')}")


# what `ledger.cli` adds to the `ledger` group
COMMANDS = (init, run, replay, recover)
