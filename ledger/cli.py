"""The command line. The only module that imports click: it parses, calls one library
function, renders the result and sets the exit code (see README.md for the exit-code table)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ledger import __version__
from ledger.errors import EXIT_USAGE, LedgerError
from ledger.termstyle import colour_enabled, paint_lines, printable, printable_bytes, say, terminal_fd
from ledger.textfmt import plural


def _show(text: str, nl: bool = True) -> None:
    """Text for a person on stdout, control characters shown escaped (`\\x1b`)."""
    click.echo(printable(text), nl=nl)


def _out(text: str) -> None:
    """A report to stdout, coloured only on a terminal without NO_COLOR."""
    text = printable(text)
    click.echo(paint_lines(text) if colour_enabled(sys.stdout) else text, nl=False, color=True)


def _emit_json(data: Any, compact: bool = False) -> None:
    if compact:  # one run a line: fast for 10,000 runs, and easy for `jq -c`/`grep`
        rows = data if isinstance(data, list) else [data]
        click.echo("[\n" + ",\n".join(json.dumps(r, default=str) for r in rows) + "\n]")
    else:
        click.echo(json.dumps(data, indent=2, default=str))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ledger")
def app() -> None:
    """A git-backed experiment ledger for RL training runs.

    Each `ledger run` becomes one commit on the `experiments` branch; `ledger diff` compares two
    runs only when exactly one setting differs.
    """


@app.command()
def init() -> None:
    """Set up ledger in this git repository (.ledger.yaml, DVC, runs/)."""
    from ledger.commands.init import init_repo

    result = init_repo(Path.cwd())
    for line in result.done:
        say(line)
    say(f"commit the set-up: {result.next_step}")


@app.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
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


def _skipped(broken: dict[str, str]) -> None:
    """One warning per run a listing skipped (docs/trust.md): what it holds, and every other run works."""
    for run_id, reason in broken.items():
        say(f"ledger: warning: run {run_id} skipped: {reason}")


@app.command("list")
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
    _skipped(result.broken)
    if result.unpulled:
        say(f"ledger: {result.unpulled}")
    if as_json:  # one run a line, as `_emit_json(compact=True)` writes it
        click.echo("[\n" + ",\n".join(result.json_lines()) + "\n]")
    elif as_csv:
        _show(render_csv(result), nl=False)
    else:
        _show(render_list(result), nl=False)


@app.command()
@click.argument("runs", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="One JSON object: runs, differing settings, summary metrics.")
@click.option("--metric", "metric_globs", multiple=True, metavar="GLOB", help="Only metrics matching GLOB (repeatable).")
@click.option(
    "--html",
    "html",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a page with every metric of the runs overlaid on one step axis.",
)
@click.option(
    "--group-by", "group_by", metavar="SETTING", help="On the page, draw each value of SETTING as its runs' mean with a min-max band."
)
def compare(runs: tuple[str, ...], as_json: bool, metric_globs: tuple[str, ...], html: Path | None, group_by: str | None) -> None:
    """Compare two or more runs: the settings that differ (only those) and summary metrics side by side."""
    from ledger.commands.compare import compare_runs, render_compare, write_compare_page

    result = compare_runs(Path.cwd(), list(runs), metric_globs, with_tables=html is not None)
    if html is not None:
        write_compare_page(result, html, metric_globs, group_by)
        say(f"ledger: wrote {html}")
    if as_json:
        _emit_json(result.to_json())
    else:
        _out(render_compare(result))


@app.command()
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
    _show(render_export(rows, fmt), nl=False)


@app.command()
@click.argument("run_name")
@click.argument("tags", nargs=-1)
@click.option("--rm", "remove", is_flag=True, help="Remove the tags instead of adding them.")
def tag(run_name: str, tags: tuple[str, ...], remove: bool) -> None:
    """Add tags to a run (or remove them with --rm): one metadata commit, the record unchanged."""
    from ledger.commands.meta import tag_run

    change = tag_run(Path.cwd(), run_name, list(tags), remove)
    say(f"ledger: run {change.run_id} tags: {' '.join(change.after.tags) or '(none)'}" + ("" if change.commit else " (unchanged)"))


@app.command()
@click.argument("run_name")
@click.argument("text")
def note(run_name: str, text: str) -> None:
    """Set a run's note (shown by list, show and pages): one metadata commit, the record unchanged."""
    from ledger.commands.meta import note_run

    change = note_run(Path.cwd(), run_name, text)
    say(f"ledger: run {change.run_id} note set" + ("" if change.commit else " (unchanged)"))


