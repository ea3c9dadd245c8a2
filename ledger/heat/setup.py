"""Wiring the heat guard into `ledger run`: pick the sensor, start the monitor, report."""

from __future__ import annotations

import shlex
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ledger.config import HeatConfig
from ledger.heat.cluster_target import Submitted, collective_timeout, detect_cluster, submits_from_launcher
from ledger.heat.guard import HeatGuard
from ledger.heat.heatlog import read_heat_log
from ledger.heat.monitor import HeatMonitor
from ledger.heat.nvml import open_sensor
from ledger.heat.sensor import SensorSpec, SensorUnavailable, parse_timeline
from ledger.timefmt import iso


class RunMonitor:
    """The monitor as the runner sees it: resume before signals, a manifest section at the end."""

    def __init__(self, monitor: HeatMonitor, extra: dict[str, object] | None = None):
        """`extra`: keys of the `gpu` section the monitor does not write (the job's collective
        timeout, an unreachable cluster), added unless it wrote them."""
        self._monitor = monitor
        self._extra = extra or {}

    def resume_if_paused(self) -> None:
        self._monitor.resume_if_paused()

    def stop_summary(self) -> dict[str, object]:
        """The manifest's `gpu` section as plain data (`runrecord.Gpu` reads it)."""
        section = self._monitor.stop().to_manifest()
        for key, value in self._extra.items():
            section.setdefault(key, value)
        return section


def _sensor_spec(cfg: HeatConfig, base: Path | None) -> SensorSpec:
    """What each node's sampler runs: the scripted timeline (its parsed lines), else NVML."""
    timeline = (cfg.sensor or {}).get("timeline")
    if not timeline:
        return {"kind": "nvml"}
    path = Path(str(timeline))
    if base is not None and not path.is_absolute():
        path = base / path
    entries = [(e.at_s, e.gpu, e.temp_c, e.node) for e in parse_timeline(path)]
    return {"kind": "scripted", "path": str(path), "entries": entries}


def _job_pids(pgid: int | None) -> Callable[[], set[int]]:
    def pids() -> set[int]:
        from ledger.heat.node_sampler import with_descendants

        return set(with_descendants([pgid])) if pgid else set()

    return pids


def _timeout_facts(
    cfg: HeatConfig, guard: HeatGuard, argv: list[str], env: Mapping[str, str], target: Any, say: Callable[[str], None]
) -> dict[str, object]:
    """Record the job's collective timeout when visible; warn when a pause could outlast it."""
    training = argv
    job_env = dict(env)
    if target is not None:
        job_env.update(target.env_vars)
        if target.entrypoint:
            training = shlex.split(target.entrypoint)
    timeout = collective_timeout(training, job_env)
    if timeout is None:
        return {}
    if guard.settings.enabled and cfg.max_pause >= timeout.seconds:
        say(
            f"ledger: warning: heat pauses may last up to max_pause {cfg.max_pause:g} s, longer than the job's "
            f"collective timeout {timeout.seconds:g} s ({timeout.source}): a long pause can make NCCL abort the job "
            f"(lower heat.max_pause or raise the timeout)"
        )
    return {"distributed_timeout": timeout.to_dict()}


def start_monitor(
    cfg: HeatConfig,
    guard_enabled: bool,
    log_path: Path,
    signal_group: Callable[[int], None],
    say: Callable[[str], None],
    base: Path | None = None,
    job_argv: list[str] | None = None,
    env: Mapping[str, str] | None = None,
    launcher_text: str | None = None,
    pgid: int | None = None,
    submitted: Callable[[], Submitted | None] | None = None,
) -> RunMonitor:
    """Start sampling for a job whose process group `signal_group` signals.

    A job submitted to a Ray cluster (see `cluster_target.detect_cluster`) is sampled on every
    node of the cluster and paused there (`ledger.heat.cluster`); without Ray installed here the
    run falls back to this machine and the record says why. A cluster named only by the
    launcher's text is watched once the job submitted to it (`submitted`: the submission ledger's
    `ray` wrapper recorded), at the address it submitted to. No NVML (no driver, no GPU): the run
    goes ahead; the summary says `unavailable` with NVML's error text, said once on stderr, and no
    heat log is written.
    """
    guard = HeatGuard(
        pause_at=cfg.pause_at,
        resume_at=cfg.resume_at,
        resume_after=cfg.resume_after,
        max_pause=cfg.max_pause,
        enabled=cfg.enabled and guard_enabled,
    )
    env = env or {}
    target = detect_cluster(list(job_argv or []), env, launcher_text)
    extra = _timeout_facts(cfg, guard, list(job_argv or []), env, target, say)

    def pause() -> None:
        signal_group(signal.SIGSTOP)

    def resume() -> None:
        signal_group(signal.SIGCONT)

    warn = lambda text: say(f"ledger: {text}")  # noqa: E731
    if target is not None:
        from ledger.heat.cluster import ClusterSensor, ClusterUnavailable

        waits = submitted if submits_from_launcher(list(job_argv or []), launcher_text) else None
        try:
            spec = _sensor_spec(cfg, base)
            cluster = ClusterSensor(target, spec, cfg.interval_s, time.time(), _job_pids(pgid), warn, dict(env), submitted=waits)
        except ClusterUnavailable as exc:
            say(f"ledger: the job runs on a Ray cluster but its nodes are not watched ({exc.reason}); sampling this machine only")
            extra["cluster"] = {**target.to_dict(), "connected": False, "unavailable": exc.reason}
        else:
            if waits is not None:
                say("ledger: watching every node of the Ray cluster the job submits to for heat, once it has")
            else:
                say(f"ledger: watching every node of the Ray cluster at {target.address} for heat")
            monitor = HeatMonitor(cluster, guard, cfg.interval_s, log_path, cluster.pause, cluster.resume, warn=warn, hold=cluster.hold)
            monitor.start()
            return RunMonitor(monitor, extra)
    sensor = None
    reason = None
    try:
        sensor = open_sensor(cfg.sensor or None, base)
    except SensorUnavailable as exc:
        reason = str(exc)
        say(f"ledger: GPU sampling unavailable ({reason}); the run goes ahead without a heat log")

    monitor = HeatMonitor(sensor, guard, cfg.interval_s, log_path, pause, resume, warn=warn, unavailable=reason)
    monitor.start()
    return RunMonitor(monitor, extra)


def summary_from_log(path: Path) -> dict[str, object]:
    """A `gpu` section rebuilt from a heat log alone (for runs recovered after a crash)."""
    log = read_heat_log(path)
    peaks: dict[Any, float] = {}
    for s in log.samples:
        if s.sample.temp_c is not None:
            key = s.sample.gpu if s.sample.node is None else f"{s.sample.node}/{s.sample.gpu}"
            peaks[key] = max(peaks.get(key, s.sample.temp_c), s.sample.temp_c)
    pauses = log.pauses
    paused_s = sum((end - start) for start, end in pauses if end is not None)
    return {
        "sensor": "recovered from heat.log",
        "unavailable": None,
        "gpus": [],
        "peak_temp_c": peaks,
        "pauses": len(pauses),
        "paused_s": round(paused_s, 3),
        "pause_windows": [{"start": iso(a), "end": None if b is None else iso(b)} for a, b in pauses],
    }
