"""A PNG of a heat log. The only module that imports matplotlib (lazily; optional extra)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ledger.errors import LedgerError
from ledger.heat.chart import heat_plot
from ledger.heat.heatlog import HeatLog
from ledger.installhint import install_hint


def plot_heat_png(heatlog: HeatLog, steps: Sequence[tuple[int, float]] | None, out_path: Path) -> Path:
    """Plot temperature per GPU over time: pauses shaded, thresholds and step ends in the legend."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise LedgerError(
            "plotting needs matplotlib, which is not installed",
            hint=install_hint("plot", "matplotlib"),
        ) from exc
    if not heatlog.samples:
        raise LedgerError("the heat log has no samples to plot")
    plot = heat_plot(heatlog, steps)
    # Figure + Agg canvas, not pyplot: no global state, no GUI backend.
    fig = Figure(figsize=(11, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for label, points in plot.lines.items():
        xs, ys = zip(*points)
        ax.plot(xs, ys, linewidth=1.2, label=label)
    for n, (start, end) in enumerate(plot.pauses):
        ax.axvspan(start, end, color="tab:red", alpha=0.15, label="paused" if n == 0 else None)
    for temp, label, color in plot.thresholds:
        ax.axhline(temp, color=color, linestyle="--", linewidth=0.8, label=label)
    for n, x in enumerate(plot.steps):
        ax.axvline(x, color="grey", linewidth=0.5, alpha=0.5, label="step boundary" if n == 0 else None)
    ax.set_xlabel(f"{plot.unit} since start")
    ax.set_ylabel("temperature (C)")
    ax.set_title(plot.title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", borderaxespad=0)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, format="png")
    return out_path