@app.command()
@click.argument("runs", nargs=-1)
def archive(runs: tuple[str, ...]) -> None:
    """Hide runs from `ledger list` (`--archived` shows them) and from NAME resolution."""
    from ledger.commands.meta import archive_runs

    for change in archive_runs(Path.cwd(), list(runs), True):
        say(f"ledger: archived run {change.run_id}" + ("" if change.commit else " (already archived)"))


@app.command()
@click.argument("runs", nargs=-1)
def unarchive(runs: tuple[str, ...]) -> None:
    """Show archived runs again."""
    from ledger.commands.meta import archive_runs

    for change in archive_runs(Path.cwd(), list(runs), False):
        say(f"ledger: unarchived run {change.run_id}" + ("" if change.commit else " (was not archived)"))


@app.command()
@click.option("-n", "--limit", type=click.IntRange(min=1), default=None, help="Only the newest N runs.")
@click.option("--reverse", is_flag=True, help="Oldest run first (default: newest first, as git log).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: each run's id, name and changed settings.")
def log(limit: int | None, reverse: bool, as_json: bool) -> None:
    """For each run (newest first), the settings that changed from the run before it."""
    from ledger.commands.listing import change_log_json, list_runs, render_change_log

    result = list_runs(Path.cwd(), changed=True, limit=limit, reverse=reverse)
    _skipped(result.broken)
    if result.unpulled:
        say(f"ledger: {result.unpulled}")
    if as_json:
        _emit_json(change_log_json(result))
    else:
        _show(render_change_log(result), nl=False)


@app.command()
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


@app.command()
@click.argument("run_name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of YAML.")
def show(run_name: str, as_json: bool) -> None:
    """Print one run's manifest (by id, id prefix, name, latest, latest~N)."""
    from ledger.commands.listing import show_run

    manifest, text, note = show_run(Path.cwd(), run_name)
    if note:
        say(f"ledger: {note}")
    if as_json:
        _emit_json(manifest)
    else:
        _show(text, nl=False)


@app.command()
@click.argument("a")
@click.argument("b")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (schema in README.md).")
@click.option("--metric", "metrics", multiple=True, help="Extra metric name or glob to compare (repeatable).")
@click.option("--force", is_flag=True, help="Compare even when not exactly one setting differs.")
@click.option(
    "--steps",
    "steps_metric",
    is_flag=False,
    flag_value="perf/step_time",
    default=None,
    help="Per-step table for a metric (default perf/step_time).",
)
@click.option("--no-git-diff", is_flag=True, help="Leave out the git diff of the two records.")
@click.option(
    "--code-diff", is_flag=True, help="Show the diff of every code file that differs, launcher inputs and ignored files included."
)
@click.option("--ignore", "ignore", multiple=True, help="Setting name or glob to leave out of the comparison.")
@click.option(
    "--html",
    "html",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the comparison as one self-contained HTML page (charts A vs B per step).",
)
@click.option("--any-age", is_flag=True, help="Use replicas (runs equal but for the seed) of any age, not only within diff: max_age_hours.")
@click.option("--partial", is_flag=True, help="A run still running: compare the steps it has logged so far (marked partial).")
def diff(
    a: str,
    b: str,
    as_json: bool,
    metrics: tuple[str, ...],
    force: bool,
    steps_metric: str | None,
    no_git_diff: bool,
    ignore: tuple[str, ...],
    html: Path | None,
    any_age: bool,
    code_diff: bool = False,
    partial: bool = False,
) -> int:
    """Compare runs A and B; refuses (exit 3) unless exactly one setting differs (or they are repeats).

    Every metric is judged against the noise between replicas: beyond noise, within noise, or no replicas.
    """
    from ledger.commands.diff import diff_runs

    out = diff_runs(
        Path.cwd(),
        a,
        b,
        metrics=list(metrics),
        force=force,
        steps_metric=steps_metric,
        git_diff=not no_git_diff and not as_json,
        ignore=list(ignore),
        html=html,
        any_age=any_age,
        code_diff=code_diff and not as_json,
        partial=partial,
    )
    _skipped(out.skipped)
    if out.forced_banner:
        say(out.forced_banner)
    if out.html_path is not None:
        say(f"page written to {out.html_path}")
    if as_json:
        _emit_json(out.json)
    else:
        _out(out.text)
    return out.exit_code


