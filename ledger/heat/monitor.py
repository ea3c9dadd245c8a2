"""The heat monitor: a thread in the ledger process that samples, logs and applies the guard.

It costs the job nothing: sampling runs in ledger's own process and sleeps on an Event between
ticks. The runner owns the job; the monitor only calls the `pause`/`resume` callbacks it was
given (typically `os.killpg(pgid, SIGSTOP/SIGCONT)`). The runner calls `resume_if_paused()`
before forwarding SIGINT/SIGTERM and at exit, so ledger never leaves a job stopped.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import msgspec

from ledger.heat.guard import PAUSE, RESUME, WARN, Action, GuardSettings, HeatGuard
from ledger.heat.heatlog import HeatLogWriter
from ledger.heat.sensor import GpuInfo, Sample, Sensor
from ledger.timefmt import iso

if TYPE_CHECKING:  # a run on one machine never imports the cluster's modules
    from ledger.heat.rayjobs import ClusterPart, NodeFacts


def _stderr_line(text: str) -> None:
    print(f"ledger: {text}", file=sys.stderr, flush=True)


GpuKey = tuple[str | None, int]  # (node, index); node None on a single machine


@runtime_checkable
class ClusterFacts(Protocol):
    """A sensor that spans several nodes adds their facts to the manifest's `gpu` section."""

    def cluster_manifest(self) -> ClusterPart:
        """Nodes (watched or not, and why), the job, its collective timeout."""
        ...


def key_label(key: GpuKey) -> str | int:
    """How a GPU is named in the manifest: its index on one machine, `node/index` on a cluster."""
    node, gpu = key
    return gpu if node is None else f"{node}/{gpu}"


class HeatSummary(msgspec.Struct):
    """What the monitor saw; `to_manifest()` is the manifest's `gpu` section."""

    sensor: str
    unavailable: str | None
    guard: GuardSettings
    interval_s: float
    gpus: list[GpuInfo] = msgspec.field(default_factory=list)
    peaks: dict[GpuKey, float] = msgspec.field(default_factory=dict)
    pause_windows: list[tuple[float, float | None]] = msgspec.field(default_factory=list)
    # what triggered each pause: (node, gpu, temp_c), in the order of `pause_windows`
    pause_triggers: list[tuple[str | None, int | None, float | None]] = msgspec.field(default_factory=list)
    samples: int = 0
    cluster: ClusterPart | None = None

    @property
    def peak_temp_c(self) -> dict[str | int, float]:
        """Peak temperature per GPU, named as in the manifest (index, or `node/index`)."""
        keys = sorted(self.peaks, key=lambda k: (k[0] or "", k[1]))
        return {key_label(k): self.peaks[k] for k in keys}

    @property
    def pauses(self) -> int:
        """How many times the job was paused."""
        return len(self.pause_windows)

    @property
    def paused_s(self) -> float:
        """Total seconds paused (open windows count up to their start: none after stop())."""
        return sum(end - start for start, end in self.pause_windows if end is not None)

    def to_manifest(self) -> dict[str, object]:
        """Plain dict for `manifest["gpu"]` (`runrecord.Gpu` reads it); on a cluster also `nodes`
        (GPUs and peaks per node)."""
        section: dict[str, object] = {
            "sensor": self.sensor,
            "unavailable": self.unavailable,
            "gpus": [g.to_dict() for g in self.gpus],
            "peak_temp_c": self.peak_temp_c,
            "pauses": self.pauses,
            "paused_s": round(self.paused_s, 3),
            "pause_windows": [self._window(n) for n in range(len(self.pause_windows))],
            "guard": self.guard.to_dict(),
            "interval_s": self.interval_s,
            "samples": self.samples,
        }
        if self.cluster is not None:
            section.update(self.cluster)
            self._add_node_peaks(self.cluster.get("nodes") or [])  # the same node dicts as in `section`
        return section

    def _window(self, n: int) -> dict[str, str | int | float | None]:
        """Pause window `n` as written: its start and end, and what triggered it where known."""
        start, end = self.pause_windows[n]
        window: dict[str, str | int | float | None] = {"start": iso(start), "end": None if end is None else iso(end)}
        if n < len(self.pause_triggers):
            node, gpu, temp = self.pause_triggers[n]
            if node is not None:
                window["node"] = node
            window.update(gpu=gpu, temp_c=temp)
        return window

    def _add_node_peaks(self, nodes: list[NodeFacts]) -> None:
        """Each cluster node's GPUs (unless the cluster sensor listed them, also for nodes that
        left) and its peak temperature per GPU index."""
        keys = sorted(self.peaks, key=lambda k: (k[0] or "", k[1]))
        for node in nodes:
            label = node.get("node")
            if "gpus" not in node:
                node["gpus"] = [g.to_dict() for g in self.gpus if g.node == label]
            node["peak_temp_c"] = {k[1]: self.peaks[k] for k in keys if k[0] == label}


