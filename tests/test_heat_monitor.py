"""The heat monitor driving a real child process group with SIGSTOP/SIGCONT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ledger.heat.guard import HeatGuard
from ledger.heat.heatlog import read_heat_log
from ledger.heat.monitor import HeatMonitor
from ledger.heat.sensor import GpuInfo, Sample, ScriptedSensor

# Prints "<counter> <unix time>" every 20 ms.
CHILD = """
import sys, time
n = 0
with open(sys.argv[1], "w") as out:
    while True:
        n += 1
        out.write(f"{n} {time.time()}\\n")
        out.flush()
        time.sleep(0.02)
"""


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def ticks(path: Path) -> list[tuple[int, float]]:
    """The child's complete lines: (counter, time)."""
    if not path.exists():
        return []
    lines = path.read_text().split("\n")[:-1]
    return [(int(n), float(t)) for n, t in (line.split() for line in lines)]


def process_state(pid: int) -> str:
    # /proc/<pid>/stat: "pid (comm) STATE ..."; T = stopped
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


class Child:
    """A real counter process in its own process group."""

    def __init__(self, tmp_path: Path):
        self.out = tmp_path / "counter.txt"
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, str(self.out)], start_new_session=True)
        self.pgid = self.proc.pid
        self.stopped_states: list[str] = []
        wait_until(lambda: len(ticks(self.out)) >= 2)

    def pause(self) -> None:
        os.killpg(self.pgid, signal.SIGSTOP)
        wait_until(lambda: process_state(self.proc.pid) == "T", 5)
        self.stopped_states.append(process_state(self.proc.pid))

    def resume(self) -> None:
        os.killpg(self.pgid, signal.SIGCONT)

    def count(self) -> int:
        return ticks(self.out)[-1][0]


@pytest.fixture
def child(tmp_path: Path) -> Iterator[Child]:
    c = Child(tmp_path)
    yield c
    if c.proc.poll() is None:
        os.killpg(c.pgid, signal.SIGCONT)
        os.killpg(c.pgid, signal.SIGKILL)
        c.proc.wait(5)


def tick_clock(step: float) -> Callable[[], float]:
    """A clock that moves `step` at each reading: the sensor reads it once a sample, so the timeline
    plays by samples, not by the wall clock (a busy machine samples late, never skips ahead)."""
    now = [0.0]

    def read() -> float:
        now[0] += step
        return now[0]

    return read


def make_monitor(tmp_path: Path, timeline: str, child: Child, guard: HeatGuard, warnings: list[str]) -> HeatMonitor:
    path = tmp_path / "timeline.txt"
    path.write_text(timeline)
    return HeatMonitor(
        ScriptedSensor(path, clock=tick_clock(0.05)),
        guard,
        interval_s=0.05,
        log_path=tmp_path / "run" / "heat.log",
        pause=child.pause,
        resume=child.resume,
        warn=warnings.append,
    )


