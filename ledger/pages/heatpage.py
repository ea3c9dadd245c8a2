"""`ledger heat RUN --html`: the heat plot as one self-contained page (static SVG, no script)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from ledger.heat.chart import heat_plot
from ledger.heat.heatlog import HeatLog
from ledger.pages.svg import Chart, Series, page, render


def heat_chart(heatlog: HeatLog, steps: Sequence[tuple[int, float]] | None) -> Chart:
    """The heat plot as a chart: temperature per GPU (and node), pauses, thresholds, step ends
    (also drawn on `ledger ui`'s run page)."""
    plot = heat_plot(heatlog, steps)
    return Chart(
        title=plot.title,
        x_label=f"{plot.unit} since start",
        y_label="temperature (C)",
        series=[Series(label, points) for label, points in plot.lines.items()],
        spans=plot.pauses,
        span_label="paused (heat guard)",
        vlines=plot.steps,
        vline_label="step boundary",
        hlines=plot.thresholds,
    )


def heat_page(run_id: str, heatlog: HeatLog, steps: Sequence[tuple[int, float]] | None, summary: str) -> str:
    """One page: temperature per GPU (and node), pauses, thresholds, step ends; the summary below,
    whole (no scroll box)."""
    chart = heat_chart(heatlog, steps)
    body = (
        f"<h1>heat of run {escape(run_id)}</h1>\n<div>{render(chart, width=900, height=360)}</div>\n"
        f'<pre class="whole" data-kind="summary">{escape(summary)}</pre>'
    )
    return page(f"ledger heat {run_id}", body)
