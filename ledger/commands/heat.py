"""`ledger heat RUN`: a run's temperatures over time, with pauses and step boundaries."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ledger.compare.metrics_store import load_metrics
from ledger.errors import LedgerError
from ledger.heat.heatlog import read_heat_log
from ledger.heat.summary import render_heat_summary
from ledger.runref import resolve
from ledger.storage.branch import listing_for
from ledger.storage.store import read_file_at


def heat_report(start: Path, name: str, png: Path | None) -> str:
    """The terminal summary of a run's heat log; also a PNG when `png` is given."""
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
    text = f"run {entry.id}\n" + render_heat_summary(log, steps or None)
    if png is not None:
        from ledger.heat.plot import plot_heat_png

        plot_heat_png(log, steps or None, png)
        text += f"plot written to {png}\n"
    return text
