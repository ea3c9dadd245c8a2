"""The answer a diff page leads with: the changed setting and, per metric, median A, median B,
the ratio (timing) or difference (learning) with its interval, and where learning diverged.

Plain rows (`answer_rows`) and one HTML table (`answer_table_html`), kept apart from the charts so
other parts of the page (replica bands, verdicts) can sit beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from html import escape
from typing import Any

import msgspec

from ledger.compare.diffcore import DiffReport
from ledger.compare.render import unit_of
from ledger.metrics.trackers import tracker_links
from ledger.textfmt import MISSING, show_value


class AnswerRow(msgspec.Struct, frozen=True):
    """One metric of the answer."""

    kind: str  # "timing" | "learning"
    metric: str
    n: int
    median_a: str
    median_b: str
    change: str  # "1.234x [1.1, 1.3]" or "+0.05 [+0.01, +0.09]"
    diverged: str  # learning only: the first step beyond float noise, or "never"


def _num(value: float | None, unit: str = "") -> str:
    if value is None or not math.isfinite(value):
        return MISSING
    return f"{value:.4g}" + (f" {unit}" if unit else "")


def _interval(ci: tuple[float, float] | None, n: int, fmt: str) -> str:
    if ci is not None:
        return f" [{ci[0]:{fmt}}, {ci[1]:{fmt}}]"
    return " (no interval: n < 6)" if 0 < n < 6 else ""


def answer_rows(report: DiffReport) -> list[AnswerRow]:
    """Timing metrics first (ratio B/A), then learning metrics (median of per-step B-A)."""
    rows = []
    for t in report.timing:
        ratio = MISSING if not math.isfinite(t.median_ratio) else f"{t.median_ratio:.3f}x"
        if ratio != MISSING:
            ratio += _interval(t.ratio_ci, t.common_steps, ".3f")
        unit = unit_of(t.metric)
        rows.append(AnswerRow("timing", t.metric, t.common_steps, _num(t.median_a, unit), _num(t.median_b, unit), ratio, ""))
    for r in report.learning:
        diff = MISSING if not math.isfinite(r.median_diff) else f"{r.median_diff:+.4g}"
        if diff != MISSING:
            diff += _interval(r.diff_ci, r.common_steps, "+.4g")
        where = "never" if r.first_divergence is None else f"{r.axis} {r.first_divergence}"
        if r.first_divergence is None and r.identical_before:
            where = "never (identical)"
        rows.append(AnswerRow("learning", r.metric, r.common_steps, _num(r.median_a), _num(r.median_b), diff, where))
    return rows


def run_label(manifest: Mapping[str, Any], fallback: str) -> str:
    """A run as people call it: its name, else its id."""
    return str(manifest.get("name") or manifest.get("id") or fallback)


def answer_table_html(report: DiffReport, manifest_a: Mapping[str, Any], manifest_b: Mapping[str, Any]) -> str:
    """The answer as one HTML table (fixed layout, wraps instead of scrolling at 1280 px)."""
    lines = [
        _answer_head(report, manifest_a, manifest_b),
        '<table class="answer" data-kind="answer">',
        "<tr><th>metric</th><th>n</th><th>median A</th><th>median B</th>"
        "<th>B/A or B−A (95% interval)</th><th>learning diverged at</th></tr>",
    ]
    for row in answer_rows(report):
        lines.append(
            f'<tr data-metric="{escape(row.metric)}" data-kind="{row.kind}"><td>{escape(row.metric)}</td>'
            f"<td>{row.n}</td><td>{escape(row.median_a)}</td><td>{escape(row.median_b)}</td>"
            f"<td>{escape(row.change)}</td><td>{escape(row.diverged or '')}</td></tr>"
        )
    if len(lines) == 3:
        said = (
            f"no metric compared: the diff was refused ({len(report.changed)} settings differ); the charts below draw each run as it is"
            if report.refused
            else "no metric both runs logged on a common step"
        )
        lines.append(f'<tr><td colspan="6">{escape(said)}</td></tr>')
    lines.append("</table>")
    return "\n".join(lines)


def _answer_head(report: DiffReport, manifest_a: Mapping[str, Any], manifest_b: Mapping[str, Any]) -> str:
    """What changed and which run is A and which B, then their tracker links and notes."""
    a, b = run_label(manifest_a, report.a), run_label(manifest_b, report.b)
    id_a, id_b = str(manifest_a.get("id") or report.a), str(manifest_b.get("id") or report.b)
    changed = "; ".join(f"{c.name}: {show_value(c.a)} → {show_value(c.b)}" for c in report.changed) or "no setting"
    head = (
        f'<p class="answer-change">changed: <b>{escape(changed)}</b> &nbsp; '
        f'A = <span title="{escape(id_a)}">{escape(a)}</span>, B = <span title="{escape(id_b)}">{escape(b)}</span></p>'
    )
    links = [f"{label}: {tracker_html(m)}" for label, m in (("A", manifest_a), ("B", manifest_b)) if tracker_html(m)]
    if links:
        head += f'<p class="trackers">{" &nbsp; ".join(links)}</p>'
    return head + notes_html([("A", manifest_a), ("B", manifest_b)])


def notes_html(runs: list[tuple[str, Mapping[str, Any]]]) -> str:
    """One paragraph per run that has a note (`ledger note`, or its `--note`), escaped: "" when none has."""
    return "".join(
        f'<p class="note" data-kind="note">note on {escape(label)}: {escape(str(m.get("note")))}</p>' for label, m in runs if m.get("note")
    )


def tracker_html(manifest: Mapping[str, Any]) -> str:
    """The run's W&B/MLflow links (http(s) only, escaped) and TensorBoard folder, as HTML."""
    parts = []
    for name, text, url in tracker_links(manifest.get("trackers")):
        parts.append(
            f'<a data-tracker="{name}" href="{escape(url)}">{escape(text)}</a>'
            if url
            else f'<span data-tracker="{name}">{escape(text)}</span>'
        )
    return ", ".join(parts)


ANSWER_STYLE = (
    ".answer{table-layout:auto;max-width:1200px;margin:8px 0 16px} .answer td,.answer th"
    "{white-space:normal;overflow-wrap:anywhere} .answer-change{font-size:15px}"
)
