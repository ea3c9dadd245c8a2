"""Scalars of TensorBoard event files, read with TensorBoard's own reader. The only module that
imports `tensorboard` (lazily, ~0.6 s, and only when a run wrote event files; optional extra
`tensorboard`).

Miles (`--use-tensorboard`) and torch's `SummaryWriter` write one `add_scalar(tag, value, step)`
per metric: `simple_value` scalars. TF2's `tf.summary.scalar` writes 0-d tensors of the `scalars`
plugin; both are read. Each file is read on its own, every event kept (the reader samples 10,000
per tag unless told otherwise); a step's row ends at its last event's wall time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ledger.errors import LedgerError
from ledger.installhint import install_hint
from ledger.metrics.table import MetricsTable, StepRow

FORMAT = "tensorboard"
EVENT_GLOB = "events.out.tfevents.*"


class TensorBoardMissing(LedgerError):
    """Event files are there, but the `tensorboard` package is not."""


def event_files(directory: Path, since: float | None = None) -> list[Path]:
    """The event files under `directory` (any depth), last modified at or after `since` (unix
    seconds: the run's start; older files are another run's), in name order."""
    if not directory.is_dir():
        return []
    out = []
    for path in sorted(directory.rglob(EVENT_GLOB)):
        try:
            if path.is_file() and (since is None or path.stat().st_mtime >= since):
                out.append(path)
        except OSError:
            continue
    return out


def _reader(path: Path) -> Any:
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError as exc:
        raise TensorBoardMissing(
            f"{path.parent} holds TensorBoard event files, but the tensorboard package is not installed: not read",
            install_hint("tensorboard", "tensorboard"),
        ) from exc
    keep_all = {event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0}
    acc = event_accumulator.EventAccumulator(str(path), size_guidance=keep_all)
    acc.Reload()
    return acc


def _scalars(acc: Any) -> Iterable[tuple[str, int, float, float]]:
    """(tag, step, wall time, value) of every scalar, `simple_value` and scalar-plugin tensors alike."""
    tags = acc.Tags()
    for tag in tags.get("scalars", []):
        for e in acc.Scalars(tag):
            yield tag, int(e.step), float(e.wall_time), float(e.value)
    tensor_tags = [t for t in tags.get("tensors", []) if acc.SummaryMetadata(t).plugin_data.plugin_name == "scalars"]
    if tensor_tags:
        from tensorboard.util import tensor_util

        for tag in tensor_tags:
            for e in acc.Tensors(tag):
                value = tensor_util.make_ndarray(e.tensor_proto)
                if value.size == 1:
                    yield tag, int(e.step), float(e.wall_time), float(value.reshape(()).item())


def parse_event_files(files: Iterable[Path]) -> MetricsTable:
    """One row per step of the scalars in `files` (a later file's value of a tag wins).
    Raises TensorBoardMissing when the tensorboard package is not installed."""
    table = MetricsTable()
    ends: dict[int, float] = {}
    for path in files:
        table.sources.append(str(path))
        for tag, step, wall, value in _scalars(_reader(path)):
            row = table.rows.get(step)
            if row is None:
                row = table.rows[step] = StepRow(step, None, None, {})
            row.metrics[tag] = value
            if math.isfinite(wall):
                ends[step] = max(wall, ends.get(step, wall))
    previous: float | None = None  # (the first step's start is not in the events)
    for step in sorted(table.rows):
        row = table.rows[step]
        row.t_start, row.t_end = previous, ends.get(step)
        previous = row.t_end if row.t_end is not None else previous
    table.rows = dict(sorted(table.rows.items()))
    if table.rows:
        table.add_format(FORMAT)
    return table
