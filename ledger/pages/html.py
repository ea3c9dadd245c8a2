"""The HTML pages of `ledger diff --html` and `ledger report --html`: one self-contained file each.

Charts are static SVG from `ledger.pages.svg` (no script, nothing fetched at view time). The diff
page puts A and B on one step axis per question (rollout time, response length, time per 1k tokens,
train time, loss, reward), heat-paused steps shaded, steps only one run has marked under the axis,
the changed setting (or the refusal) as the title and the text report beside the charts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import msgspec

from ledger.compare.diffcore import DiffReport, pauses_from_manifest
from ledger.compare.stats import RESPONSE_LEN, ROLLOUT_TIME, ROLLOUT_TIME_PER_1K, Pause
from ledger.metrics.table import MetricsTable
from ledger.pages.answer import ANSWER_STYLE, answer_table_html, run_label
from ledger.pages.comparepage import CompareRun, identical_label, identical_to, metric_group, metric_names, run_chart
from ledger.pages.noisehtml import degenerate_banner, degenerate_text, noise_bands, noise_verdicts
from ledger.pages.series import series_of
from ledger.pages.svg import Chart, Series, page, render
from ledger.textfmt import show_value

COLOR_A, COLOR_B = "#1f77b4", "#d62728"
# (title, y label, candidate metric names: the first one logged is drawn)
DIFF_CHARTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("rollout time", "seconds", (ROLLOUT_TIME,)),
    ("response length (mean)", "tokens", (RESPONSE_LEN,)),
    # rollout time / (mean response length / 1000): per 1k tokens of the MEAN response, not per token generated
    ("rollout time per 1k tokens of the mean response length", "s per 1k mean-response tokens", (ROLLOUT_TIME_PER_1K,)),
    ("train time", "seconds", ("perf/train_time",)),
    ("loss", "loss", ("train/loss", "loss")),
    ("reward", "reward", ("rollout/raw_reward", "rollout/rewards", "train/reward_mean", "reward")),
)


def _paused_steps(table: MetricsTable | None, pauses: Sequence[Pause]) -> set[int]:
    if table is None or not pauses:
        return set()
    return {
        s
        for s, row in table.rows.items()
        if row.t_start is not None and row.t_end is not None and any(row.t_start < end and start < row.t_end for start, end in pauses)
    }


class DiffPageInput(msgspec.Struct, frozen=True):
    """What the diff page draws: the report, its text, both runs' manifests and metrics."""

    report: DiffReport
    text: str
    manifest_a: Mapping[str, Any]
    manifest_b: Mapping[str, Any]
    table_a: MetricsTable | None
    table_b: MetricsTable | None
    # every run of each side (A or B first, then its replicas), for the noise section's bands
    replicas: tuple[Sequence[MetricsTable | None], Sequence[MetricsTable | None]] = ((), ())
    partial: str | None = None  # `--partial`: the banner saying which run is still running


def diff_title(report: DiffReport) -> str:
    """The page title: the one changed setting, or the refusal and its differences."""
    changes = "; ".join(f"{c.name}: {show_value(c.a)} -> {show_value(c.b)}" for c in report.changed)
    if report.refused:
        return f"refused: {len(report.changed)} settings differ" + (f" ({changes})" if changes else "")
    if report.forced:
        return f"FORCED: {changes or 'no setting differs'}"
    return changes or "no setting differs: two repeats"


