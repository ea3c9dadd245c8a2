"""The heat log, `runs/<shard>/<id>/heat.log`: every GPU sample and guard event of a run.

Format: UTF-8, tab-separated, one record a line, every line ending in a newline. The first line
is the header::

    time<TAB>node<TAB>gpu<TAB>temp_c<TAB>power_w<TAB>sm_clock_mhz<TAB>util_pct<TAB>mem_used_mib<TAB>throttle<TAB>event

- `time`: UTC ISO 8601 with milliseconds, e.g. `2026-11-29T11:13:54.123Z`.
- `node`: the Ray node the GPU belongs to (its label: the node's IP, or `IP#<node id prefix>`
  where two nodes share an IP), `-` on a single machine. A (node, gpu) pair names one GPU.
  Logs written before this column existed (header without `node`) are still read, node `-`.
- Sample lines: one per GPU per sampling tick; `gpu` is the index, numbers are plain decimals,
  `-` where the sensor had no value; `throttle` is a comma-separated list of NVML clock
  throttle reasons (`thermal,power`) or `-`; `event` is `-`.
- Event lines: `event` is `pause`, `resume` or `warn`; `node`, `gpu` and `temp_c` name the GPU
  that triggered a pause (else `-`); the other columns are `-`.
- Lines starting with `#` are comments. The writer puts the guard settings right after the
  header: `# guard enabled=true pause_at=85 resume_at=75 resume_after=30 max_pause=600`, and
  `# sensor <name>`. (`pandas.read_csv(path, sep="\\t", comment="#")` reads the file.)

The writer flushes after every tick, so a crash loses at most the line being written; the reader
ignores a last line without its newline (a write cut short) and rejects any other bad line.
"""

from __future__ import annotations

import io
from pathlib import Path

import msgspec

from ledger.config import HEAT
from ledger.errors import DataError
from ledger.heat.guard import Action, ActionKind, GuardSettings
from ledger.heat.sensor import Sample
from ledger.timefmt import iso, parse_iso

COLUMNS = (
    "time",
    "node",
    "gpu",
    "temp_c",
    "power_w",
    "sm_clock_mhz",
    "util_pct",
    "mem_used_mib",
    "throttle",
    "event",
)
HEADER = "\t".join(COLUMNS)
OLD_HEADER = "\t".join(c for c in COLUMNS if c != "node")  # before multi-node runs
EVENTS = ("pause", "resume", "warn")
NONE = "-"


def _stamp(t: float) -> str:
    text = iso(t)
    assert text is not None
    return text


def _parse_stamp(text: str) -> float:
    t = parse_iso(text, strict=True)
    assert t is not None
    return t


def _num(value: float | None) -> str:
    if value is None:
        return NONE
    return f"{value:.1f}".removesuffix(".0")


def _opt_float(text: str) -> float | None:
    return None if text == NONE else float(text)


class TimedSample(msgspec.Struct, frozen=True):
    """A sample and when it was taken (unix seconds)."""

    time: float
    sample: Sample


class HeatLog(msgspec.Struct):
    """A parsed heat log."""

    samples: list[TimedSample] = msgspec.field(default_factory=list)
    events: list[Action] = msgspec.field(default_factory=list)  # the guard's decisions, read back (no `paused_s`)
    guard: GuardSettings | None = None
    sensor: str | None = None

    @property
    def gpus(self) -> list[int]:
        """GPU indices seen in the samples (on any node)."""
        return sorted({s.sample.gpu for s in self.samples})

    @property
    def keys(self) -> list[tuple[str | None, int]]:
        """(node, gpu index) of every GPU seen, node None on a single machine."""
        return sorted({(s.sample.node, s.sample.gpu) for s in self.samples}, key=lambda k: (k[0] or "", k[1]))

    @property
    def nodes(self) -> list[str]:
        """Names of the Ray nodes seen (empty for a single machine)."""
        return sorted({s.sample.node for s in self.samples if s.sample.node is not None})

    @property
    def pauses(self) -> list[tuple[float, float | None]]:
        """(start, end) of each pause in unix seconds; end None when the log ends paused."""
        windows: list[tuple[float, float | None]] = []
        start: float | None = None
        for event in self.events:
            if event.kind is ActionKind.PAUSE and start is None:
                start = event.at
            elif event.kind is ActionKind.RESUME and start is not None:
                windows.append((start, event.at))
                start = None
        if start is not None:
            windows.append((start, None))
        return windows


