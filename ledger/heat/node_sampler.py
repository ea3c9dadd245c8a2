"""The per-node sampler: the code of the small Ray actor ledger starts on every node of a cluster.

`ledger.heat.cluster` wraps `NodeSampler` with `ray.remote` and pins one instance to each node
(node-affinity scheduling, `num_cpus=0`, no GPUs, namespace `ledger`). This module imports no
Ray, so the worker only needs `ledger` itself (shipped by Ray's `py_modules` when the node lacks
it). Everything it returns is plain data (dicts, lists, numbers): nothing ledger-specific has to
be unpickled on the driver side.

- `sample()` reads this node's GPUs now (NVML, or the scripted timeline given by the driver).
- `signal(pids, action)` stops (`"stop"`, SIGSTOP) the given processes AND their descendants on
  this node, parents first so none can start a child unseen, and remembers them; `"resume"`
  continues (SIGCONT) every process it stopped, children first. A process that is gone is listed,
  never an error.
"""

from __future__ import annotations

import os
import signal as signals
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import psutil
from msgspec.structs import asdict

from ledger.heat.nvml import NvmlSensor
from ledger.heat.sensor import (
    ScriptedSensor,
    Sensor,
    SensorSpec,
    SensorUnavailable,
    TimelineEntry,
)


def _children_map() -> dict[int, list[int]]:
    """parent pid -> child pids, over every process psutil sees (gone meanwhile: left out)."""
    children: dict[int, list[int]] = {}
    for proc in psutil.process_iter(["ppid"]):
        ppid = proc.info.get("ppid")
        if ppid is not None:
            children.setdefault(int(ppid), []).append(proc.pid)
    return children


def with_descendants(pids: list[int]) -> list[int]:
    """`pids` and all their descendants, each once, parents before children."""
    children = _children_map()
    ordered: list[int] = []
    seen: set[int] = set()
    queue = list(pids)
    while queue:
        pid = queue.pop(0)
        if pid in seen:
            continue
        seen.add(pid)
        ordered.append(pid)
        queue.extend(children.get(pid, []))
    return ordered


def open_node_sensor(spec: SensorSpec, names: frozenset[str]) -> Sensor:
    """The sensor a node uses: the scripted timeline the driver sent, else NVML."""
    if spec.get("kind") == "scripted":
        entries = [TimelineEntry(*e) for e in spec["entries"]]
        sensor = ScriptedSensor(spec.get("path") or "timeline", entries=entries, node_names=names)
        if not sensor.gpus():
            raise SensorUnavailable("the heat timeline names no GPU of this node")
        return sensor

    return NvmlSensor()


class SamplerInfo(TypedDict):
    """`NodeSampler.info()`'s answer: who and what the sampler watches."""

    node: str
    hostname: str
    pid: int
    sensor: str | None
    unavailable: str | None  # why the node has no sensor
    gpus: Sequence[Mapping[str, Any]]  # `GpuInfo`'s fields, and `node`


class SamplerReading(TypedDict):
    """`NodeSampler.sample()`'s answer: the node's GPUs at `time` (unix seconds)."""

    time: float
    samples: Sequence[Mapping[str, Any]]  # `Sample`'s fields, and `node`


class SignalDone(TypedDict):
    """`NodeSampler.signal()`'s answer: the processes signalled, and those already gone."""

    node: str
    action: str
    pids: list[int]
    gone: list[int]
    at: float


class NodeSampler:
    """One node's sampler (runs inside a Ray actor; see the module docstring)."""

    def __init__(self, label: str, names: list[str], spec: SensorSpec):
        self.label = label
        self._sensor: Sensor | None = None
        self._unavailable: str | None = None
        try:
            self._sensor = open_node_sensor(spec, frozenset(names))
        except SensorUnavailable as exc:
            self._unavailable = exc.reason
        except Exception as exc:  # noqa: BLE001 - a sensor that cannot start leaves the node unwatched
            self._unavailable = f"{type(exc).__name__}: {exc}"
        self._stopped: list[int] = []

    def info(self) -> SamplerInfo:
        """Who and what this sampler watches: host, pid, sensor, GPUs, or why it cannot."""
        gpus = [] if self._sensor is None else [asdict(g) | {"node": self.label} for g in self._sensor.gpus()]
        return {
            "node": self.label,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "sensor": None if self._sensor is None else self._sensor.name,
            "unavailable": self._unavailable,
            "gpus": gpus,
        }

    def sample(self) -> SamplerReading:
        """This node's GPUs now: `{"time": unix seconds, "samples": [...]}` (empty when unwatched)."""
        now = time.time()
        if self._sensor is None:
            return {"time": now, "samples": []}
        return {"time": now, "samples": [asdict(s) | {"node": self.label} for s in self._sensor.sample()]}

    def signal(self, pids: list[int], action: str) -> SignalDone:
        """`stop` the given processes and their descendants, or `resume` all stopped ones."""
        done: list[int] = []
        gone: list[int] = []
        if action == "stop":
            targets = [p for p in with_descendants(pids) if p != os.getpid()]
            sig = signals.SIGSTOP
        elif action == "resume":
            targets = list(reversed(self._stopped))
            sig = signals.SIGCONT
        else:
            raise ValueError(f"unknown action {action!r}")
        for pid in targets:
            try:
                os.kill(pid, sig)
                done.append(pid)
            except ProcessLookupError:
                gone.append(pid)
        if action == "stop":
            self._stopped.extend(p for p in done if p not in self._stopped)
        else:
            self._stopped = []
        return {"node": self.label, "action": action, "pids": done, "gone": gone, "at": time.time()}

    def cpu_seconds(self) -> float:
        """CPU time this sampler's process has used (user + system), for the benchmark."""
        t = os.times()
        return t.user + t.system

    def close(self) -> None:
        """Resume anything still stopped and release the sensor."""
        if self._stopped:
            self.signal([], "resume")
        if self._sensor is not None:
            self._sensor.close()
            self._sensor = None
