"""Static SVG line charts for ledger's HTML pages: no JavaScript, no dependency, no network.

Chosen over matplotlib (SVG or PNG) and Vega-Lite/plotly (inline JS) by measurement (README,
"Pages"): a page of six charts of 10,000 steps each is a fraction of the size and renders in
headless Chromium faster, and an SVG keeps its numbers in the DOM, where a test can count them.

Each series is one `<polyline>` with `data-series` (its label) and `data-n` (its point count);
shaded spans, vertical and horizontal lines carry `data-kind`. The legend sits right of the plot
area, never over the data. Labels are escaped; every number is written with 1 decimal.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from html import escape
from typing import Any

import msgspec

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")
MAX_POINTS = 1200  # beyond this a series is thinned to its min and max per bucket (2 per pixel of width)


class Series(msgspec.Struct):
    """One line: label and (x, y) points; x ascending."""

    label: str
    points: list[tuple[float, float]]
    color: str = ""
    dashed: bool = False
    hover: str = ""  # a tooltip (`<title>`): e.g. the run id behind a name


class Chart(msgspec.Struct):
    """A line chart with optional shaded x spans, vertical lines, horizontal lines and x marks."""

    title: str
    x_label: str
    y_label: str
    series: list[Series] = msgspec.field(default_factory=list)
    spans: list[tuple[float, float]] = msgspec.field(default_factory=list)  # shaded (e.g. heat pauses)
    span_label: str = "paused"
    vlines: list[float] = msgspec.field(default_factory=list)  # e.g. step boundaries
    vline_label: str = "step boundary"
    hlines: list[tuple[float, str, str]] = msgspec.field(default_factory=list)  # (y, label, color)
    marks: list[tuple[float, str, str]] = msgspec.field(default_factory=list)  # (x, label, color): under the axis
    bands: list[tuple[str, str, list[tuple[float, float, float]]]] = msgspec.field(default_factory=list)  # (label, color, [(x, lo, hi)])
    y_range: tuple[float, float] | None = None  # a y scale shared with other charts (else fitted to the data)


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 2.5 or 5 times a power of ten apart)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def tick_text(value: float) -> str:
    """A tick label: short, without float noise."""
    if value == 0:
        return "0"
    if abs(value) >= 1e5 or abs(value) < 1e-3:
        return f"{value:.2g}"
    return f"{value:.6g}" if value == round(value, 6) else f"{value:.4g}"


def _thin(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    if len(points) <= MAX_POINTS:
        return points
    size = math.ceil(len(points) / (MAX_POINTS // 2))
    out: list[tuple[float, float]] = []
    for i in range(0, len(points), size):
        bucket = points[i : i + size]
        lo, hi = min(bucket, key=lambda p: p[1]), max(bucket, key=lambda p: p[1])
        out.extend(sorted({lo, hi}))
    return out


def _bounds(values: Sequence[float]) -> tuple[float, float]:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return 0.0, 1.0
    lo, hi = min(finite), max(finite)
    if lo == hi:
        pad = abs(lo) * 0.05 or 1.0
        return lo - pad, hi + pad
    pad = (hi - lo) * 0.05
    return lo - pad, hi + pad


class _Frame(msgspec.Struct, frozen=True):
    """Where the plot area is and how data maps onto it."""

    left: int
    top: int
    plot_w: int
    plot_h: int
    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float

    @classmethod
    def fit(cls, chart: Chart, width: int, height: int, legend_width: int) -> _Frame:
        left, top, bottom = 62, 28, 42
        y_lo, y_hi = chart.y_range or _bounds(_ys(chart))
        return cls(left, top, width - left - legend_width - 10, height - top - bottom, *_x_range(chart), y_lo, y_hi)

    @property
    def bottom(self) -> int:
        return self.top + self.plot_h

    def px(self, x: float) -> float:
        return self.left + (min(max(x, self.x_lo), self.x_hi) - self.x_lo) / (self.x_hi - self.x_lo) * self.plot_w

    def py(self, y: float) -> float:
        return self.top + self.plot_h - (y - self.y_lo) / (self.y_hi - self.y_lo) * self.plot_h


def _x_range(chart: Chart) -> tuple[float, float]:
    xs = [x for s in chart.series for x, _ in s.points] + [x for span in chart.spans for x in span]
    xs = [x for x in xs if math.isfinite(x)] or [0.0, 1.0]
    x_lo, x_hi = min(xs), max(xs)
    return (x_lo - 0.5, x_hi + 0.5) if x_lo == x_hi else (x_lo, x_hi)


def _ys(chart: Chart) -> list[float]:
    return (
        [y for s in chart.series for _, y in s.points]
        + [y for y, _, _ in chart.hlines]
        + [y for _, _, pts in chart.bands for _, lo, hi in pts for y in (lo, hi)]
    )


def render(chart: Chart, width: int = 760, height: int = 260, legend_width: int = 170) -> str:
    """The chart as one `<svg>` element (a string)."""
    f = _Frame.fit(chart, width, height, legend_width)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(chart.title)}">',
        f'<text x="{f.left}" y="16" class="title">{escape(chart.title)}</text>',
        f'<rect x="{f.left}" y="{f.top}" width="{f.plot_w}" height="{f.plot_h}" class="plot"/>',
    ]
    out += _spans(chart, f) + _grid(f) + _guides(chart, f) + _bands(chart, f) + _lines(chart, f)
    out.extend(hover_points(chart, f.px, f.py))
    out.append(f'<text x="{f.left + f.plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle">{escape(chart.x_label)}</text>')
    out.append(
        f'<text transform="translate(14 {f.top + f.plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">{escape(chart.y_label)}</text>'
    )
    if legend_width:
        out.extend(_legend(chart, f.left + f.plot_w + 14, f.top, legend_width))
    out.append("</svg>")
    return "".join(out)


def _spans(chart: Chart, f: _Frame) -> list[str]:
    """Shaded x spans (heat pauses), under everything else."""
    out = []
    for start, end in chart.spans:
        x0, x1 = f.px(start), f.px(end)
        out.append(
            f'<rect data-kind="span" x="{x0:.1f}" y="{f.top}" width="{max(x1 - x0, 1.5):.1f}" '
            f'height="{f.plot_h}" fill="#d62728" fill-opacity="0.15"/>'
        )
    return out


def _grid(f: _Frame) -> list[str]:
    """Horizontal grid lines with the y ticks, and the x ticks under the plot."""
    out = []
    for tick in nice_ticks(f.y_lo, f.y_hi, max(2, f.plot_h // 35)):
        y = f.py(tick)
        out.append(
            f'<line x1="{f.left}" x2="{f.left + f.plot_w}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{f.left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick_text(tick)}</text>'
        )
    for tick in nice_ticks(f.x_lo, f.x_hi, max(3, f.plot_w // 70)):
        x = f.px(tick)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.bottom}" y2="{f.bottom + 4}" class="axis"/>'
            f'<text x="{x:.1f}" y="{f.bottom + 16}" text-anchor="middle">{tick_text(tick)}</text>'
        )
    return out


def _guides(chart: Chart, f: _Frame) -> list[str]:
    """Vertical lines (step boundaries), horizontal lines (thresholds) and marks under the axis."""
    out = [
        f'<line data-kind="vline" x1="{f.px(x):.1f}" x2="{f.px(x):.1f}" y1="{f.top}" '
        f'y2="{f.bottom}" stroke="#999" stroke-width="0.6" stroke-dasharray="2 3"/>'
        for x in chart.vlines
        if f.x_lo <= x <= f.x_hi
    ]
    out += [
        f'<line data-kind="hline" x1="{f.left}" x2="{f.left + f.plot_w}" y1="{f.py(y):.1f}" y2="{f.py(y):.1f}" '
        f'stroke="{color}" stroke-width="1" stroke-dasharray="6 3"/>'
        for y, _label, color in chart.hlines
    ]
    out += [f'<path data-kind="mark" d="M{f.px(x):.1f} {f.bottom - 1} l-4 8 h8 z" fill="{color}"/>' for x, _label, color in chart.marks]
    return out


def _bands(chart: Chart, f: _Frame) -> list[str]:
    """Shaded bands between a low and a high line (a noise floor's spread)."""
    out = []
    for label, color, band in chart.bands:
        outline = [(f.px(x), f.py(hi)) for x, _, hi in band] + [(f.px(x), f.py(lo)) for x, lo, _ in reversed(band)]
        out.append(
            f'<polygon data-kind="band" data-series="{escape(label)}" fill="{color}" fill-opacity="0.18" '
            f'stroke="none" points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in outline)}"/>'
        )
    return out


def _lines(chart: Chart, f: _Frame) -> list[str]:
    """One polyline per series (a marker too where it has one point only)."""
    out = []
    for n, series in enumerate(chart.series):
        color = series.color or PALETTE[n % len(PALETTE)]
        pts = " ".join(f"{f.px(x):.1f},{f.py(y):.1f}" for x, y in _thin(series.points))
        dash = ' stroke-dasharray="5 3"' if series.dashed else ""
        tip = f"<title>{escape(series.hover)}</title>" if series.hover else ""
        out.append(
            f'<polyline data-series="{escape(series.label)}" data-n="{len(series.points)}" '
            f'points="{pts}" fill="none" stroke="{color}" stroke-width="1.5"{dash}>{tip}</polyline>'
        )
        if len(series.points) == 1:  # one point draws no line: a marker shows it
            ((x, y),) = series.points
            out.append(
                f'<circle data-kind="point" data-series="{escape(series.label)}" cx="{f.px(x):.1f}" '
                f'cy="{f.py(y):.1f}" r="3.5" fill="{color}">{tip}</circle>'
            )
    return out


MAX_HOVER_POINTS = 600  # per chart; a busier chart keeps its lines' tooltips only (page size)


def hover_points(chart: Chart, px: Any, py: Any) -> list[str]:
    """Hovering a point shows its step and value: an invisible circle per point with an SVG
    `<title>` (the browser's own tooltip: no script, works offline, escaped like every label);
    the line under it names the run id."""
    if sum(len(s.points) for s in chart.series) > MAX_HOVER_POINTS:
        return []
    out = []
    for series in chart.series:
        label = escape(series.label)
        for x, y in series.points:
            out.append(
                f'<circle data-kind="hover" cx="{px(x):.1f}" cy="{py(y):.1f}" r="4" fill="transparent">'
                f"<title>{label}: {escape(chart.x_label)} {tick_text(x)}, {y:.6g}</title></circle>"
            )
    return out


LEGEND_CHAR_PX = 6.2  # the mean advance of an 11 px sans-serif character: how many fit a legend line


def _legend(chart: Chart, x: float, y: float, width: int = 170) -> list[str]:
    """One legend row per series, threshold, shading, boundary and mark kind: outside the data. A
    label longer than the legend is wide wraps onto further lines (never cut at the SVG's edge)."""
    rows: list[str] = []
    seen_marks: set[str] = set()
    per_line = max(8, int((width - 26) / LEGEND_CHAR_PX))
    top = [y]

    def row(swatch: str, label: str) -> None:
        lines = textwrap.wrap(label, per_line, break_long_words=True, break_on_hyphens=False) or [""]
        spans = "".join(f'<tspan x="22" dy="{0 if i == 0 else 12}">{escape(line)}</tspan>' for i, line in enumerate(lines))
        rows.append(
            f'<g data-kind="legend" transform="translate({x:.1f} {top[0]:.1f})">{swatch}'
            f'<text x="22" y="9" data-label="{escape(label)}">{spans}</text></g>'
        )
        top[0] += 14 + 12 * (len(lines) - 1)

    for n, series in enumerate(chart.series):
        color = series.color or PALETTE[n % len(PALETTE)]
        dash = ' stroke-dasharray="5 3"' if series.dashed else ""
        row(f'<line x1="0" x2="18" y1="5" y2="5" stroke="{color}" stroke-width="2"{dash}/>', series.label)
    for _y, label, color in chart.hlines:
        row(f'<line x1="0" x2="18" y1="5" y2="5" stroke="{color}" stroke-dasharray="6 3"/>', label)
    if chart.spans:
        row('<rect x="0" y="0" width="18" height="10" fill="#d62728" fill-opacity="0.15"/>', chart.span_label)
    if chart.vlines:
        row('<line x1="9" x2="9" y1="0" y2="10" stroke="#999" stroke-dasharray="2 3"/>', chart.vline_label)
    for _x, label, color in chart.marks:
        if label not in seen_marks:
            seen_marks.add(label)
            row(f'<path d="M9 1 l-4 8 h8 z" fill="{color}"/>', label)
    return rows


STYLE = """
body{font:14px system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:20px} h2{font-size:16px;margin-top:28px}
.chart text{font:11px system-ui,sans-serif;fill:#333} .chart .title{font-weight:600;font-size:12px}
.chart .plot{fill:none;stroke:#bbb} .chart .grid{stroke:#eee} .chart .axis{stroke:#888}
.curves{display:flex;gap:8px} .side{display:flex;gap:24px;align-items:flex-start;flex-wrap:wrap}
pre{background:#f6f6f6;padding:10px;font-size:12px;overflow-x:auto;max-width:540px} pre.whole{max-width:none;width:max-content}
table{border-collapse:collapse;font-size:13px} td,th{border-bottom:1px solid #ddd;padding:4px 8px;
text-align:left;vertical-align:top} .refused{color:#b00} .forced{color:#b60}
"""


def page(title: str, body: str) -> str:
    """A whole self-contained HTML page: inline style, no script, no external resource."""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{STYLE}</style></head><body>\n{body}\n</body></html>\n"
    )
