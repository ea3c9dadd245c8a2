"""The verbs that compare runs and draw them: `compare`, `diff`, the pages of `report` and
`heat`, and `ui` (the same in a browser)."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.output import echo_report, echo_text, emit_json, say_skipped
from ledger.termstyle import say
from ledger.textfmt import plural


@click.command()
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
        emit_json(result.to_json())
    else:
        echo_report(render_compare(result))


@click.command()
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
    say_skipped(out.skipped)
    if out.forced_banner:
        say(out.forced_banner)
    if out.html_path is not None:
        say(f"page written to {out.html_path}")
    if as_json:
        emit_json(out.json)
    else:
        echo_report(out.text)
    return out.exit_code


@click.command()
@click.argument("runs", nargs=-1)
@click.option("--html", type=click.Path(dir_okay=False, path_type=Path), required=True, help="The page to write (one self-contained file).")
def report(runs: tuple[str, ...], html: Path) -> None:
    """Write the runs table (as `ledger list`, with change sets and small curves) as an HTML page."""
    from ledger.commands.report import write_report

    result = write_report(Path.cwd(), list(runs), html)
    say_skipped(result.skipped)
    say(f"page written to {result.path} ({plural(result.runs, 'run')})")


@click.command()
@click.argument("run_name")
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path), help="Also write a PNG plot (needs ledger[plot]).")
@click.option("--html", type=click.Path(dir_okay=False, path_type=Path), help="Also write a self-contained HTML page.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: per-GPU temperatures, guard settings, events.")
def heat(run_name: str, png: Path | None, html: Path | None, as_json: bool) -> None:
    """Temperature over time for a run, with pauses and step boundaries."""
    from ledger.commands.heat import heat_report

    result = heat_report(Path.cwd(), run_name, png, html)
    if as_json:
        emit_json(result.data)
    else:
        echo_text(result.text, nl=False)
    for path in result.written:
        say(f"plot written to {path}")


@click.command()
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

    return serve(Path.cwd(), host, port, not no_browser, say=say, show=echo_text)


# what `ledger.cli` adds to the `ledger` group
COMMANDS = (compare, diff, report, heat, ui)
