"""The GPU sensor seam: what a sample holds, the `Sensor` protocol, and a scripted sensor.

The real sensor reads NVML (`ledger.heat.nvml`); `ScriptedSensor` plays a timeline file so the
guard, the monitor and `ledger run` can be exercised on machines without a GPU.

Timeline file format (one entry a line, `#` starts a comment, blank lines are ignored)::

    # seconds-since-start  [node]  gpu-index  celsius
    0     0  60
    0     1  58
    12.5  0  88
    20    node2  0  91

A line with four fields names a node: on a Ray cluster it applies only to the node that answers
to that name (its label, IP, hostname, node id, a custom resource it offers or a node label value, see
`ledger.heat.cluster`); a line with three fields applies to every node (and to a single machine).

The temperature of a GPU at time t is the value of its last entry at or before t (a step
function); before its first entry it is unknown (None).
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

import msgspec
from msgspec.structs import asdict

from ledger.errors import LedgerError


class GpuInfo(msgspec.Struct, frozen=True):
    """Static facts about one GPU; None where the sensor cannot tell."""

    index: int
    name: str | None = None
    uuid: str | None = None
    memory_total_mib: float | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    power_limit_w: float | None = None
    node: str | None = None  # the Ray node's label; None on a single machine

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for the manifest (no `node` key on a single machine)."""
        data = asdict(self)
        if data["node"] is None:
            del data["node"]
        return data


class Sample(msgspec.Struct, frozen=True):
    """One reading of one GPU; None for fields the sensor lacks or failed to read."""

    gpu: int
    temp_c: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    util_pct: float | None = None
    mem_used_mib: float | None = None
    throttle: list[str] = msgspec.field(default_factory=list)
    node: str | None = None  # the Ray node's label; None on a single machine


class SensorUnavailable(Exception):
    """No sensor can be opened (no NVML library, no driver, no GPU); `reason` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@runtime_checkable
class Sensor(Protocol):
    """Anything that can list GPUs and sample them."""

    name: str

    def gpus(self) -> list[GpuInfo]:
        """The GPUs this sensor watches."""
        ...

    def sample(self) -> list[Sample]:
        """One reading per GPU, now."""
        ...

    def close(self) -> None:
        """Release the sensor; safe to call twice."""
        ...


class TimelineEntry(msgspec.Struct, frozen=True):
    """One line of a timeline file."""

    at_s: float
    gpu: int
    temp_c: float
    node: str | None = None  # None: every node


class SensorSpec(TypedDict, total=False):
    """What each node's sampler runs, as the driver sends it: NVML, or the scripted timeline
    (its file's `path` for messages and its lines already parsed, as `TimelineEntry` fields)."""

    kind: Literal["nvml", "scripted"]
    path: str
    entries: list[tuple[float, int, float, str | None]]


def parse_timeline(path: Path) -> list[TimelineEntry]:
    """Read a timeline file; a bad line raises LedgerError naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LedgerError(
            f"cannot read heat timeline {path}: {exc.strerror or exc}",
            hint="give an existing file of '<seconds> <gpu index> <celsius>' lines",
        ) from exc
    return parse_timeline_text(text, path)


def parse_timeline_text(text: str, path: Path | str = "<timeline>") -> list[TimelineEntry]:
    """Parse timeline text (see the module docstring); `path` only names it in errors."""
    path = Path(path)
    entries: list[TimelineEntry] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        entries.append(_parse_timeline_line(path, lineno, line))
    if not entries:
        raise LedgerError(
            f"heat timeline {path} has no entries",
            hint="add lines '<seconds> <gpu index> <celsius>', e.g. '0 0 60'",
        )
    return entries


def _parse_timeline_line(path: Path, lineno: int, line: str) -> TimelineEntry:
    parts = line.split()
    problem = ""
    node = None
    if len(parts) == 4:
        node = parts.pop(1)
    if len(parts) != 3:
        problem = f"expected 3 or 4 fields, got {len(parts) + (node is not None)}"
    else:
        try:
            at_s, gpu, temp_c = float(parts[0]), int(parts[1]), float(parts[2])
        except ValueError:
            problem = "fields must be <seconds: number> <gpu index: integer> <celsius: number>"
        else:
            if not (math.isfinite(at_s) and math.isfinite(temp_c)) or at_s < 0 or gpu < 0:
                problem = "seconds and gpu index must be finite and non-negative"
            else:
                return TimelineEntry(at_s, gpu, temp_c, node)
    raise LedgerError(
        f"{path}:{lineno}: bad heat timeline line {line!r}: {problem}",
        hint="each line is '<seconds since start> [<node>] <gpu index> <celsius>'",
    )


class ScriptedSensor:
    """A sensor that plays a timeline file (see the module docstring).

    Time starts at the first `sample()` call (when sampling starts), read from `clock`.
    `entries` replaces reading the file (a cluster node gets the parsed lines, not the file);
    `node_names` are the names this node answers to: lines naming another node are skipped,
    and with `node_names=None` (a single machine) lines naming any node are skipped too.
    """

    def __init__(
        self,
        timeline_path: Path | str,
        clock: Callable[[], float] = time.monotonic,
        entries: list[TimelineEntry] | None = None,
        node_names: frozenset[str] | None = None,
    ):
        self.path = Path(timeline_path)
        self.name = f"scripted:{self.path}"
        self._clock = clock
        self._start: float | None = None
        self._series: dict[int, tuple[list[float], list[float]]] = {}
        if entries is None:
            entries = parse_timeline(self.path)
        names = node_names or frozenset()
        mine = [e for e in entries if e.node is None or e.node in names]
        for entry in sorted(mine, key=lambda e: e.at_s):
            times, temps = self._series.setdefault(entry.gpu, ([], []))
            times.append(entry.at_s)
            temps.append(entry.temp_c)

    def gpus(self) -> list[GpuInfo]:
        """One GpuInfo per GPU index named in the timeline."""
        return [GpuInfo(index=i, name="scripted") for i in sorted(self._series)]

    def temperature_at(self, elapsed_s: float) -> dict[int, float | None]:
        """Each GPU's temperature `elapsed_s` seconds after the start."""
        result: dict[int, float | None] = {}
        for gpu, (times, temps) in sorted(self._series.items()):
            pos = bisect.bisect_right(times, elapsed_s)
            result[gpu] = temps[pos - 1] if pos else None
        return result

    def sample(self) -> list[Sample]:
        """Temperatures now; the other fields are None."""
        now = self._clock()
        if self._start is None:
            self._start = now
        temps = self.temperature_at(now - self._start)
        return [Sample(gpu=gpu, temp_c=temp) for gpu, temp in temps.items()]

    def close(self) -> None:
        """Nothing to release."""
