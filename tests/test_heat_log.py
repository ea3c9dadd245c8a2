"""Heat log writing/reading, the scripted sensor's timeline, the summary and the plot."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ledger.errors import DataError, LedgerError
from ledger.heat.guard import GuardSettings
from ledger.heat.heatlog import (
    HEADER,
    HeatLogWriter,
    read_heat_log,
)
from ledger.heat.sensor import Sample, ScriptedSensor
from ledger.heat.summary import format_duration, render_heat_summary, time_above
from ledger.pages.heatplot import plot_heat_png

T0 = 1_795_000_000.0  # 2026-11-18


def write_log(path: Path) -> None:
    writer = HeatLogWriter(path, GuardSettings(pause_at=85, resume_at=75), sensor="nvml")
    for i in range(10):
        t = T0 + i * 5
        temp0 = [60, 70, 80, 86, 88, 84, 78, 74, 72, 70][i]
        writer.write_samples(
            t,
            [
                Sample(
                    0,
                    temp0,
                    250.5,
                    1980,
                    99,
                    40960.25,
                    ["thermal", "power"] if i == 4 else [],
                ),
                Sample(1, 55, None, None, None, None, []),
            ],
        )
        if i == 3:
            writer.write_event(t, "pause", gpu=0, temp_c=86)
        if i == 9:
            writer.write_event(t, "resume")
    writer.close()


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "heat.log"
    write_log(path)
    lines = path.read_text().splitlines()
    assert lines[0] == HEADER
    assert lines[1] == "# guard enabled=true pause_at=85 resume_at=75 resume_after=30 max_pause=600"
    assert lines[2] == "# sensor nvml"
    assert lines[3].split("\t")[1:] == [
        "-",  # node: a single machine
        "0",
        "60",
        "250.5",
        "1980",
        "99",
        "40960.2",
        "-",
        "-",
    ]
    assert lines[4].split("\t")[1:] == ["-", "1", "55", "-", "-", "-", "-", "-", "-"]

    log = read_heat_log(path)
    assert log.sensor == "nvml"
    assert log.guard == GuardSettings(pause_at=85, resume_at=75)
    assert log.gpus == [0, 1]
    assert len(log.samples) == 20
    first = log.samples[0]
    assert first.time == pytest.approx(T0)
    assert first.sample == Sample(0, 60.0, 250.5, 1980.0, 99.0, 40960.2, [])
    assert log.samples[8].sample.throttle == ["thermal", "power"]
    assert log.samples[1].sample == Sample(1, 55.0)
    assert [(e.kind, e.gpu, e.temp_c) for e in log.events] == [
        ("pause", 0, 86.0),
        ("resume", None, None),
    ]
    assert log.pauses == [(T0 + 15, T0 + 45)]  # whole milliseconds: exact


def test_truncated_last_line_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "heat.log"
    write_log(path)
    whole = path.read_text()
    cut = whole + whole.splitlines()[3][:25]  # a crash mid-write: no newline
    path.write_text(cut)
    assert len(read_heat_log(path).samples) == 20
    # Cut inside the pause/resume pair: the log ends paused.
    text = whole[: whole.index("\tresume\n")]
    path.write_text(text)
    log = read_heat_log(path)
    assert log.pauses == [(T0 + 15, None)]


def test_bad_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "heat.log"
    write_log(path)
    lines = path.read_text().splitlines(keepends=True)
    lines[5] = "2026-11-29T11:13:54.123Z\tzero\t1\t2\n"
    path.write_text("".join(lines))
    with pytest.raises(DataError, match=r"heat\.log:6: bad heat log line"):
        read_heat_log(path)


def test_not_a_heat_log(tmp_path: Path) -> None:
    path = tmp_path / "heat.log"
    path.write_text("hello\n")
    with pytest.raises(DataError, match="not a heat log"):
        read_heat_log(path)
    with pytest.raises(DataError, match="cannot read heat log"):
        read_heat_log(tmp_path / "missing.log")


def test_unknown_event_cannot_be_written(tmp_path: Path) -> None:
    writer = HeatLogWriter(tmp_path / "h.log")
    with pytest.raises(ValueError, match="unknown heat event"):
        writer.write_event(T0, "explode")
    writer.close()
    writer.close()  # twice is fine
    with pytest.raises(ValueError, match="closed"):
        writer.write_samples(T0, [])


# --- the scripted sensor -------------------------------------------------------------------


class FakeClock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_scripted_sensor_plays_a_step_function(tmp_path: Path) -> None:
    timeline = tmp_path / "timeline.txt"
    timeline.write_text("# hot then cool\n0 0 60\n\n0 1 50  # gpu 1\n2.5 0 90\n5 0 70\n1 2 40\n")
    clock = FakeClock()
    sensor = ScriptedSensor(timeline, clock=clock)
    assert sensor.name == f"scripted:{timeline}"
    assert [g.index for g in sensor.gpus()] == [0, 1, 2]

    def temps() -> dict[int, float | None]:
        return {s.gpu: s.temp_c for s in sensor.sample()}

    assert temps() == {0: 60, 1: 50, 2: None}  # first sample starts the clock
    clock.t += 2.4999
    assert temps() == {0: 60, 1: 50, 2: 40}
    clock.t = 102.5
    assert temps() == {0: 90, 1: 50, 2: 40}
    clock.t = 1000
    assert temps() == {0: 70, 1: 50, 2: 40}
    sample = sensor.sample()[0]
    assert sample.power_w is None and sample.throttle == []
    sensor.close()


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("0 0 60\n1 0\n", ":2:"),
        ("0 0 60\n# ok\nsoon 0 60\n", ":3:"),
        ("0 0.5 60\n", ":1:"),
        ("-1 0 60\n", ":1:"),
        ("0 0 nan\n", ":1:"),
    ],
)
def test_bad_timeline_names_file_and_line(tmp_path: Path, text: str, where: str) -> None:
    timeline = tmp_path / "timeline.txt"
    timeline.write_text(text)
    with pytest.raises(LedgerError, match=f"timeline.txt{where} bad heat timeline line"):
        ScriptedSensor(timeline)


def test_empty_or_missing_timeline(tmp_path: Path) -> None:
    timeline = tmp_path / "timeline.txt"
    timeline.write_text("# nothing\n\n")
    with pytest.raises(LedgerError, match="has no entries"):
        ScriptedSensor(timeline)
    with pytest.raises(LedgerError, match="cannot read heat timeline"):
        ScriptedSensor(tmp_path / "nope.txt")


# --- summary and plot ----------------------------------------------------------------------


def test_format_duration_and_time_above() -> None:
    assert [format_duration(s) for s in (0, 45, 130, 3725)] == [
        "0s",
        "45s",
        "2m10s",
        "1h02m",
    ]
    series = [(0.0, 80.0), (5.0, 86.0), (10.0, 90.0), (15.0, 70.0), (20.0, 85.0)]
    assert time_above(series, 85) == 10.0


def test_summary(tmp_path: Path) -> None:
    path = tmp_path / "heat.log"
    write_log(path)
    steps = [(1, T0 + 10), (2, T0 + 30), (3, T0 + 45)]
    text = render_heat_summary(read_heat_log(path), steps, width=10)
    lines = text.splitlines()
    assert lines[0].startswith("heat: 2 GPUs, 2026-11-18 ")
    assert lines[2].split() == ["GPU", "min", "C", "mean", "C", "peak", "C", "above", "85C"]
    assert "(45s), sensor nvml" in lines[0]
    assert "pause at 85 C, resume at or below 75 C after 30 s" in lines[1]
    row0 = next(line for line in lines if line.split()[:1] == ["0"])
    # GPU 0: min 60, mean 76.2, peak 88, above 85 C for two 5 s intervals
    assert row0.split() == ["0", "60.0", "76.2", "88.0", "10s"]
    row1 = next(line for line in lines if line.split()[:1] == ["1"])
    assert row1.split() == ["1", "55.0", "55.0", "55.0", "0s"]
    assert "pauses: 1, 30s in all" in lines
    pause_line = next(line for line in lines if line.strip().startswith("#1"))
    assert pause_line.endswith("30s  GPU 0 at 86 C  (during step 2)")
    spark = next(line for line in lines if line.startswith("  GPU 0"))
    cells = spark.split("|")[1]
    assert len(cells) == 10 and cells[0] == "." and "@" in cells
    paused = next(line for line in lines if line.startswith("  paused"))
    assert paused.split("|")[1] == "   PPPPPPP"
    steps_row = next(line for line in lines if line.startswith("  steps"))
    assert steps_row.split("|")[1] == "  ^   ^  ^"


def test_summary_of_an_empty_log(tmp_path: Path) -> None:
    path = tmp_path / "heat.log"
    HeatLogWriter(path).close()
    assert render_heat_summary(read_heat_log(path), None) == "heat log: no samples\n"


def test_plot_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "heat.log"
    write_log(path)
    out = plot_heat_png(read_heat_log(path), [(1, T0 + 10), (2, T0 + 30)], tmp_path / "p/h.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 5000


def test_plot_without_matplotlib_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "heat.log"
    write_log(path)
    # A None entry in sys.modules makes `import matplotlib...` raise ImportError.
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(LedgerError) as info:
        plot_heat_png(read_heat_log(path), None, tmp_path / "h.png")
    assert info.value.hint == "pip install 'ledger[plot]'"
    assert not (tmp_path / "h.png").exists()
    # installed with pipx (its venv holds pipx_metadata.json): pip in the user's shell would miss that venv
    venv = tmp_path / "pipx-venv"
    venv.mkdir()
    (venv / "pipx_metadata.json").write_text("{}")
    monkeypatch.setattr(sys, "prefix", str(venv))
    with pytest.raises(LedgerError) as info:
        plot_heat_png(read_heat_log(path), None, tmp_path / "h.png")
    assert info.value.hint == "pipx inject ledger matplotlib"


def test_node_column_round_trip(tmp_path: Path) -> None:
    """Two nodes each with a GPU 0: the (node, gpu) pair names a GPU, events name the node."""
    path = tmp_path / "heat.log"
    writer = HeatLogWriter(path, GuardSettings(), "ray-cluster")
    writer.write_samples(T0, [Sample(0, 60, node="10.0.0.1"), Sample(0, 91, node="10.0.0.2")])
    writer.write_event(T0, "pause", gpu=0, temp_c=91, node="10.0.0.2")
    writer.close()
    assert path.read_text().splitlines()[3].split("\t")[1:3] == ["10.0.0.1", "0"]
    log = read_heat_log(path)
    assert log.keys == [("10.0.0.1", 0), ("10.0.0.2", 0)]
    assert log.nodes == ["10.0.0.1", "10.0.0.2"]
    assert log.gpus == [0]
    assert [(e.kind, e.node, e.gpu) for e in log.events] == [("pause", "10.0.0.2", 0)]


def test_log_without_node_column_still_reads(tmp_path: Path) -> None:
    """A heat.log written before the node column (header and lines without `node`)."""
    old_header = "time\tgpu\ttemp_c\tpower_w\tsm_clock_mhz\tutil_pct\tmem_used_mib\tthrottle\tevent"
    path = tmp_path / "heat.log"
    path.write_text(
        old_header + "\n# sensor nvml\n"
        "2026-11-29T11:13:54.123Z\t0\t60\t250.5\t1980\t99\t40960.2\tthermal\t-\n"
        "2026-11-29T11:13:55.123Z\t0\t86\t-\t-\t-\t-\t-\tpause\n"
    )
    log = read_heat_log(path)
    assert log.samples[0].sample == Sample(0, 60.0, 250.5, 1980.0, 99.0, 40960.2, ["thermal"])
    assert log.keys == [(None, 0)]
    assert [(e.kind, e.node, e.gpu, e.temp_c) for e in log.events] == [("pause", None, 0, 86.0)]
