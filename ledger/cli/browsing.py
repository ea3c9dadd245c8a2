"""The verbs that read the recorded runs: `list`, `log`, `show`, `tail`, `path` and `export`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ledger.cli.output import echo_text, emit_json, say_skipped
from ledger.termstyle import printable_bytes, say


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (with settings, summary metrics, tags, note).")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV (with settings, summary metrics, tags, note).")
@click.option("--changed", is_flag=True, help="Show which settings changed from the run before.")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=None, help="Only the newest N runs.")
@click.option("--reverse", is_flag=True, help="Oldest run first (default: newest first, as git log).")
@click.option(
    "--where",
    "where",
    multiple=True,
    metavar="KEY=VALUE",
    help="Only runs whose setting or metric (its last value) matches; also != < > <= >= (repeatable).",
)
@click.option("--name", "name_glob", metavar="GLOB", help="Only runs whose name matches the glob.")
@click.option("--state", "states", multiple=True, help="Only runs in this state (repeatable: any of them).")
@click.option("--tag", "tags", multiple=True, help="Only runs with this tag (repeatable: all of them).")
@click.option("--since", metavar="DATE", help="Only runs started since a date, UTC time or age (3d, 12h).")
@click.option("--archived", is_flag=True, help="Show archived runs too.")
@click.option(
    "--metric",
    "metric_globs",
    multiple=True,
    metavar="GLOB",
    help="Add a column with the last value of each metric matching GLOB (repeatable).",
)
def list_cmd(
    as_json: bool,
    as_csv: bool,
    changed: bool,
    limit: int | None,
    reverse: bool,
    where: tuple[str, ...],
    name_glob: str | None,
    states: tuple[str, ...],
    tags: tuple[str, ...],
    since: str | None,
    archived: bool,
    metric_globs: tuple[str, ...],
) -> None:
    """List the recorded runs, newest first (read from the branch tip, no checkout)."""
    from ledger.commands.listing import list_runs, render_csv, render_list
    from ledger.compare.runfilter import RunFilter, Where, check_states, parse_since

    flt = RunFilter(
        tuple(Where.parse(w) for w in where), name_glob, check_states(states), tags, parse_since(since) if since else None, archived
    )
    result = list_runs(
        Path.cwd(), changed=changed, limit=limit, reverse=reverse, flt=flt, with_settings=as_json or as_csv, metric_globs=metric_globs
    )
    say_skipped(result.broken)
    if result.unpulled:
        say(f"ledger: {result.unpulled}")
    if as_json:  # one run a line, as `emit_json(compact=True)` writes it
        click.echo("[\n" + ",\n".join(result.json_lines()) + "\n]")
    elif as_csv:
        echo_text(render_csv(result), nl=False)
    else:
        echo_text(render_list(result), nl=False)


@click.command()
@click.option("-n", "--limit", type=click.IntRange(min=1), default=None, help="Only the newest N runs.")
@click.option("--reverse", is_flag=True, help="Oldest run first (default: newest first, as git log).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: each run's id, name and changed settings.")
def log(limit: int | None, reverse: bool, as_json: bool) -> None:
    """For each run (newest first), the settings that changed from the run before it."""
    from ledger.commands.listing import change_log_json, list_runs, render_change_log

    result = list_runs(Path.cwd(), changed=True, limit=limit, reverse=reverse)
    say_skipped(result.broken)
    if result.unpulled:
        say(f"ledger: {result.unpulled}")
    if as_json:
        emit_json(change_log_json(result))
    else:
        echo_text(render_change_log(result), nl=False)


@click.command()
@click.argument("run_name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of YAML.")
def show(run_name: str, as_json: bool) -> None:
    """Print one run's manifest (by id, id prefix, name, latest, latest~N)."""
    from ledger.commands.listing import show_run

    manifest, text, note = show_run(Path.cwd(), run_name)
    if note:
        say(f"ledger: {note}")
    if as_json:
        emit_json(manifest)
    else:
        echo_text(text, nl=False)


@click.command()
@click.argument("run_name")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines while the run is running.")
@click.option("--engine", is_flag=True, help="The engine log (SGLang lines) instead of the trainer log.")
@click.option(
    "-n", "--lines", "count", type=click.IntRange(min=0), default=10, show_default=True, help="How many of the last lines to print."
)
@click.option("--raw", is_flag=True, help="The log's bytes as they are (control characters are shown escaped unless --raw).")
def tail(run_name: str, follow: bool, engine: bool, count: int, raw: bool) -> None:
    """The end of a running or recorded run's trainer (or engine) log; `latest` is the newest running run."""
    from ledger.commands.tail import tail_run

    result = tail_run(Path.cwd(), run_name, engine=engine, count=count, follow=follow)
    out = sys.stdout.buffer
    shown = (lambda b: b) if raw else printable_bytes
    if follow and result.follow is None:
        say(f"ledger: run {result.run_id} is {result.state}, not running: nothing to follow")
    out.writelines(shown(line) for line in result.lines)
    out.flush()
    if result.follow is not None:
        try:
            for line in result.follow:
                out.write(shown(line))
                out.flush()
        except KeyboardInterrupt:
            return


@click.command()
@click.argument("run_name")
def path(run_name: str) -> None:
    """Print the folder of a run inside the branch (runs/<shard>/<id>)."""
    from ledger.commands.listing import run_folder

    echo_text(run_folder(Path.cwd(), run_name))


@click.command()
@click.argument("run_name")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "tsv", "json"]),
    default="csv",
    show_default=True,
    help="csv/tsv for spreadsheets, json (a list of objects) for `dvc plots`.",
)
@click.option(
    "--axis",
    type=click.Choice(["rollout", "train"]),
    default="rollout",
    show_default=True,
    help="One row per rollout id, or per train step (metrics logged per train step).",
)
def export(run_name: str, fmt: str, axis: str) -> None:
    """Print a run's per-step metrics, one row per step and one column per metric."""
    from ledger.commands.export import export_rows, render_export

    _run_id, rows = export_rows(Path.cwd(), run_name, axis)
    echo_text(render_export(rows, fmt), nl=False)


# what `ledger.cli` adds to the `ledger` group
COMMANDS = (list_cmd, log, show, tail, path, export)
