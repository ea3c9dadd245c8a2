"""`ledger diff`: two runs that differ in exactly one setting, every metric judged against noise."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.options import html_page, repeatable
from ledger.cli.output import echo_report, emit_json, say_skipped
from ledger.commands.diff import diff_runs
from ledger.termstyle import say


@click.command()
@click.argument("a")
@click.argument("b")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (schema in README.md).")
@repeatable("--metric", "metrics", "Extra metric name or glob to compare (repeatable).")
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
@repeatable("--ignore", "ignore", "Setting name or glob to leave out of the comparison.")
@html_page("Also write the comparison as one self-contained HTML page (charts A vs B per step).")
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
