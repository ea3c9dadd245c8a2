"""A PNG of a heat log. The only module that imports matplotlib (lazily; optional extra)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ledger.errors import LedgerError
from ledger.heat.heatlog import HeatLog

MAX_STEP_LINES = 500  # beyond this, step lines would paint the plot solid


def plot_heat_png(
    heatlog: HeatLog, steps: Sequence[tuple[int, float]] | None, out_path: Path
) -> Path:
    """Plot temperature per GPU over time, pauses shaded, step ends as vertical lines."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise LedgerError(
            "plotting needs matplotlib, which is not installed",
            hint="pip install 'ledger[plot]'",
        ) from exc
    if not heatlog.samples:
        raise LedgerError("the heat log has no samples to plot")

    t0 = min(ts.time for ts in heatlog.samples)
    t_last = max([ts.time for ts in heatlog.samples] + [e.time for e in heatlog.events])

    def minutes(t: float) -> float:
        return (t - t0) / 60

    # Figure + Agg canvas, not pyplot: no global state, no GUI backend.
    fig = Figure(figsize=(10, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for gpu in heatlog.gpus:
        points = [
            (minutes(ts.time), ts.sample.temp_c)
            for ts in heatlog.samples
            if ts.sample.gpu == gpu and ts.sample.temp_c is not None
        ]
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, linewidth=1.2, label=f"GPU {gpu}")
    for n, (start, end) in enumerate(heatlog.pauses):
        ax.axvspan(
            minutes(start),
            minutes(end if end is not None else t_last),
            color="tab:red",
            alpha=0.15,
            label="paused" if n == 0 else None,
        )
    if heatlog.guard is not None:
        ax.axhline(
            heatlog.guard.pause_at, color="tab:red", linestyle="--", linewidth=0.8
        )
        ax.axhline(
            heatlog.guard.resume_at, color="tab:blue", linestyle="--", linewidth=0.8
        )
    for _, t_end in (steps or [])[:MAX_STEP_LINES]:
        if t0 <= t_end <= t_last:
            ax.axvline(minutes(t_end), color="grey", linewidth=0.5, alpha=0.5)
    ax.set_xlabel("minutes since start")
    ax.set_ylabel("temperature (C)")
    ax.set_title(f"GPU temperature ({heatlog.sensor or 'unknown sensor'})")
    ax.legend(loc="best", fontsize="small")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, format="png")
    return out_path
