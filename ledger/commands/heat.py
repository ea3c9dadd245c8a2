"""`ledger heat RUN`: a run's temperatures over time, with pauses and step boundaries."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import msgspec

from ledger.errors import LedgerError
from ledger.fsutil import write_atomic
from ledger.heat.guard import Action
from ledger.heat.heatlog import HeatLog, read_heat_log
from ledger.heat.summary import render_heat_summary, time_above
from ledger.metrics.store import load_metrics
from ledger.opening import listing_for
from ledger.pages.heatpage import heat_page
from ledger.pages.heatplot import plot_heat_png
from ledger.runref import resolve
from ledger.storage.store import read_file_at


class HeatResult(msgspec.Struct):
    """The terminal summary of a run's heat log, and the files written."""

    text: str
    written: list[Path]
    data: dict[str, Any] = msgspec.field(default_factory=dict)  # `--json`


def heat_report(start: Path, name: str, png: Path | None, html: Path | None = None) -> HeatResult:
    """The terminal summary of a run's heat log; also a PNG and/or an HTML page when asked."""
    repo, _cfg, tip, listing = listing_for(start)
    entry = resolve(repo, tip, name, listing)
    raw = read_file_at(repo, entry, "heat.log")
    if raw is None:
        gpu = (listing.manifests.get(entry.id) or {}).get("gpu") or {}
        why = gpu.get("unavailable") or "GPU sampling was off"
        raise LedgerError(f"run {entry.id} has no heat log ({why})", "runs on a machine with NVML record one")
    table = load_metrics(repo, entry)
    steps = sorted((row.step, row.t_end) for row in table.rows.values() if row.t_end is not None) if table else []
    with tempfile.TemporaryDirectory(prefix="ledger-heat-") as tmp:
        path = Path(tmp) / "heat.log"
        path.write_bytes(raw)
        log = read_heat_log(path)
    summary = render_heat_summary(log, steps or None)
    written = _write_files(entry.id, log, steps or None, summary, png, html)
    return HeatResult(f"run {entry.id}\n" + summary, written, heat_data(entry.id, log))


def _write_files(
    run_id: str, log: HeatLog, steps: list[tuple[int, float]] | None, summary: str, png: Path | None, html: Path | None
) -> list[Path]:
    """The PNG plot and the HTML page asked for, written; their paths."""
    written = []
    if png is not None:
        written.append(plot_heat_png(log, steps, png))
    if html is not None:
        if not log.samples:
            raise LedgerError("the heat log has no samples to plot")

        write_atomic(html, heat_page(run_id, log, steps, summary))
        written.append(html)
    return written


def heat_data(run_id: str, log: HeatLog) -> dict[str, Any]:
    """`ledger heat --json`: per GPU min/mean/peak temperature and seconds above the pause
    threshold, the guard's settings and its events (unix seconds)."""
    guard = log.guard.to_dict() if log.guard is not None else None
    pause_at = log.guard.pause_at if log.guard is not None else None
    series: dict[str, list[tuple[float, float]]] = {}
    for ts in log.samples:
        if ts.sample.temp_c is not None:
            key = f"{ts.sample.node}/{ts.sample.gpu}" if ts.sample.node else str(ts.sample.gpu)
            series.setdefault(key, []).append((ts.time, ts.sample.temp_c))
    gpus = {}
    for key, points in series.items():
        temps = [t for _, t in points]
        gpus[key] = {
            "min_c": min(temps),
            "mean_c": sum(temps) / len(temps),
            "peak_c": max(temps),
            "samples": len(temps),
            "above_pause_s": time_above(points, pause_at) if pause_at is not None else None,
        }
    return {"id": run_id, "sensor": log.sensor, "guard": guard, "gpus": gpus, "events": [_event(e) for e in log.events]}


def _event(action: Action) -> dict[str, Any]:
    """One event of `heat --json` (README.md): when, what, and the GPU that triggered a pause."""
    return {"time": action.at, "kind": action.kind.value, "gpu": action.gpu, "temp_c": action.temp_c, "node": action.node}
