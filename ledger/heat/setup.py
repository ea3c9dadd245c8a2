"""Wiring the heat guard into `ledger run`: pick the sensor, start the monitor, report."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger.config import HeatConfig
from ledger.heat.guard import HeatGuard
from ledger.heat.monitor import HeatMonitor
from ledger.heat.sensor import SensorUnavailable


class RunMonitor:
    """The monitor as the runner sees it: resume before signals, a manifest section at the end."""

    def __init__(self, monitor: HeatMonitor):
        self._monitor = monitor

    def resume_if_paused(self) -> None:
        self._monitor.resume_if_paused()

    def stop_summary(self) -> dict[str, Any]:
        return self._monitor.stop().to_manifest()


def start_monitor(cfg: HeatConfig, guard_enabled: bool, log_path: Path, signal_group: Callable[[int], None],
                  say: Callable[[str], None], base: Path | None = None) -> RunMonitor:
    """Start sampling for a job whose process group `signal_group` signals.

    No NVML (no driver, no GPU): the run goes ahead; the summary says `unavailable` with NVML's
    error text, said once on stderr, and no heat log is written.
    """
    from ledger.heat.nvml import open_sensor

    guard = HeatGuard(pause_at=cfg.pause_at, resume_at=cfg.resume_at, resume_after=cfg.resume_after,
                      max_pause=cfg.max_pause, enabled=cfg.enabled and guard_enabled)
    sensor = None
    reason = None
    try:
        sensor = open_sensor(cfg.sensor or None, base)
    except SensorUnavailable as exc:
        reason = str(exc)
        say(f"ledger: GPU sampling unavailable ({reason}); the run goes ahead without a heat log")

    def pause() -> None:
        signal_group(signal.SIGSTOP)

    def resume() -> None:
        signal_group(signal.SIGCONT)

    monitor = HeatMonitor(sensor, guard, cfg.interval_s, log_path, pause, resume,
                          warn=lambda text: say(f"ledger: {text}"), unavailable=reason)
    monitor.start()
    return RunMonitor(monitor)


def summary_from_log(path: Path) -> dict[str, Any]:
    """A `gpu` section rebuilt from a heat log alone (for runs recovered after a crash)."""
    from ledger.heat.heatlog import read_heat_log
    from ledger.timefmt import iso

    log = read_heat_log(path)
    peaks: dict[int, float] = {}
    for s in log.samples:
        if s.sample.temp_c is not None:
            peaks[s.sample.gpu] = max(peaks.get(s.sample.gpu, s.sample.temp_c), s.sample.temp_c)
    pauses = log.pauses
    paused_s = sum((end - start) for start, end in pauses if end is not None)
    return {"sensor": "recovered from heat.log", "unavailable": None, "gpus": [], "peak_temp_c": peaks,
            "pauses": len(pauses), "paused_s": round(paused_s, 3),
            "pause_windows": [{"start": iso(a), "end": None if b is None else iso(b)} for a, b in pauses]}

