"""`ledger list`. The default view (no option) asks for the listing kept whole first
(`ledger.storage.listanswer`), before the listing code, pygit2 and the index are imported."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.options import repeatable
from ledger.cli.output import echo_text, emit_json_lines, say_skipped
from ledger.storage.listanswer import recall_list
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
    options = (as_json, as_csv, changed, limit, reverse, where, name_glob, states, tags, since, archived, metric_globs)
    if not any(options):  # the default view: printed again as kept, when nothing it shows changed
        kept = recall_list(Path.cwd())
        if kept is not None:
            _print(kept.broken, kept.unpulled, kept.text)
            return
    # imported only now: pygit2, the index and the table are most of a repeated listing's time
    from ledger.commands.listing import list_runs, render_csv, render_list
    from ledger.compare.runfilter import RunFilter, Where, check_states, parse_since

    flt = RunFilter(
        tuple(Where.parse(w) for w in where), name_glob, check_states(states), tags, parse_since(since) if since else None, archived
    )
    result = list_runs(
        Path.cwd(), changed=changed, limit=limit, reverse=reverse, flt=flt, with_settings=as_json or as_csv, metric_globs=metric_globs
    )
    if as_json:
        _print(result.broken, result.unpulled, None)
        emit_json_lines(result.json_lines())
    else:
        _print(result.broken, result.unpulled, render_csv(result) if as_csv else render_list(result))


def _print(broken: dict[str, str], unpulled: str | None, text: str | None) -> None:
    """The warnings on stderr (each skipped run, runs not pulled), then the listing on stdout."""
    say_skipped(broken)
    if unpulled:
        say(f"ledger: {unpulled}")
    if text is not None:
        echo_text(text, nl=False)
