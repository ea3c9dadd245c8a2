"""What a heat plot shows, independent of how it is drawn (SVG page or matplotlib PNG).

- Time since the run's first sample in the unit that suits its length: seconds up to 2 minutes,
  minutes up to 2 hours, hours beyond (a 13-second run reads "seconds", not "0.2 minutes").
- One line per GPU, and per node when the log has several (a sample's optional `node` field,
  written by multi-node runs); labels `GPU 0` or `node-a GPU 0`.
- The guard's thresholds (`pause at`, `resume at`) and the step boundaries are legend entries,
  pauses are shaded; the legend sits outside the data.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ledger.heat.heatlog import HeatLog

MAX_STEP_LINES = 500  # beyond this, step lines would paint the plot solid
PAUSE_COLOR, RESUME_COLOR = "#d62728", "#1f77b4"


def time_unit(span_s: float) -> tuple[str, float]:
    """(unit name, seconds per unit) for a run lasting `span_s` seconds."""
    if span_s <= 120:
        return "seconds", 1.0
    if span_s <= 7200:
        return "minutes", 60.0
    return "hours", 3600.0


def node_of(sample: object) -> str | None:
    """The node a sample came from, where the heat log names one (multi-node runs)."""
    node = getattr(sample, "node", None)
    return None if node in (None, "", "-") else str(node)


class HeatPlot(msgspec.Struct):
    """Everything a heat plot draws, in plot units (time since start in `unit`)."""

    unit: str
    lines: dict[str, list[tuple[float, float]]]  # label -> (time, temp C)
    pauses: list[tuple[float, float]]
    steps: list[float]
    thresholds: list[tuple[float, str, str]]  # (temp, label, colour)
    title: str


def heat_plot(heatlog: HeatLog, steps: Sequence[tuple[int, float]] | None) -> HeatPlot:
    """The plot of a heat log; `steps` are (step, end time in unix seconds)."""
    times = [ts.time for ts in heatlog.samples] + [e.at for e in heatlog.events]
    t0, t_last = min(times), max(times)
    unit, per = time_unit(t_last - t0)
    lines = _lines(heatlog, t0, per)
    pauses = [((start - t0) / per, ((end if end is not None else t_last) - t0) / per) for start, end in heatlog.pauses]
    marks = [(t - t0) / per for _, t in (steps or [])[:MAX_STEP_LINES] if t0 <= t <= t_last]
    g = heatlog.guard
    thresholds = (
        []
        if g is None
        else [(g.pause_at, f"pause at {g.pause_at:g} C", PAUSE_COLOR), (g.resume_at, f"resume at {g.resume_at:g} C", RESUME_COLOR)]
    )
    return HeatPlot(unit, lines, pauses, marks, thresholds, f"GPU temperature ({heatlog.sensor or 'unknown sensor'})")


def _lines(heatlog: HeatLog, t0: float, per: float) -> dict[str, list[tuple[float, float]]]:
    """One line of (time in the plot's unit, temperature) per GPU, labelled `GPU n`, or `node
    GPU n` on a cluster."""
    nodes = {node_of(ts.sample) for ts in heatlog.samples}
    lines: dict[str, list[tuple[float, float]]] = {}
    for ts in sorted(heatlog.samples, key=lambda s: (node_of(s.sample) or "", s.sample.gpu, s.time)):
        if ts.sample.temp_c is None:
            continue
        node = node_of(ts.sample)
        label = f"{node} GPU {ts.sample.gpu}" if len(nodes) > 1 or node else f"GPU {ts.sample.gpu}"
        lines.setdefault(label, []).append(((ts.time - t0) / per, ts.sample.temp_c))
    return lines
