"""The noise section of the `ledger diff --html` page: verdict per metric, each side's replica band.

A separate function (`noise_section`) that `html.diff_page` appends, so the page's own layout can
change without it. Per judged metric, one static SVG chart on the common steps: each side's mean
over its runs (A solid, B dashed) and, where a side has two or more runs, its band (the lowest and
highest replica at each step, thin light lines of the side's colour). Charts come in the order of
the verdict table, at most `MAX_CHARTS`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from html import escape

from ledger.compare.diffcore import DiffReport
from ledger.compare.flags import degenerate_flags
from ledger.compare.logparse import MetricsTable
from ledger.compare.noise import METHODS, NoiseMetric, column
from ledger.pages.svg import Chart, Series, render

MAX_CHARTS = 8
COLOR_A, COLOR_B = "#1f77b4", "#d62728"
BAND_A, BAND_B = "#9ecae1", "#f4a6a6"
_VERDICT_CLASS = {"beyond noise": "beyond", "within noise": "within", "no replicas": "noreplicas", "repeat": "repeat"}


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:+.4g}" if signed else f"{value:.4g}"


def _band(tables: Sequence[MetricsTable | None], m: NoiseMetric, label: str, color: str, band: str, dashed: bool) -> list[Series]:
    cols = [c for c in (column(t, m.metric, m.axis) for t in tables) if c]
    steps = sorted(set.intersection(*(set(c) for c in cols))) if cols else []
    if not steps:
        return []
    mean = [(float(s), statistics.fmean(c[s] for c in cols)) for s in steps]
    out = [Series(f"{label} mean of {len(cols)} run{'s' if len(cols) != 1 else ''}", mean, color, dashed)]
    if len(cols) >= 2:
        out.append(Series(f"{label} band: lowest replica", [(float(s), min(c[s] for c in cols)) for s in steps], band))
        out.append(Series(f"{label} band: highest replica", [(float(s), max(c[s] for c in cols)) for s in steps], band))
    return out


def _row(m: NoiseMetric) -> str:
    ci = "-" if m.diff_ci is None else f"[{_fmt(m.diff_ci[0], True)}, {_fmt(m.diff_ci[1], True)}]"
    cells = [m.metric, m.axis, str(m.steps), f"{m.replicas_a} + {m.replicas_b}", _fmt(m.diff, True), ci, _fmt(m.noise_floor), m.verdict]
    css = _VERDICT_CLASS.get(m.verdict, "")
    return (
        f'<tr data-metric="{escape(m.metric)}" data-verdict="{escape(m.verdict)}">'
        + "".join(f"<td>{escape(c)}</td>" for c in cells[:-1])
        + f'<td class="{css}">{escape(cells[-1])}</td></tr>'
    )


def noise_section(report: DiffReport, tables_a: Sequence[MetricsTable | None], tables_b: Sequence[MetricsTable | None]) -> str:
    """The section as HTML (empty when the diff has no noise report): table, session notes, bands."""
    noise = report.noise
    if noise is None:
        return ""
    head = ["metric", "axis", "steps", "runs A + B", "diff (B-A)", "95% interval", "noise floor", "verdict"]
    table = (
        '<table class="noise"><tr>'
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr>"
        + "".join(_row(m) for m in noise.metrics)
        + "</table>"
    )
    notes = "".join(f'<p class="session">{escape(n)}</p>' for n in noise.session)
    flags = "".join(f'<p class="flag">DEGENERATE: {escape(f.run)}: {escape(f.describe())}</p>' for f in report.flags)
    charts = []
    for m in noise.metrics[:MAX_CHARTS]:
        series = _band(tables_a or [None], m, "A", COLOR_A, BAND_A, False) + _band(tables_b or [None], m, "B", COLOR_B, BAND_B, True)
        if series:
            chart = Chart(title=f"{m.metric}: {m.verdict}", x_label=m.axis, y_label=m.metric, series=series)
            charts.append(f'<div class="band" data-metric="{escape(m.metric)}">{render(chart, legend_width=230)}</div>')
    method = METHODS.get(noise.method, noise.method)
    runs = f"A: {len(noise.replicas_a)} run(s), B: {len(noise.replicas_b)} run(s)"
    return (
        f'<section class="noise"><h2>Is the difference real? ({escape(runs)}; {escape(method)})</h2>\n'
        f"{flags}{table}{notes}\n{''.join(charts)}</section>"
    )


def degenerate_text(run: str, table: MetricsTable | None, groups: int | None = None) -> str:
    """`DEGENERATE: ...` for a run of `ledger report` over all its steps ("" when it is not);
    `groups`: its number of groups per rollout (`ledger.compare.flags.groups_of`)."""
    flags = degenerate_flags(run, table, groups=groups)
    return "; ".join(f"DEGENERATE: {f.describe()}" for f in flags)