class HeatLogWriter:
    """Appends samples and events to a heat log; line-buffered and flushed every tick."""

    def __init__(self, path: Path, guard: GuardSettings | None = None, sensor: str | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: io.TextIOWrapper | None = open(  # noqa: SIM115 - closed in close()
            self.path, "w", encoding="utf-8", buffering=1, newline="\n"
        )
        self._file.write(HEADER + "\n")
        if guard is not None:
            flags = " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else _num(v)}" for k, v in guard.to_dict().items())
            self._file.write(f"# guard {flags}\n")
        if sensor is not None:
            self._file.write(f"# sensor {sensor}\n")
        self._file.flush()

    def write_samples(self, t: float, samples: list[Sample]) -> None:
        """One line per GPU sample, then flush."""
        f = self._require()
        stamp = _stamp(t)
        for s in samples:
            throttle = ",".join(s.throttle) if s.throttle else NONE
            values = (s.temp_c, s.power_w, s.sm_clock_mhz, s.util_pct, s.mem_used_mib)
            node = NONE if s.node is None else s.node
            cells = [stamp, node, str(s.gpu), *(_num(v) for v in values), throttle, NONE]
            f.write("\t".join(cells) + "\n")
        f.flush()

    def write_event(
        self,
        t: float,
        kind: str,
        gpu: int | None = None,
        temp_c: float | None = None,
        node: str | None = None,
    ) -> None:
        """One event line (`pause`, `resume`, `warn`), then flush."""
        if kind not in EVENTS:
            raise ValueError(f"unknown heat event {kind!r}")
        f = self._require()
        gpu_cell = NONE if gpu is None else str(gpu)
        node_cell = NONE if node is None else node
        f.write("\t".join([_stamp(t), node_cell, gpu_cell, _num(temp_c), *([NONE] * 5), kind]) + "\n")
        f.flush()

    def close(self) -> None:
        """Close the file; safe to call twice."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def _require(self) -> io.TextIOWrapper:
        if self._file is None:
            raise ValueError(f"heat log {self.path} is closed")
        return self._file


def read_heat_log(path: Path) -> HeatLog:
    """Parse a heat log; a bad line (other than a cut-short last line) raises DataError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise DataError(f"cannot read heat log {path}: {exc.strerror or exc}") from exc
    lines = text.split("\n")
    # The text after the last newline is either "" or a line whose write was cut short.
    lines = lines[:-1]
    if not lines or lines[0] not in (HEADER, OLD_HEADER):
        raise DataError(
            f"{path}:1: not a heat log (header is not {HEADER!r})",
            hint="heat logs are written by `ledger run`",
        )
    log = HeatLog()
    old = lines[0] == OLD_HEADER
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        if line.startswith("#"):
            _read_comment(log, line)
            continue
        try:
            _read_record(log, line, old)
        except (ValueError, IndexError) as exc:
            raise DataError(f"{path}:{lineno}: bad heat log line {line!r}: {exc}") from exc
    return log


def _read_comment(log: HeatLog, line: str) -> None:
    words = line[1:].split()
    if len(words) >= 2 and words[0] == "sensor":
        log.sensor = line[1:].strip()[len("sensor") :].strip()
    elif words and words[0] == "guard":
        pairs = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        try:
            log.guard = GuardSettings(
                enabled=pairs.get("enabled", "true") == "true",
                pause_at=float(pairs.get("pause_at", HEAT.pause_at)),
                resume_at=float(pairs.get("resume_at", HEAT.resume_at)),
                resume_after=float(pairs.get("resume_after", HEAT.resume_after)),
                max_pause=float(pairs.get("max_pause", HEAT.max_pause)),
            )
        except ValueError:
            log.guard = None  # an unreadable comment is not worth failing the log for


def _read_record(log: HeatLog, line: str, old: bool = False) -> None:
    cells = line.split("\t")
    if old:  # a log from before the node column: every GPU is on this machine
        cells.insert(1, NONE)
    if len(cells) != len(COLUMNS):
        raise ValueError(f"expected {len(COLUMNS) - old} columns, got {len(cells) - old}")
    t = _parse_stamp(cells[0])
    node = None if cells[1] == NONE else cells[1]
    gpu = None if cells[2] == NONE else int(cells[2])
    event = cells[9]
    if event == NONE:
        if gpu is None:
            raise ValueError("a sample line needs a gpu index")
        throttle = [] if cells[8] == NONE else cells[8].split(",")
        temp, power, clock, util, mem = (_opt_float(c) for c in cells[3:8])
        sample = Sample(gpu, temp, power, clock, util, mem, throttle=throttle, node=node)
        log.samples.append(TimedSample(t, sample))
    elif event in EVENTS:
        log.events.append(Action(ActionKind(event), t, gpu, _opt_float(cells[3]), node=node))
    else:
        raise ValueError(f"unknown event {event!r}")
