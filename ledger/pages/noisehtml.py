"""The noise section of the `ledger diff --html` page: verdict per metric, each side's replica band.

`degenerate_banner`, `noise_verdicts` and `noise_bands` are placed by `html.diff_page`: the banner
and the verdicts lead the page (its first screen), the bands follow the charts. Per judged metric,
one static SVG chart on the common steps: each side's mean over its runs (A solid, B dashed) and,
where a side has two or more runs, its band (the lowest and highest replica at each step, thin
light lines of the side's colour). Charts come in the order of the verdict table, at most
`MAX_CHARTS`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from html import escape

from ledger.compare.diffcore import DiffReport
from ledger.compare.flags import degenerate_flags
from ledger.compare.noise import METHODS, NoiseMetric, column
from ledger.metrics.table import MetricsTable
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
    steps = _common_steps(cols)
    if not steps:
        return []
    mean = [(float(s), statistics.fmean(c[s] for c in cols)) for s in steps]
    out = [Series(f"{label} mean of {len(cols)} run{'s' if len(cols) != 1 else ''}", mean, color, dashed)]
    return out + (_replica_band(cols, steps, label, band) if len(cols) >= 2 else [])


def _common_steps(cols: list[dict[int, float]]) -> list[int]:
    """The steps every replica logged, in order."""
    return sorted(set.intersection(*(set(c) for c in cols))) if cols else []


def _replica_band(cols: list[dict[int, float]], steps: list[int], label: str, band: str) -> list[Series]:
    """The lowest and the highest replica at each common step, the edges of a side's band."""
    low = Series(f"{label} band: lowest replica", [(float(s), min(c[s] for c in cols)) for s in steps], band)
    return [low, Series(f"{label} band: highest replica", [(float(s), max(c[s] for c in cols)) for s in steps], band)]


def _row(m: NoiseMetric) -> str:
    ci = "-" if m.diff_ci is None else f"[{_fmt(m.diff_ci[0], True)}, {_fmt(m.diff_ci[1], True)}]"
    cells = [m.metric, m.axis, str(m.steps), f"{m.replicas_a} + {m.replicas_b}", _fmt(m.diff, True), ci, _fmt(m.noise_floor), m.verdict]
    css = _VERDICT_CLASS.get(m.verdict, "")
    return (
        f'<tr data-metric="{escape(m.metric)}" data-verdict="{escape(m.verdict)}">'
        + "".join(f"<td>{escape(c)}</td>" for c in cells[:-1])
        + f'<td class="{css}">{escape(cells[-1])}</td></tr>'
    )


def degenerate_banner(report: DiffReport) -> str:
    """One line per DEGENERATE flag on A, B or a replica, for the top of the page ("" when none)."""
    return "".join(
        f'<p class="flag" data-banner="degenerate">DEGENERATE: {escape(f.run)}: {escape(f.describe())}</p>' for f in report.flags
    )


def noise_verdicts(report: DiffReport) -> str:
    """The verdict per metric (beyond or within noise, its interval and replica counts) with the
    session notes; a sentence when nothing was judged; "" when the diff has no noise report."""
    noise = report.noise
    if noise is None:
        return ""
    method = METHODS.get(noise.method, noise.method)
    runs = f"A: {len(noise.replicas_a)} run(s), B: {len(noise.replicas_b)} run(s)"
    heading = f"<h2>Is the difference real? ({escape(runs)}; {escape(method)})</h2>\n"
    notes = "".join(f'<p class="session">{escape(n)}</p>' for n in noise.session)
    if not noise.metrics:
        said = "no metric was judged against noise: none both sides logged on common steps"
        return f'<section class="noise">{heading}<p data-kind="verdicts">{said}</p>{notes}</section>'
    head = ["metric", "axis", "steps", "runs A + B", "diff (B-A)", "95% interval", "noise floor", "verdict"]
    table = (
        '<table class="noise" data-kind="verdicts"><tr>'
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr>"
        + "".join(_row(m) for m in noise.metrics)
        + "</table>"
    )
    return f'<section class="noise">{heading}{table}{notes}</section>'


def noise_bands(report: DiffReport, tables_a: Sequence[MetricsTable | None], tables_b: Sequence[MetricsTable | None]) -> str:
    """Per judged metric (in the verdict table's order, at most MAX_CHARTS), each side's mean and band."""
    noise = report.noise
    if noise is None:
        return ""
    charts = []
    for m in noise.metrics[:MAX_CHARTS]:
        series = _band(tables_a or [None], m, "A", COLOR_A, BAND_A, False) + _band(tables_b or [None], m, "B", COLOR_B, BAND_B, True)
        if series:
            chart = Chart(title=f"{m.metric}: {m.verdict}", x_label=m.axis, y_label=m.metric, series=series)
            charts.append(f'<div class="band" data-metric="{escape(m.metric)}">{render(chart, legend_width=230)}</div>')
    return f'<section class="bands"><h2>Replica bands</h2>{"".join(charts)}</section>' if charts else ""


def noise_section(report: DiffReport, tables_a: Sequence[MetricsTable | None], tables_b: Sequence[MetricsTable | None]) -> str:
    """The flags, the verdicts and the bands together (the diff page places them apart)."""
    return degenerate_banner(report) + noise_verdicts(report) + noise_bands(report, tables_a, tables_b)


def degenerate_text(run: str, table: MetricsTable | None, groups: int | None = None) -> str:
    """`DEGENERATE: ...` for a run of `ledger report` over all its steps ("" when it is not);
    `groups`: its number of groups per rollout (`ledger.compare.flags.groups_of`)."""
    flags = degenerate_flags(run, table, groups=groups)
    return "; ".join(f"DEGENERATE: {f.describe()}" for f in flags)
