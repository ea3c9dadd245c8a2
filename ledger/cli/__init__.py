"""The command line: the `ledger` group and its verbs, the only package that imports click.

Each verb parses its options, calls one library function, renders the result and sets the exit
code (see README.md for the exit-code table). The verbs live by what they do with runs:
`recording` (init, run, replay, recover), `browsing` (list, log, show, tail, path, export),
`comparing` (compare, diff, report, heat, ui), `organising` (tag, note, archive, unarchive, push,
pull); `output` is how they print.
"""

from __future__ import annotations

import click

from ledger import __version__
from ledger.cli import browsing, comparing, organising, recording
from ledger.errors import EXIT_USAGE, LedgerError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ledger")
def app() -> None:
    """A git-backed experiment ledger for RL training runs.

    Each `ledger run` becomes one commit on the `experiments` branch; `ledger diff` compares two
    runs only when exactly one setting differs.
    """


for _verb in (*recording.COMMANDS, *browsing.COMMANDS, *comparing.COMMANDS, *organising.COMMANDS):
    app.add_command(_verb)


def run_app(argv: list[str] | None) -> int:
    """Run the app; click's usage errors become exit 2 with click's message."""
    try:
        rv = app.main(args=argv, prog_name="ledger", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # pragma: no cover - click >= 8.2
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        return EXIT_USAGE
    except click.UsageError as exc:
        msg = exc.format_message()
        hint = f"see `{exc.ctx.command_path} --help`" if exc.ctx else "see `ledger --help`"
        raise LedgerError(msg, hint, exit_code=EXIT_USAGE) from exc
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.Abort:
        return 130
    except click.ClickException as exc:
        raise LedgerError(exc.format_message(), exit_code=exc.exit_code) from exc
    return rv if isinstance(rv, int) else 0