def diff_charts(data: DiffPageInput) -> list[Chart]:
    """One chart per question both runs can answer (a metric neither logged gives none)."""
    paused = _paused_steps(data.table_a, pauses_from_manifest(data.manifest_a)) | _paused_steps(
        data.table_b, pauses_from_manifest(data.manifest_b)
    )

    name_a, name_b = run_label(data.manifest_a, data.report.a), run_label(data.manifest_b, data.report.b)
    charts = []
    for title, y_label, candidates in DIFF_CHARTS:
        picked = _first_logged(data, candidates)
        if picked is None:
            continue
        metric, (axis_a, points_a), (axis_b, points_b) = picked
        line_a = Series(f"A {name_a}", points_a, COLOR_A, hover=str(data.manifest_a.get("id") or ""))
        label_b = identical_label(f"B {name_b}", identical_to(points_b, [line_a] if points_a else [], common_steps=True))
        chart = Chart(
            title=f"{title} ({metric})",
            x_label=axis_a if points_a else axis_b,
            y_label=y_label,
            series=[line_a, Series(label_b, points_b, COLOR_B, dashed=True, hover=str(data.manifest_b.get("id") or ""))],
            span_label="heat-paused step (left out)",
        )
        if "rollout" in (axis_a, axis_b):
            chart.spans = [(s - 0.5, s + 0.5) for s in sorted(paused)]
        chart.marks = _only_in_one(points_a, points_b)
        charts.append(chart)
    return charts


Points = list[tuple[float, float]]


def _first_logged(data: DiffPageInput, candidates: Sequence[str]) -> tuple[str, tuple[str, Points], tuple[str, Points]] | None:
    """The first of a question's metrics either run logged, with each side's axis and points."""
    for metric in candidates:
        a, b = series_of(data.table_a, metric), series_of(data.table_b, metric)
        if a[1] or b[1]:
            return metric, a, b
    return None


def _only_in_one(points_a: Points, points_b: Points) -> list[tuple[float, str, str]]:
    """A mark at each step only one of the two runs has."""
    steps_a, steps_b = {x for x, _ in points_a}, {x for x, _ in points_b}
    return [(x, "only in A", COLOR_A) for x in sorted(steps_a - steps_b)] + [(x, "only in B", COLOR_B) for x in sorted(steps_b - steps_a)]


def diff_page(data: DiffPageInput) -> str:
    """The whole `ledger diff --html` page: what changed, any DEGENERATE banner, the answer table
    and the noise verdicts first (the first screen), then the charts of the six questions, every
    other logged metric in collapsible groups, the replica bands and the text report."""
    report = data.report
    title = diff_title(report)
    if data.partial:
        title = f"PARTIAL (still running): {title}"
    css = "refused" if report.refused else "forced" if report.forced else ""
    svgs = "\n".join(render(c) for c in diff_charts(data)) or "<p>no per-step metrics to draw</p>"
    partial = f'<p class="forced" data-kind="partial">{escape(data.partial)}</p>\n' if data.partial else ""
    # the first screen: what changed, any DEGENERATE run, per metric the answer and its verdict
    body = (
        f"<style>{ANSWER_STYLE}</style>"
        f'<h1 class="{css}">{escape(title)}</h1>\n{partial}{degenerate_banner(report)}'
        f"{answer_table_html(report, data.manifest_a, data.manifest_b)}\n{noise_verdicts(report)}\n"
        f'<div class="charts">{svgs}</div>\n{other_metric_groups(data)}\n{noise_bands(report, *data.replicas)}\n'
        f"<details><summary>the text report</summary><pre>{escape(data.text)}</pre></details>"
    )
    return page(f"ledger diff: {title}", body)


def other_metric_groups(data: DiffPageInput) -> str:
    """Every metric either run logged that the six question charts do not draw, one chart each,
    in collapsible groups by prefix (`perf/`, `train/`, `rollout/`, `eval/`), closed at first."""
    runs = [
        CompareRun(run_label(data.manifest_a, data.report.a), str(data.manifest_a.get("id") or data.report.a), {}, data.table_a),
        CompareRun(run_label(data.manifest_b, data.report.b), str(data.manifest_b.get("id") or data.report.b), {}, data.table_b),
    ]
    if runs[0].label == runs[1].label:
        runs = [
            CompareRun(f"A {r.label}", r.id, {}, r.table) if i == 0 else CompareRun(f"B {r.label}", r.id, {}, r.table)
            for i, r in enumerate(runs)
        ]
    drawn = {m for _, _, candidates in DIFF_CHARTS for m in candidates}
    groups: dict[str, list[str]] = {}
    for name in metric_names(runs):
        if name not in drawn:
            groups.setdefault(metric_group(name), []).append(name)
    out = []
    for group, names in groups.items():
        charts = "".join(render(run_chart(m, runs, common_steps=True)) for m in names)
        out.append(
            f'<details data-group="{escape(group)}"><summary>{escape(group)}/: {len(names)} more metrics</summary>{charts}</details>'
        )
    return "\n".join(out)


