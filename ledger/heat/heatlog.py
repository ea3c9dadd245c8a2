"""The heat log, `runs/<shard>/<id>/heat.log`: every GPU sample and guard event of a run.

Format: UTF-8, tab-separated, one record a line, every line ending in a newline. The first line
is the header::

    time<TAB>gpu<TAB>temp_c<TAB>power_w<TAB>sm_clock_mhz<TAB>util_pct<TAB>mem_used_mib<TAB>throttle<TAB>event

- `time`: UTC ISO 8601 with milliseconds, e.g. `2026-11-29T11:13:54.123Z`.
- Sample lines: one per GPU per sampling tick; `gpu` is the index, numbers are plain decimals,
  `-` where the sensor had no value; `throttle` is a comma-separated list of NVML clock
  throttle reasons (`thermal,power`) or `-`; `event` is `-`.
- Event lines: `event` is `pause`, `resume` or `warn`; `gpu` and `temp_c` name the GPU that
  triggered a pause (else `-`); the other columns are `-`.
- Lines starting with `#` are comments. The writer puts the guard settings right after the
  header: `# guard enabled=true pause_at=85 resume_at=75 resume_after=30 max_pause=600`, and
  `# sensor <name>`. (`pandas.read_csv(path, sep="\\t", comment="#")` reads the file.)

The writer flushes after every tick, so a crash loses at most the line being written; the reader
ignores a last line without its newline (a write cut short) and rejects any other bad line.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

from ledger.errors import DataError
from ledger.heat.guard import GuardSettings
from ledger.heat.sensor import Sample
from ledger.timefmt import iso, parse_iso

COLUMNS = (
    "time",
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


@dataclass(frozen=True)
class TimedSample:
    """A sample and when it was taken (unix seconds)."""

    time: float
    sample: Sample


@dataclass(frozen=True)
class HeatEvent:
    """A guard event: `pause`, `resume` or `warn`."""

    time: float
    kind: str
    gpu: int | None = None
    temp_c: float | None = None


@dataclass
class HeatLog:
    """A parsed heat log."""

    samples: list[TimedSample] = field(default_factory=list)
    events: list[HeatEvent] = field(default_factory=list)
    guard: GuardSettings | None = None
    sensor: str | None = None

    @property
    def gpus(self) -> list[int]:
        """GPU indices seen in the samples."""
        return sorted({s.sample.gpu for s in self.samples})

    @property
    def pauses(self) -> list[tuple[float, float | None]]:
        """(start, end) of each pause in unix seconds; end None when the log ends paused."""
        windows: list[tuple[float, float | None]] = []
        start: float | None = None
        for event in self.events:
            if event.kind == "pause" and start is None:
                start = event.time
            elif event.kind == "resume" and start is not None:
                windows.append((start, event.time))
                start = None
        if start is not None:
            windows.append((start, None))
        return windows


class HeatLogWriter:
    """Appends samples and events to a heat log; line-buffered and flushed every tick."""

    def __init__(
        self, path: Path, guard: GuardSettings | None = None, sensor: str | None = None
    ):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: io.TextIOWrapper | None = open(  # noqa: SIM115 - closed in close()
            self.path, "w", encoding="utf-8", buffering=1, newline="\n"
        )
        self._file.write(HEADER + "\n")
        if guard is not None:
            flags = " ".join(
                f"{k}={str(v).lower() if isinstance(v, bool) else _num(v)}"
                for k, v in guard.to_dict().items()
            )
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
            cells = [stamp, str(s.gpu), *(_num(v) for v in values), throttle, NONE]
            f.write("\t".join(cells) + "\n")
        f.flush()

    def write_event(
        self, t: float, kind: str, gpu: int | None = None, temp_c: float | None = None
    ) -> None:
        """One event line (`pause`, `resume`, `warn`), then flush."""
        if kind not in EVENTS:
            raise ValueError(f"unknown heat event {kind!r}")
        f = self._require()
        gpu_cell = NONE if gpu is None else str(gpu)
        f.write(
            "\t".join([_stamp(t), gpu_cell, _num(temp_c), *([NONE] * 5), kind]) + "\n"
        )
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
    if not lines or lines[0] != HEADER:
        raise DataError(
            f"{path}:1: not a heat log (header is not {HEADER!r})",
            hint="heat logs are written by `ledger run`",
        )
    log = HeatLog()
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        if line.startswith("#"):
            _read_comment(log, line)
            continue
        try:
            _read_record(log, line)
        except (ValueError, IndexError) as exc:
            raise DataError(
                f"{path}:{lineno}: bad heat log line {line!r}: {exc}"
            ) from exc
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
                pause_at=float(pairs.get("pause_at", 85)),
                resume_at=float(pairs.get("resume_at", 75)),
                resume_after=float(pairs.get("resume_after", 30)),
                max_pause=float(pairs.get("max_pause", 600)),
            )
        except ValueError:
            log.guard = None  # an unreadable comment is not worth failing the log for


def _read_record(log: HeatLog, line: str) -> None:
    cells = line.split("\t")
    if len(cells) != len(COLUMNS):
        raise ValueError(f"expected {len(COLUMNS)} columns, got {len(cells)}")
    t = _parse_stamp(cells[0])
    gpu = None if cells[1] == NONE else int(cells[1])
    event = cells[8]
    if event == NONE:
        if gpu is None:
            raise ValueError("a sample line needs a gpu index")
        throttle = [] if cells[7] == NONE else cells[7].split(",")
        temp, power, clock, util, mem = (_opt_float(c) for c in cells[2:7])
        sample = Sample(gpu, temp, power, clock, util, mem, throttle=throttle)
        log.samples.append(TimedSample(t, sample))
    elif event in EVENTS:
        log.events.append(HeatEvent(t, event, gpu, _opt_float(cells[2])))
    else:
        raise ValueError(f"unknown event {event!r}")