def test_pause_and_resume_a_real_process_group(tmp_path: Path, child: Child) -> None:
    warnings: list[str] = []
    timeline = "0 0 60\n0 1 58\n0.3 0 90\n1.2 0 70\n"
    guard = HeatGuard(pause_at=85, resume_at=75, resume_after=0.3)
    monitor = make_monitor(tmp_path, timeline, child, guard, warnings)
    monitor.start()

    wait_until(lambda: monitor.paused)
    assert child.stopped_states == ["T"]
    stalled_at = child.count()
    time.sleep(0.2)
    # the sensor stays above resume_at until t=1.2 s, so the pause (from t~0.3 s) still holds
    assert monitor.paused and child.count() == stalled_at
    wait_until(lambda: not monitor.paused)
    resumed_at = child.count()
    wait_until(lambda: child.count() > resumed_at + 3, 5)
    summary = monitor.stop()

    assert summary.pauses == 1
    # hot for 0.9 s of the timeline (18 samples at least 50 ms apart), then 0.3 s of cool-down;
    # a busy machine samples later and so only makes the pause longer
    assert summary.paused_s >= 0.9 + 0.3 - 0.05  # less a tick of clock jitter
    (start, end) = summary.pause_windows[0]
    assert end is not None
    stamps = [t for _, t in ticks(child.out)]
    assert not [t for t in stamps if start + 0.05 < t < end], "child ran while paused"
    assert [t for t in stamps if t > end], "child did not run after the resume"
    assert summary.peak_temp_c == {0: 90.0, 1: 58.0}
    assert any("job paused" in w for w in warnings)
    assert any("job resumed" in w for w in warnings)

    log = read_heat_log(tmp_path / "run" / "heat.log")
    assert log.sensor == f"scripted:{tmp_path / 'timeline.txt'}"
    assert [(e.kind, e.gpu, e.temp_c) for e in log.events] == [
        ("pause", 0, 90.0),
        ("resume", None, None),
    ]
    ((log_start, log_end),) = log.pauses
    assert log_end is not None
    assert abs(log_start - start) < 1e-3 and abs(log_end - end) < 1e-3  # ms in the log
    assert log.gpus == [0, 1]
    assert len(log.samples) == 2 * summary.samples

    manifest = summary.to_manifest()
    assert manifest["sensor"].startswith("scripted:")
    assert manifest["unavailable"] is None
    assert manifest["pauses"] == 1
    assert manifest["pause_windows"][0]["start"].endswith("Z")
    assert manifest["gpus"][0] == {
        "index": 0,
        "name": "scripted",
        "uuid": None,
        "memory_total_mib": None,
        "driver_version": None,
        "cuda_version": None,
        "power_limit_w": None,
    }
    assert manifest["guard"] == {
        "enabled": True,
        "pause_at": 85,
        "resume_at": 75,
        "resume_after": 0.3,
        "max_pause": 600,
    }
    assert child.proc.poll() is None  # left running, never stopped


def test_resume_if_paused_lets_sigterm_end_a_paused_job(tmp_path: Path, child: Child) -> None:
    warnings: list[str] = []
    guard = HeatGuard(pause_at=85, resume_at=75, resume_after=0.1, max_pause=0.15)
    monitor = make_monitor(tmp_path, "0 0 95\n", child, guard, warnings)
    monitor.start()
    wait_until(lambda: monitor.paused)
    wait_until(lambda: any("min (max_pause" in w for w in warnings))

    assert monitor.resume_if_paused() is True
    assert not monitor.paused
    os.killpg(child.pgid, signal.SIGTERM)
    assert child.proc.wait(timeout=5) == -signal.SIGTERM
    time.sleep(0.2)  # several more hot samples: a disarmed monitor does not pause again
    assert not monitor.paused
    assert monitor.resume_if_paused() is False
    summary = monitor.stop()

    assert summary.pauses == 1
    assert summary.pause_windows[0][1] is not None
    kinds = [e.kind for e in read_heat_log(tmp_path / "run" / "heat.log").events]
    assert kinds == ["pause", "warn", "resume"]
    assert len([w for w in warnings if "max_pause" in w]) == 1  # at most once a minute


def test_disabled_guard_records_but_never_pauses(tmp_path: Path, child: Child) -> None:
    warnings: list[str] = []
    monitor = make_monitor(tmp_path, "0 0 99\n", child, HeatGuard(enabled=False), warnings)
    monitor.start()
    before = child.count()
    wait_until(lambda: len(read_heat_log(tmp_path / "run" / "heat.log").samples) >= 4)
    wait_until(lambda: child.count() > before + 3, 5)
    summary = monitor.stop()
    assert child.count() > before
    assert child.stopped_states == []
    assert summary.pauses == 0 and summary.samples >= 2
    assert summary.peak_temp_c == {0: 99.0}
    assert summary.to_manifest()["guard"]["enabled"] is False
    log = read_heat_log(tmp_path / "run" / "heat.log")
    assert log.events == [] and len(log.samples) == summary.samples
    assert warnings == []