@app.command()
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
    return replay_cmd(Path.cwd(), opts, seeds, say=say, terminal_fd=terminal_fd(), stdout=_show, confirm=ask)


@app.command()
@click.argument("remote", required=False)
def push(remote: str | None) -> int:
    """Push the experiments branch and the runs' DVC data."""
    from ledger.commands.sync import push_runs

    return push_runs(Path.cwd(), remote, say)


@app.command()
@click.argument("remote", required=False)
@click.argument("runs", nargs=-1)
@click.option("--all-data", is_flag=True, help="Fetch the data of every run.")
def pull(remote: str | None, runs: tuple[str, ...], all_data: bool) -> int:
    """Fetch the experiments branch, and the data of the named runs.

    `ledger pull RUN...` (a first argument that is no git remote) pulls from the default remote.
    """
    from ledger.commands.sync import pull_runs

    return pull_runs(Path.cwd(), remote, list(runs), all_data, say)


@app.command()
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


@app.command()
@click.argument("runs", nargs=-1)
@click.option("--html", type=click.Path(dir_okay=False, path_type=Path), required=True, help="The page to write (one self-contained file).")
def report(runs: tuple[str, ...], html: Path) -> None:
    """Write the runs table (as `ledger list`, with change sets and small curves) as an HTML page."""
    from ledger.commands.report import write_report

    result = write_report(Path.cwd(), list(runs), html)
    _skipped(result.skipped)
    say(f"page written to {result.path} ({plural(result.runs, 'run')})")


@app.command()
@click.argument("run_name")
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path), help="Also write a PNG plot (needs ledger[plot]).")
@click.option("--html", type=click.Path(dir_okay=False, path_type=Path), help="Also write a self-contained HTML page.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: per-GPU temperatures, guard settings, events.")
def heat(run_name: str, png: Path | None, html: Path | None, as_json: bool) -> None:
    """Temperature over time for a run, with pauses and step boundaries."""
    from ledger.commands.heat import heat_report

    result = heat_report(Path.cwd(), run_name, png, html)
    if as_json:
        _emit_json(result.data)
    else:
        _show(result.text, nl=False)
    for path in result.written:
        say(f"plot written to {path}")


@app.command()
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="Port to listen on (default: a free one).")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; any other than this machine's loopback makes the ledger readable from the network.",
)
@click.option("--no-browser", is_flag=True, help="Print the address only; do not open a browser.")
def ui(port: int | None, host: str, no_browser: bool) -> int:
    """Serve the ledger in a browser, live and read-only: runs table, run pages, compare, diff (Ctrl-C stops it)."""
    from ledger.ui.serve import serve

    return serve(Path.cwd(), host, port, not no_browser, say=say, show=_show)


@app.command()
@click.argument("run_name")
def path(run_name: str) -> None:
    """Print the folder of a run inside the branch (runs/<shard>/<id>)."""
    from ledger.commands.listing import run_folder

    _show(run_folder(Path.cwd(), run_name))


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
