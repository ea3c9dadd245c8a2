"""The command line: the `ledger` group and its verbs, the only package that imports click.

Each verb parses its options, calls one library function, renders the result and sets the exit
code (see README.md for the exit-code table). Each verb's click command lives in a module of its
own (one per command module: `ledger.cli.run`, `ledger.cli.listing` for log/show/path, ...)
that imports its implementation; the group imports that module only when the verb is invoked
(`lazygroup.py`), so `ledger run` never loads list's or compare's code. `output` is how they print.
"""

from __future__ import annotations

import click

from ledger import __version__
from ledger.cli.lazygroup import LazyGroup, Verb
from ledger.errors import EXIT_USAGE, LedgerError

# every verb: where its click command is, and the first paragraph of its docstring for the
# `ledger --help` listing (tests/test_cli_help.py checks each against the command itself)
VERBS = {
    "archive": Verb("ledger.cli.meta:archive", "Hide runs from `ledger list` (`--archived` shows them) and from NAME resolution."),
    "compare": Verb(
        "ledger.cli.compare:compare", "Compare two or more runs: the settings that differ (only those) and summary metrics side by side."
    ),
    "diff": Verb(
        "ledger.cli.diff:diff", "Compare runs A and B; refuses (exit 3) unless exactly one setting differs (or they are repeats)."
    ),
    "export": Verb("ledger.cli.export:export", "Print a run's per-step metrics, one row per step and one column per metric."),
    "heat": Verb("ledger.cli.heat:heat", "Temperature over time for a run, with pauses and step boundaries."),
    "init": Verb("ledger.cli.init:init", "Set up ledger in this git repository (.ledger.yaml, DVC, runs/)."),
    "list": Verb("ledger.cli.listcmd:list_cmd", "List the recorded runs, newest first (read from the branch tip, no checkout)."),
    "log": Verb("ledger.cli.listing:log", "For each run (newest first), the settings that changed from the run before it."),
    "note": Verb("ledger.cli.meta:note", "Set a run's note (shown by list, show and pages): one metadata commit, the record unchanged."),
    "path": Verb("ledger.cli.listing:path", "Print the folder of a run inside the branch (runs/<shard>/<id>)."),
    "pull": Verb("ledger.cli.sync:pull", "Fetch the experiments branch, and the data of the named runs."),
    "push": Verb("ledger.cli.sync:push", "Push the experiments branch and the runs' DVC data."),
    "recover": Verb("ledger.cli.recover:recover", "Commit every staged run whose ledger process died, with state `lost`."),
    "replay": Verb(
        "ledger.cli.replay:replay",
        "Re-run one side of RUN on its recorded samples: ledger replay RUN [OPTIONS] [-- EXTRA ARGS].",
    ),
    "report": Verb(
        "ledger.cli.report:report", "Write the runs table (as `ledger list`, with change sets and small curves) as an HTML page."
    ),
    "run": Verb("ledger.cli.run:run", "Run COMMAND and record it as one commit: ledger run [OPTIONS] -- COMMAND [ARGS]..."),
    "show": Verb("ledger.cli.listing:show", "Print one run's manifest (by id, id prefix, name, latest, latest~N)."),
    "tag": Verb("ledger.cli.meta:tag", "Add tags to a run (or remove them with --rm): one metadata commit, the record unchanged."),
    "tail": Verb(
        "ledger.cli.tail:tail", "The end of a running or recorded run's trainer (or engine) log; `latest` is the newest running run."
    ),
    "ui": Verb(
        "ledger.cli.ui:ui",
        "Serve the ledger in a browser, live and read-only: runs table, run pages, compare, diff (Ctrl-C stops it).",
    ),
    "unarchive": Verb("ledger.cli.meta:unarchive", "Show archived runs again."),
}


@click.group(cls=LazyGroup, verbs=VERBS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ledger")
def app() -> None:
    """A git-backed experiment ledger for RL training runs.

    Each `ledger run` becomes one commit on the `experiments` branch; `ledger diff` compares two
    runs only when exactly one setting differs.
    """


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
