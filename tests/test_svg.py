"""The pieces behind the pages: ticks, thinning, heat plot units and per-node lines."""

from __future__ import annotations

from pathlib import Path

from ledger.compare.diffcore import build_report
from ledger.heat.chart import heat_plot, time_unit
from ledger.heat.guard import GuardSettings
from ledger.heat.heatlog import HeatLog, HeatLogWriter, TimedSample, read_heat_log
from ledger.heat.sensor import Sample
from ledger.heat.summary import render_heat_summary
from ledger.metrics.table import MetricsTable, StepRow
from ledger.pages.html import DiffPageInput, diff_charts, diff_title
from ledger.pages.svg import MAX_POINTS, Chart, Series, nice_ticks, render

T0 = 1_764_000_000.0


def test_nice_ticks_are_round_and_cover_the_range() -> None:
    assert [round(t, 9) for t in nice_ticks(0.0, 1.0, 5)] == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(3.0, 97.0, 4) == [25.0, 50.0, 75.0]
    assert nice_ticks(5.0, 5.0) == [5.0]


def test_series_are_thinned_but_keep_their_count_and_extremes() -> None:
    points = [(float(i), float(i % 7)) for i in range(10 * MAX_POINTS)]
    svg = render(Chart("t", "x", "y", series=[Series("s", points)]))
    assert f'data-n="{len(points)}"' in svg
    drawn = svg.split('points="')[1].split('"')[0].split()
    assert len(drawn) <= MAX_POINTS


def test_labels_are_escaped() -> None:
    svg = render(Chart("<b>&", "x", "y", series=[Series('a"<', [(0.0, 1.0), (1.0, 2.0)])]))
    assert "<b>" not in svg and "&lt;b&gt;&amp;" in svg and 'data-series="a&quot;&lt;"' in svg


def test_time_unit_follows_run_length() -> None:
    assert time_unit(13) == ("seconds", 1.0)
    assert time_unit(600) == ("minutes", 60.0)
    assert time_unit(5 * 3600) == ("hours", 3600.0)


class NodeSample(Sample, frozen=True):
    """A sample with the `node` field multi-node heat logs add (issue 13)."""

    node: str | None = None


def test_one_line_per_gpu_and_node() -> None:
    log = HeatLog(guard=GuardSettings(pause_at=85, resume_at=75))
    for i in range(3):
        for node in ("head", "worker"):
            for gpu in (0, 1):
                log.samples.append(TimedSample(T0 + i, NodeSample(gpu, 60.0 + i, node=node)))
    plot = heat_plot(log, [(0, T0 + 1)])
    assert sorted(plot.lines) == ["head GPU 0", "head GPU 1", "worker GPU 0", "worker GPU 1"]
    assert plot.unit == "seconds" and plot.steps == [1.0]
    assert [label for _, label, _ in plot.thresholds] == ["pause at 85 C", "resume at 75 C"]


def test_ascii_chart_has_a_legend_and_a_real_column_width(tmp_path: Path) -> None:
    path = tmp_path / "heat.log"
    writer = HeatLogWriter(path, GuardSettings(pause_at=85, resume_at=75))
    for i in range(14):  # a 13-second run
        writer.write_samples(T0 + i, [Sample(0, 60.0 + i)])
    writer.close()
    text = render_heat_summary(read_heat_log(path), [(0, T0 + 6)])
    assert "one column = 0.22s" in text
    assert "legend: _ coolest (60 C) .. @ hottest (73 C); ^ a step ended" in text


def _table(steps: range, start: float) -> MetricsTable:
    table = MetricsTable()
    for s in steps:
        table.rows[s] = StepRow(s, start + 10 * s, start + 10 * s + 10, {"perf/rollout_time": 5.0 + s})
        table.train_steps[2 * s] = {"train/loss": 1.0 / (1 + s)}
    return table


def test_diff_charts_shade_paused_steps_and_mark_unshared_ones() -> None:
    ma = {
        "id": "a",
        "settings": {"lr": 1},
        "gpu": {"pause_windows": [{"start": "2025-11-24T16:00:22Z", "end": "2025-11-24T16:00:25Z"}]},
    }  # inside step 2 of A
    mb = {"id": "b", "settings": {"lr": 2}}
    t = 1_764_000_000.0  # 2025-11-24T16:00:00Z
    ta, tb = _table(range(0, 5), t), _table(range(0, 7), t + 1000)
    report = build_report(ma, mb, ta, tb)
    charts = diff_charts(DiffPageInput(report, "", ma, mb, ta, tb))
    assert diff_title(report) == "lr: 1 -> 2"
    rollout, loss = charts[0], charts[-1]
    assert rollout.title == "rollout time (perf/rollout_time)" and rollout.spans == [(1.5, 2.5)]
    assert [(x, label) for x, label, _ in rollout.marks] == [(5.0, "only in B"), (6.0, "only in B")]
    assert loss.x_label == "train step" and loss.spans == [] and len(loss.series[1].points) == 7


def test_a_long_legend_label_wraps_inside_the_legend_instead_of_being_cut() -> None:
    import re

    from ledger.pages.svg import LEGEND_CHAR_PX, Chart, Series, render

    label = "B deg1-lr-3e-6-seed-2 (identical to A deg1-lr-3e-6-seed-1)"
    chart = Chart(title="t", x_label="step", y_label="y", series=[Series("A a", [(0, 1.0), (1, 2.0)]), Series(label, [(0, 1.0), (1, 2.0)])])
    svg = render(chart, legend_width=170)
    lines = [m for m in re.findall(r"<tspan[^>]*>([^<]*)</tspan>", svg)]
    assert " ".join(lines[1:]) == label  # nothing lost
    assert len(lines) > 2 and all(len(line) * LEGEND_CHAR_PX <= 170 - 22 for line in lines), lines
    assert f'data-label="{label}"' in svg
    rows = [float(y) for y in re.findall(r'data-kind="legend" transform="translate\([\d.]+ ([\d.]+)\)"', svg)]
    assert rows == sorted(rows) and len(set(rows)) == len(rows)  # each row below the one before


def test_two_identical_groups_of_a_compare_page_say_so_and_are_told_apart() -> None:
    from ledger.pages.comparepage import CompareRun, group_chart

    def run(name: str, lr: str, loss: float) -> CompareRun:
        table = MetricsTable()
        table.train_steps = {s: {"train/loss": loss - 0.1 * s} for s in range(4)}
        return CompareRun(id=f"id-{name}", label=name, settings={"lr": lr}, table=table)

    chart = group_chart("train/loss", [run("a", "1e-6", 2.0), run("b", "2e-6", 2.0), run("c", "3e-6", 1.0)], "lr")
    labels = [s.label for s in chart.series]
    assert labels == ["lr='1e-6' (n=1)", "lr='2e-6' (n=1) (identical to lr='1e-6' (n=1))", "lr='3e-6' (n=1)"]
    assert [s.dashed for s in chart.series] == [False, True, False]  # the second drawn dashed over the first
