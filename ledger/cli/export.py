"""`ledger export`: a run's per-step metrics as a table."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.output import echo_text
from ledger.commands.export import export_rows, render_export


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
    _run_id, rows = export_rows(Path.cwd(), run_name, axis)
    echo_text(render_export(rows, fmt), nl=False)