def test_stop_resumes_a_paused_job(tmp_path: Path, child: Child) -> None:
    monitor = make_monitor(tmp_path, "0 0 95\n", child, HeatGuard(), [])
    monitor.start()
    wait_until(lambda: monitor.paused)
    summary = monitor.stop()
    assert not monitor.paused
    assert summary.pauses == 1 and summary.pause_windows[0][1] is not None
    count = child.count()
    wait_until(lambda: child.count() > count, 5)  # running again


class BrokenSensor:
    name = "broken"

    def __init__(self) -> None:
        self.calls = 0
        self.closed = False

    def gpus(self) -> list[GpuInfo]:
        return [GpuInfo(0)]

    def sample(self) -> list[Sample]:
        self.calls += 1
        if self.calls % 2:
            raise RuntimeError("GPU is lost")
        return [Sample(0, 50.0)]

    def close(self) -> None:
        self.closed = True


def test_sampling_errors_warn_once_and_keep_going(tmp_path: Path) -> None:
    warnings: list[str] = []
    sensor = BrokenSensor()
    monitor = HeatMonitor(
        sensor,
        HeatGuard(),
        0.02,
        tmp_path / "heat.log",
        pause=lambda: None,
        resume=lambda: None,
        warn=warnings.append,
    )
    monitor.start()
    wait_until(lambda: sensor.calls >= 6)
    summary = monitor.stop()
    assert sensor.closed
    assert warnings == ["heat sampling failed, will keep trying: GPU is lost"]
    assert summary.samples >= 3 and summary.peak_temp_c == {0: 50.0}


def test_failed_pause_turns_the_guard_off(tmp_path: Path) -> None:
    warnings: list[str] = []
    timeline = tmp_path / "t.txt"
    timeline.write_text("0 0 99\n")

    def pause() -> None:
        raise ProcessLookupError("no such process")

    monitor = HeatMonitor(
        ScriptedSensor(timeline),
        HeatGuard(),
        0.02,
        tmp_path / "heat.log",
        pause=pause,
        resume=lambda: None,
        warn=warnings.append,
    )
    monitor.start()
    wait_until(lambda: len(read_heat_log(tmp_path / "heat.log").samples) >= 4)
    summary = monitor.stop()
    assert warnings == ["could not pause the job, heat guard off: no such process"]
    assert summary.pauses == 0 and not monitor.paused


def test_hold_is_called_on_each_tick_while_the_job_stays_paused(tmp_path: Path) -> None:
    """The hold callback (a cluster stops what the job started since the pause) runs only while
    paused, never on the tick that pauses; a failing hold is said once and the pause holds."""
    timeline = tmp_path / "t.txt"
    timeline.write_text("0 0 50\n0.3 0 95\n")  # hot from 0.3 s, never cool again
    events: list[str] = []
    warnings: list[str] = []
    sensor = ScriptedSensor(timeline)
    ticks: list[int] = []  # 1, 2, 3, ...: one per sample taken
    sample = sensor.sample

    def counted() -> list[Sample]:
        ticks.append(len(ticks) + 1)
        return sample()

    sensor.sample = counted  # type: ignore[method-assign]
    on: dict[str, list[int]] = {"pause": [], "hold": []}

    def hold() -> None:
        events.append("hold")
        on["hold"].append(ticks[-1])
        raise RuntimeError("the cluster went away")

    def pause() -> None:
        events.append("pause")
        on["pause"].append(ticks[-1])

    monitor = HeatMonitor(
        sensor,
        HeatGuard(pause_at=85, resume_at=75),
        0.02,
        tmp_path / "heat.log",
        pause=pause,
        resume=lambda: events.append("resume"),
        warn=warnings.append,
        hold=hold,
    )
    monitor.start()
    wait_until(lambda: events.count("hold") >= 3)
    assert monitor.paused
    summary = monitor.stop()
    assert events[0] == "pause" and events[-1] == "resume" and set(events[1:-1]) == {"hold"}
    assert summary.pauses == 1
    [paused_on] = on["pause"]
    assert on["hold"][:3] == [paused_on + 1, paused_on + 2, paused_on + 3]  # each tick after the pause, not the pause's
    assert [w for w in warnings if "while paused" in w] == [
        "could not stop what the job started while paused, will keep trying: the cluster went away"
    ]