class ReportRow(msgspec.Struct, frozen=True):
    """One run of `ledger report`: its `ledger list` fields, change set and small curves."""

    summary: Mapping[str, Any]
    changes: str
    table: MetricsTable | None
    groups: int | None = None  # groups per rollout (`rollout-batch-size`), for the degenerate flag


# the report's sparklines: (title with its unit, metric)
CURVES = (("loss", "train/loss"), ("rollout time (s)", ROLLOUT_TIME))


def shared_y_ranges(tables: Sequence[MetricsTable | None]) -> dict[str, tuple[float, float]]:
    """One y scale per sparkline metric over every run of the page, so rows compare by eye."""
    out = {}
    for _title, metric in CURVES:
        ys = [y for t in tables for _, y in series_of(t, metric)[1]]
        if ys:
            lo, hi = min(ys), max(ys)
            pad = (hi - lo) * 0.05 or abs(lo) * 0.05 or 1.0
            out[metric] = (lo - pad, hi + pad)
    return out


def _run_curves(table: MetricsTable | None, y_ranges: Mapping[str, tuple[float, float]] | None = None) -> str:
    charts = []
    for title, metric in CURVES:
        axis, points = series_of(table, metric)
        if points:
            chart = Chart(title=title, x_label=axis, y_label="", series=[Series(metric, points)])
            chart.y_range = (y_ranges or {}).get(metric)
            charts.append(render(chart, width=280, height=110, legend_width=0))
    return f'<div class="curves">{"".join(charts)}</div>' if charts else "-"


def _state_text(row: ReportRow) -> str:
    """A run's state, with `(replay)` for a replay and its DEGENERATE flag if it has one."""
    s = row.summary
    state = (s.get("state") or "-") + (" (replay)" if s.get("replay_of") else "")
    flagged = degenerate_text(str(s.get("id")), row.table, row.groups)
    return f"{state} {flagged}" if flagged else state


def _report_cells(row: ReportRow, notes: bool) -> list[Any]:
    """A run's cells of the report table before its curves (a note column when `notes`)."""
    s = row.summary
    paused = "-" if s.get("paused") is None else f"{s['paused']} ({s.get('paused_s') or 0:.0f} s)"
    duration = s.get("duration_s")
    return [
        s.get("id"),
        s.get("name") or "-",
        _state_text(row),
        "-" if s.get("exit_code") is None else s.get("exit_code"),
        "-" if not isinstance(duration, (int, float)) else f"{duration:.1f} s",
        paused,
        (s.get("started") or "-")[:19].replace("T", " "),
        *([s.get("note") or "-"] if notes else []),
        row.changes,
    ]


def report_page(rows: Sequence[ReportRow], heading: str) -> str:
    """The whole `ledger report --html` page: the runs table with change sets and curves."""
    y_ranges = shared_y_ranges([row.table for row in rows])
    notes = any(row.summary.get("note") for row in rows)
    head = [
        "id",
        "name",
        "state",
        "exit",
        "time",
        "paused",
        "started",
        *(["note"] if notes else []),
        "changed (vs the run before it)",
        "curves",
    ]
    lines = ["<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for row in rows:
        s = row.summary
        cells = _report_cells(row, notes)
        lines.append(
            '<tr data-run="'
            + escape(str(s.get("id")))
            + '">'
            + "".join(f"<td>{escape(str(c))}</td>" for c in cells)
            + f"<td>{_run_curves(row.table, y_ranges)}</td></tr>"
        )
    lines.append("</table>")
    return page(heading, f"<h1>{escape(heading)}</h1>\n" + "\n".join(lines))
