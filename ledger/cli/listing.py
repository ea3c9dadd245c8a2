"""The verbs that read the recorded runs from the branch: `list`, `log`, `show` and `path`."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.options import repeatable
from ledger.cli.output import echo_text, emit_json, emit_json_lines, say_skipped
from ledger.commands.listing import change_log_json, list_runs, render_change_log, render_csv, render_list, run_folder, show_run
from ledger.compare.runfilter import RunFilter, Where, check_states, parse_since
from ledger.termstyle import say


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (with settings, summary metrics, tags, note).")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV (with settings, summary metrics, tags, note).")
@click.option("--changed", is_flag=True, help="Show which settings changed from the run before.")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=None, help="Only the newest N runs.")
@click.option("--reverse", is_flag=True, help="Oldest run first (default: newest first, as git log).")
@repeatable("--where", "where", "Only runs whose setting or metric (its last value) matches; also != < > <= >= (repeatable).", "KEY=VALUE")
@click.option("--name", "name_glob", metavar="GLOB", help="Only runs whose name matches the glob.")
@repeatable("--state", "states", "Only runs in this state (repeatable: any of them).")
@repeatable("--tag", "tags", "Only runs with this tag (repeatable: all of them).")
@click.option("--since", metavar="DATE", help="Only runs started since a date, UTC time or age (3d, 12h).")
@click.option("--archived", is_flag=True, help="Show archived runs too.")
@repeatable("--metric", "metric_globs", "Add a column with the last value of each metric matching GLOB (repeatable).", "GLOB")
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
    flt = RunFilter(
        tuple(Where.parse(w) for w in where), name_glob, check_states(states), tags, parse_since(since) if since else None, archived
    )
    result = list_runs(
        Path.cwd(), changed=changed, limit=limit, reverse=reverse, flt=flt, with_settings=as_json or as_csv, metric_globs=metric_globs
    )
    say_skipped(result.broken)
    if result.unpulled:
        say(f"ledger: {result.unpulled}")
    if as_json:
        emit_json_lines(result.json_lines())
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
    manifest, text, note = show_run(Path.cwd(), run_name)
    if note:
        say(f"ledger: {note}")
    if as_json:
        emit_json(manifest)
    else:
        echo_text(text, nl=False)


@click.command()
@click.argument("run_name")
def path(run_name: str) -> None:
    """Print the folder of a run inside the branch (runs/<shard>/<id>)."""
    echo_text(run_folder(Path.cwd(), run_name))
