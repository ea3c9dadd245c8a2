"""The page of `ledger compare --html`: every logged metric of N runs overlaid on a common step
axis, one chart per metric, in collapsible groups by prefix (`perf/`, `train/`, `rollout/`, `eval/`).

With `--group-by SETTING` each group of runs (one value of that setting: replicas across seeds)
is drawn as its mean with a min–max band instead of one line per run. Run names are the labels,
ids are the hover text. Static SVG from `ledger.pages.svg`: one self-contained file, no script.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

import msgspec

from ledger.metrics.table import MetricsTable
from ledger.pages.answer import tracker_html
from ledger.pages.series import series_of
from ledger.pages.svg import PALETTE, Chart, Series, page, render
from ledger.textfmt import show_value


class CompareRun(msgspec.Struct, frozen=True):
    """One run on the page: label (name or id), id, its settings and per-step metrics."""

    label: str
    id: str
    settings: dict[str, Any]
    table: MetricsTable | None
    trackers: Any = None  # the manifest's `trackers` (W&B/MLflow links the job printed)
    note: str | None = None  # its note (`ledger note`, or its `--note`)


def metric_names(runs: Sequence[CompareRun]) -> list[str]:
    """Every metric any run logged (rollout rows and train steps)."""
    names: set[str] = set()
    for r in runs:
        if r.table is not None:
            for row in r.table.rows.values():
                names.update(row.metrics)
            for metrics in r.table.train_steps.values():
                names.update(metrics)
    return sorted(names)


def metric_group(name: str) -> str:
    """The group a metric's chart sits in: its prefix before the first `/` (`other` without one)."""
    return name.split("/", 1)[0] if "/" in name else "other"


def identical_to(points: list[tuple[float, float]], earlier: Sequence[Series], common_steps: bool = False) -> Series | None:
    """The first of `earlier` whose line coincides with `points`: every point equal, or with
    `common_steps` equal on every step both have (at least one; a run still running has fewer)."""
    for other in earlier:
        if not common_steps:
            if sorted(other.points) == sorted(points):
                return other
            continue
        theirs = dict(other.points)
        common = [(x, y) for x, y in points if x in theirs]
        if common and all(theirs[x] == y for x, y in common):
            return other
    return None


def identical_label(label: str, same: Series | None) -> str:
    """A legend label that says which earlier line this one coincides with."""
    return label if same is None else f"{label} (identical to {same.label})"


def run_chart(metric: str, runs: Sequence[CompareRun], common_steps: bool = False) -> Chart:
    """One line per run; a line that coincides with an earlier run's says so in the legend
    (`identical_to`; the diff page compares on the common steps)."""
    axis = "step"
    series: list[Series] = []
    for n, r in enumerate(runs):
        axis, points = series_of(r.table, metric)
        if points:
            points = sorted(points)
            same = identical_to(points, series, common_steps)
            series.append(Series(identical_label(r.label, same), points, PALETTE[n % len(PALETTE)], dashed=same is not None, hover=r.id))
    return Chart(metric, axis, metric, series)


def group_chart(metric: str, runs: Sequence[CompareRun], setting: str) -> Chart:
    """Per value of `setting`: the mean over its runs at each step, with the min–max band."""
    groups: dict[str, list[CompareRun]] = {}
    for r in runs:
        groups.setdefault(show_value(r.settings.get(setting)), []).append(r)
    chart = Chart(metric, "step", metric)
    for n, (value, members) in enumerate(sorted(groups.items())):
        by_step: dict[float, list[float]] = {}
        for r in members:
            axis, points = series_of(r.table, metric)
            chart.x_label = axis
            for x, y in points:
                by_step.setdefault(x, []).append(y)
        if not by_step:
            continue
        color = PALETTE[n % len(PALETTE)]
        steps = sorted(by_step)
        mean = [(x, sum(by_step[x]) / len(by_step[x])) for x in steps]
        same = identical_to(mean, chart.series)  # a group drawn exactly over an earlier one says so
        label = identical_label(f"{setting}={value} (n={len(members)})", same)
        ids = ", ".join(f"{r.label}: {r.id}" for r in members)
        chart.series.append(Series(label, mean, color, dashed=same is not None, hover=ids))
        chart.bands.append((label, color, [(x, min(by_step[x]), max(by_step[x])) for x in steps]))
    return chart


def compare_page(
    runs: Sequence[CompareRun], metrics: Sequence[str], settings_table: dict[str, list[Any]], group_by: str | None = None
) -> str:
    """The whole page: the differing settings, then one collapsible section per metric group."""
    title = "ledger compare: " + ", ".join(r.label for r in runs)
    body = [f"<h1>{escape(title)}</h1>", *_settings_rows(runs, settings_table)]
    groups: dict[str, list[str]] = {}
    for name in metrics:
        groups.setdefault(metric_group(name), []).append(name)
    for group, names in groups.items():
        charts = [render(group_chart(m, runs, group_by) if group_by else run_chart(m, runs)) for m in names]
        body.append(
            f'<details open data-group="{escape(group)}"><summary><h2 style="display:inline">'
            f"{escape(group)}/ ({len(names)})</h2></summary>{''.join(charts)}</details>"
        )
    return page(title, "\n".join(body))


def _settings_rows(runs: Sequence[CompareRun], settings_table: dict[str, list[Any]]) -> list[str]:
    """The settings table: a row per differing setting (or a line saying none differs), then the
    runs' trackers and notes where any has one."""
    head = "".join(f'<th title="{escape(r.id)}">{escape(r.label)}</th>' for r in runs)
    rows = [f'<table class="settings"><tr><th>setting</th>{head}</tr>']
    for key, values in settings_table.items():
        cells = "".join(f"<td>{escape(show_value(v, 60))}</td>" for v in values)
        rows.append(f"<tr><th>{escape(key)}</th>{cells}</tr>")
    if not settings_table:
        rows.append(f'<tr><td colspan="{len(runs) + 1}">every setting is the same</td></tr>')
    return [*rows, *_tracker_and_note_rows(runs), "</table>"]


def _tracker_and_note_rows(runs: Sequence[CompareRun]) -> list[str]:
    """A row of the runs' tracker links and one of their notes, each only where a run has one."""
    rows = []
    if any(r.trackers for r in runs):
        cells = "".join(f"<td>{tracker_html({'trackers': r.trackers}) or '-'}</td>" for r in runs)
        rows.append(f"<tr><th>trackers</th>{cells}</tr>")
    if any(r.note for r in runs):
        cells = "".join(f'<td data-kind="note">{escape(r.note or "-")}</td>' for r in runs)
        rows.append(f"<tr><th>note</th>{cells}</tr>")
    return rows
