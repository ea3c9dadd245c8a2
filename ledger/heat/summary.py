"""Terminal summary of a heat log: per-GPU temperatures, pauses, and an ASCII sparkline."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from datetime import datetime, timezone

from ledger.config import HEAT
from ledger.heat.guard import PAUSE, Action
from ledger.heat.heatlog import HeatLog

LEVELS = "_.:-=+*#%@"  # coolest to hottest
DEFAULT_PAUSE_AT = HEAT.pause_at


def format_duration(seconds: float) -> str:
    """0.4s, 45s, 2m10s, 1h02m (tenths below 10 s: a short run's pauses are not all "0s")."""
    if seconds < 10 and round(seconds, 1) != round(seconds):
        return f"{seconds:.1f}s"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _name(key: tuple[str | None, int]) -> str:
    node, gpu = key
    return str(gpu) if node is None else f"{node}/{gpu}"


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%H:%M:%S")


def _step_at(steps: Sequence[tuple[int, float]], t: float) -> int | None:
    """The step in progress at t: the first whose end is at or after t."""
    for step, t_end in sorted(steps, key=lambda s: s[1]):
        if t_end >= t:
            return step
    return None


def time_above(series: list[tuple[float, float]], threshold: float) -> float:
    """Seconds a sampled (time, temp) series held at or above `threshold` (sample-and-hold)."""
    total = 0.0
    for (t, temp), (t_next, _) in itertools.pairwise(series):
        if temp >= threshold:
            total += t_next - t
    return total


def render_heat_summary(
    heatlog: HeatLog,
    steps: Sequence[tuple[int, float]] | None = None,
    width: int = 60,
) -> str:
    """A plain-text report of a heat log; `steps` are (step, end time in unix seconds)."""
    if not heatlog.samples:
        return "heat log: no samples\n"
    pause_at = heatlog.guard.pause_at if heatlog.guard else DEFAULT_PAUSE_AT
    series = _series(heatlog)
    times = [ts.time for ts in heatlog.samples] + [e.at for e in heatlog.events]
    t0, t1 = min(times), max(times)
    start = datetime.fromtimestamp(t0, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    lines = [
        (
            f"heat: {len(series)} GPU{'' if len(series) == 1 else 's'}, {start} -> {_clock(t1)} UTC "
            f"({format_duration(t1 - t0)}), sensor {heatlog.sensor or 'unknown'}"
        )
    ]
    if heatlog.guard is not None:
        g = heatlog.guard
        state = "on" if g.enabled else "off (recording only)"
        lines.append(f"guard {state}: pause at {g.pause_at:g} C, resume at or below {g.resume_at:g} C after {g.resume_after:g} s")
    lines.append(  # every column with its unit
        f"{'GPU':>4} {'min C':>6} {'mean C':>6} {'peak C':>6} {'above ' + f'{pause_at:g}C':>10}"
    )
    lines.extend(_gpu_row(gpu, points, pause_at) for gpu, points in series.items())
    lines.extend(_pause_lines(heatlog, steps, t1))
    lines.extend(_sparklines(heatlog, series, steps, t0, t1, width))
    return "\n".join(lines) + "\n"


def _series(heatlog: HeatLog) -> dict[str, list[tuple[float, float]]]:
    """One series of (time, temperature) per GPU, named `gpu` on one machine and `node/gpu` on
    a cluster; a GPU never read has an empty one."""
    series: dict[str, list[tuple[float, float]]] = {_name(k): [] for k in heatlog.keys}
    for ts in heatlog.samples:
        if ts.sample.temp_c is not None:
            series[_name((ts.sample.node, ts.sample.gpu))].append((ts.time, ts.sample.temp_c))
    return series


def _gpu_row(gpu: str, points: list[tuple[float, float]], pause_at: float) -> str:
    """One GPU's line of the table: min, mean and peak temperature, time at or above `pause_at`."""
    if not points:
        return f"{gpu:>4} {'-':>6} {'-':>6} {'-':>6} {'-':>10}"
    temps = [p[1] for p in points]
    return (
        f"{gpu:>4} {min(temps):>6.1f} {sum(temps) / len(temps):>6.1f} {max(temps):>6.1f} "
        f"{format_duration(time_above(points, pause_at)):>10}"
    )


def _pause_lines(heatlog: HeatLog, steps: Sequence[tuple[int, float]] | None, t1: float) -> list[str]:
    windows = heatlog.pauses
    if not windows:
        return ["pauses: none"]
    total = sum((end if end is not None else t1) - start for start, end in windows)
    lines = [f"pauses: {len(windows)}, {format_duration(total)} in all"]
    triggers = [e for e in heatlog.events if e.kind is PAUSE]
    for n, (start, end) in enumerate(windows, start=1):
        end_text = _clock(end) if end is not None else "(still paused at end of log)"
        length = format_duration((end if end is not None else t1) - start)
        line = f"  #{n} {_clock(start)} -> {end_text}  {length}"
        line += _trigger_text(triggers[n - 1] if n <= len(triggers) else None)
        lines.append(line + _step_text(steps, start))
    return lines


def _step_text(steps: Sequence[tuple[int, float]] | None, start: float) -> str:
    """The step a pause began in, for its pause line ("" when no step is known)."""
    step = _step_at(steps, start) if steps else None
    return "" if step is None else f"  (during step {step})"


def _trigger_text(trigger: Action | None) -> str:
    """What paused the job, for its pause line: the GPU and its temperature, where known."""
    if trigger is None or trigger.gpu is None:
        return ""
    temp = "" if trigger.temp_c is None else f" at {trigger.temp_c:g} C"
    where = f"{trigger.node}/" if trigger.node is not None else ""
    return f"  GPU {where}{trigger.gpu}{temp}"


def _sparklines(
    heatlog: HeatLog,
    series: dict[str, list[tuple[float, float]]],
    steps: Sequence[tuple[int, float]] | None,
    t0: float,
    t1: float,
    width: int,
) -> list[str]:
    all_temps = [temp for points in series.values() for _, temp in points]
    if not all_temps:
        return []
    lo, hi = min(all_temps), max(all_temps)
    span = max(t1 - t0, 1e-9)
    bin_s = span / width

    def column(t: float) -> int:
        return min(width - 1, max(0, int((t - t0) / bin_s)))

    column_text = format_duration(bin_s) if bin_s >= 10 else f"{bin_s:.2g}s"
    lines = [f"temperature {lo:g}..{hi:g} C, one column = {column_text}:"]
    lines += [f"  GPU {gpu:<3}|{_cells(points, column, width, lo, hi)}|" for gpu, points in series.items()]
    lines += _mark_rows(heatlog.pauses, steps or [], column, width, (t0, t1))
    legend = f"  legend: {LEVELS[0]} coolest ({lo:g} C) .. {LEVELS[-1]} hottest ({hi:g} C)"
    legend += "; P paused" if heatlog.pauses else ""
    lines.append(legend + ("; ^ a step ended" if steps else ""))
    return lines


def _mark_rows(
    pauses: Sequence[tuple[float, float | None]],
    steps: Sequence[tuple[int, float]],
    column: Callable[[float], int],
    width: int,
    window: tuple[float, float],
) -> list[str]:
    """The rows under the GPUs: the columns the job was paused in (P), where each step ended (^)."""
    t0, t1 = window
    rows = []
    if pauses:
        paused = {c for start, end in pauses for c in range(column(start), column(end if end is not None else t1) + 1)}
        rows.append(f"  {'paused':<7}|{_marks(paused, width, 'P')}|")
    if steps:
        rows.append(f"  {'steps':<7}|{_marks({column(t) for _, t in steps if t0 <= t <= t1}, width, '^')}|")
    return rows


def _marks(columns: set[int], width: int, mark: str) -> str:
    """A row of `width` columns with `mark` in the given ones."""
    return "".join(mark if c in columns else " " for c in range(width))


def _cells(points: list[tuple[float, float]], column: Callable[[float], int], width: int, lo: float, hi: float) -> str:
    """One GPU's row: each column's peak as a level between `lo` and `hi`, the last one held
    across columns without a sample, blank before the first."""
    peaks: list[float | None] = [None] * width
    for t, temp in points:
        c = column(t)
        current = peaks[c]
        peaks[c] = temp if current is None else max(current, temp)
    cells, last = [], None
    for peak in peaks:
        last = peak if peak is not None else last  # hold across empty columns
        if last is None:
            cells.append(" ")
        elif hi == lo:
            cells.append(LEVELS[len(LEVELS) // 2])
        else:
            cells.append(LEVELS[round((last - lo) / (hi - lo) * (len(LEVELS) - 1))])
    return "".join(cells)
