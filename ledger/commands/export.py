"""`ledger export RUN --format csv|tsv|json`: a run's per-step metrics in the shapes DVC's plots
(`dvc plots show`), spreadsheets and pandas read: one row per step, one column per metric.

Rollout-keyed metrics come one row per rollout id (`step`, with `t_start`/`t_end` in unix
seconds); metrics logged per train step (`--axis train`) one row per train step. JSON is a list
of objects (the form `dvc plots` takes); a missing or non-finite value is an empty cell / null.
A cell a spreadsheet would run as a formula (a pulled metric named `=HYPERLINK(...)`) starts
with `'` (`textfmt.csv_text`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ledger.errors import LedgerError, UsageError
from ledger.metrics.store import load_metrics
from ledger.opening import listing_for
from ledger.runref import resolve
from ledger.textfmt import csv_text

FORMATS = ("csv", "tsv", "json")
AXES = ("rollout", "train")


Cell = int | float | None  # a step number, a time or a metric; None where it is not finite


def _clean(value: Cell) -> Cell:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def export_rows(start: Path, name: str, axis: str = "rollout") -> tuple[str, list[dict[str, Cell]]]:
    """(run id, rows) of one run's per-step metrics on one axis."""
    if axis not in AXES:
        raise UsageError(f"--axis {axis!r} is not an axis", "use --axis rollout or --axis train")
    repo, _cfg, tip, listing = listing_for(start)
    entry = resolve(repo, tip, name, listing)
    table = load_metrics(repo, entry)
    if table is None:
        raise LedgerError(f"run {entry.id} logged no per-step metrics", "`ledger show RUN` says what it logged")
    if axis == "rollout":
        rows = [{"step": s, "t_start": r.t_start, "t_end": r.t_end, **r.metrics} for s, r in sorted(table.rows.items())]
    else:
        rows = [{"step": s, **m} for s, m in sorted(table.train_steps.items())]
    if not rows:
        other = "train" if axis == "rollout" else "rollout"
        raise LedgerError(f"run {entry.id} has no metrics per {axis} step", f"try --axis {other}")
    return entry.id, [{k: _clean(v) for k, v in row.items()} for row in rows]


def render_export(rows: list[dict[str, Cell]], fmt: str) -> str:
    """The rows as CSV, TSV (a header, then one line per step) or a JSON list of objects."""
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r} is not a format", "use --format csv, tsv or json")
    if fmt == "json":
        return json.dumps(rows, allow_nan=False) + "\n"
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    return csv_text(columns, ([row.get(k) for k in columns] for row in rows), "," if fmt == "csv" else "\t")