class HeatMonitor:
    """Samples `sensor` every `interval_s` seconds into `log_path` and pauses/resumes the job.

    With `sensor=None` (no NVML) it starts no thread and writes no log; pass the reason as
    `unavailable` so the summary can say why. The monitor closes the sensor in `stop()`.
    `warn` receives one-line notices (pause, resume, long pause, sampling trouble) without a
    prefix; the default writes `ledger: <text>` to stderr.
    """

    def __init__(
        self,
        sensor: Sensor | None,
        guard: HeatGuard,
        interval_s: float,
        log_path: Path,
        pause: Callable[[], None],
        resume: Callable[[], None],
        clock: Callable[[], float] = time.time,
        warn: Callable[[str], None] = _stderr_line,
        unavailable: str | None = None,
        hold: Callable[[], None] | None = None,
    ):
        if interval_s <= 0:
            raise ValueError("heat sampling interval must be > 0 seconds")
        self._sensor = sensor
        self._guard = guard
        self._interval = interval_s
        self._log_path = Path(log_path)
        self._pause_cb = pause
        self._resume_cb = resume
        # called on each tick while the job stays paused: stop what the job started since (a Ray
        # actor whose worker came up after the pause); one process group needs none
        self._hold_cb = hold
        self._hold_failed = False
        self._clock = clock
        self._warn = warn
        # Re-entrant: the runner may call resume_if_paused() from a signal handler that
        # interrupted the main thread inside `paused`.
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._writer: HeatLogWriter | None = None
        self._armed = True
        self._sample_failed = False
        self._summary = HeatSummary(
            sensor="unavailable" if sensor is None else sensor.name,
            unavailable=(unavailable or "no sensor") if sensor is None else None,
            guard=guard.settings,
            interval_s=interval_s,
        )

    @property
    def paused(self) -> bool:
        """Whether the monitor holds the job paused right now."""
        with self._lock:
            return self._guard.paused

    def start(self) -> None:
        """Open the heat log and start sampling (no-op without a sensor)."""
        if self._sensor is None or self._thread is not None:
            return
        self._summary.gpus = self._sensor.gpus()  # a cluster adds nodes as they join (_tick)
        self._writer = HeatLogWriter(self._log_path, self._guard.settings, self._sensor.name)
        self._thread = threading.Thread(target=self._loop, name="ledger-heat", daemon=True)
        self._thread.start()

    def stop(self) -> HeatSummary:
        """Stop sampling, resume the job if paused, close log and sensor; return the summary."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.resume_if_paused()
        with self._lock:
            if self._writer is not None:
                self._writer.close()
            if isinstance(self._sensor, ClusterFacts):
                self._summary.gpus = self._sensor.gpus()
                self._summary.cluster = self._sensor.cluster_manifest()
            if self._sensor is not None:
                self._sensor.close()
        return self._summary

    def resume_if_paused(self, disarm: bool = True) -> bool:
        """Resume the job if the guard paused it; True if it did. Thread-safe.

        With `disarm` (the default) the monitor never pauses again: the job is being stopped,
        and a stopped process would hold a forwarded SIGTERM until ledger resumed it.
        """
        with self._lock:
            if disarm:
                self._armed = False
            action = self._guard.release(self._clock())
            if action is None:
                return False
            self._apply(action, forced=True)
            return True

    def _loop(self) -> None:
        while True:
            self._tick()
            if self._stop.wait(self._interval):
                return

    def _tick(self) -> None:
        assert self._sensor is not None
        try:
            samples = self._sensor.sample()
        except Exception as exc:  # noqa: BLE001 - a failing sensor must not end the run
            if not self._sample_failed:
                self._warn(f"heat sampling failed, will keep trying: {exc}")
                self._sample_failed = True
            return
        with self._lock:
            now = self._clock()
            temps = self._record(now, samples)
            if self._armed:
                was_paused = self._guard.paused
                for action in self._guard.update(now, temps):
                    self._apply(action)
                if was_paused and self._guard.paused and self._hold_cb is not None:
                    self._hold()

    def _record(self, now: float, samples: list[Sample]) -> dict[Any, float | None]:
        """One tick's samples into the heat log and the summary (count, GPUs, peaks); returns each
        GPU's temperature for the guard. The caller holds the lock."""
        assert self._sensor is not None
        if self._writer is not None:
            self._writer.write_samples(now, samples)
        self._summary.samples += 1
        if isinstance(self._sensor, ClusterFacts):
            self._summary.gpus = self._sensor.gpus()
        # a GPU known but not read this tick is unknown (None): the guard will not resume on it
        temps: dict[Any, float | None] = {(g.node, g.index): None for g in self._summary.gpus}
        for s in samples:
            key = (s.node, s.gpu)
            temps[key] = s.temp_c
            if s.temp_c is not None:
                peak = self._summary.peaks.get(key)
                self._summary.peaks[key] = max(s.temp_c, peak or s.temp_c)
        return temps

    def _paused(self, action: Action) -> bool:
        """Pause the job for a PAUSE action and note its window; False when it could not be
        paused (the guard is then off: retrying every tick would only repeat the failure)."""
        try:
            self._pause_cb()
        except Exception as exc:  # noqa: BLE001 - e.g. the job already exited
            self._warn(f"could not pause the job, heat guard off: {exc}")
            self._guard.release(action.at)
            self._armed = False
            return False
        self._summary.pause_windows.append((action.at, None))
        self._summary.pause_triggers.append((action.node, action.gpu, action.temp_c))
        where = f"GPU {action.gpu}" if action.node is None else f"GPU {action.gpu} on node {action.node}"
        self._warn(f"{where} at {action.temp_c} C, job paused to cool down")
        return True

    def _resumed(self, action: Action, forced: bool) -> None:
        """Resume the job for a RESUME action (a failure is reported, monitoring goes on) and
        close its pause window."""
        try:
            self._resume_cb()
        except Exception as exc:  # noqa: BLE001 - report it, keep monitoring
            self._warn(f"could not resume the job: {exc}")
        windows = self._summary.pause_windows
        if windows and windows[-1][1] is None:
            windows[-1] = (windows[-1][0], action.at)
        why = "resumed before stopping it" if forced else "GPUs cooled down, job resumed"
        self._warn(f"{why} after {action.paused_s:.0f} s paused")

    def _hold(self) -> None:
        """The hold callback, a failure said once (the pause itself still holds)."""
        assert self._hold_cb is not None
        try:
            self._hold_cb()
        except Exception as exc:  # noqa: BLE001 - what was stopped stays stopped
            if not self._hold_failed:
                self._warn(f"could not stop what the job started while paused, will keep trying: {exc}")
                self._hold_failed = True

    def _apply(self, action: Action, forced: bool = False) -> None:
        """Carry out one guard action; the caller holds the lock."""
        if action.kind is PAUSE:
            if not self._paused(action):
                return
        elif action.kind is RESUME:
            self._resumed(action, forced)
        elif action.kind is WARN:
            self._warn(
                f"job paused for {action.paused_s / 60:.1f} min (max_pause {self._guard.settings.max_pause:g} s), GPUs still too hot"
            )
        if self._writer is not None:
            self._writer.write_event(action.at, action.kind.value, action.gpu, action.temp_c, action.node)
