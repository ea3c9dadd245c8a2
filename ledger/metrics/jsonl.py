"""`metrics.jsonl`, a run's per-step metrics as committed, written and read.

A first line `{"meta": {...}}` with `version`, `sources`, `malformed`, `malformed_examples` and
`formats` (which of `ledger.metrics.table.FORMATS` the numbers came from); then one object per
rollout id (another trainer's step) `{"rollout_id": N, "t_start": s|null, "t_end": s|null,
"metrics": {...}}` in id order; then one per train step `{"train_step": N, "metrics": {...}}`.
Non-finite values are written as null (strict JSON) and read back as nan. A pulled file is
someone else's: every value is checked for its type on the way in.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any, TypedDict, TypeGuard

import msgspec
from msgspec import UNSET, UnsetType

from ledger.fsutil import write_atomic
from ledger.metrics.events import merge, parse_events
from ledger.metrics.table import MAX_EXAMPLES, MetricsTable, StepRow

METRICS_VERSION = 1


# one encoder for all rows: `json.dumps(..., allow_nan=False)` builds a new one per call (a third
# of the time of writing 40,000 rows); the output is the same
_ROW_ENCODER = json.JSONEncoder(allow_nan=False)


class RolloutLine(TypedDict):
    """One rollout's line of metrics.jsonl (the module docstring), as written."""

    rollout_id: int
    t_start: float | None
    t_end: float | None
    metrics: dict[str, float | None]  # a non-finite value as null


def _finite_or_none(metrics: dict[str, float]) -> dict[str, float | None]:
    return {k: (v if math.isfinite(v) else None) for k, v in metrics.items()}


def write_metrics_jsonl(path: Path, table: MetricsTable) -> None:
    """Write `table` as metrics.jsonl (format in the module docstring), replacing `path` atomically."""
    meta = {
        "version": METRICS_VERSION,
        "sources": table.sources,
        "malformed": table.malformed,
        "malformed_examples": table.malformed_examples,
        "formats": table.formats,
    }
    lines = [json.dumps({"meta": meta}, sort_keys=True)]
    for number in sorted(table.rows):
        row = table.rows[number]
        record: RolloutLine = {"rollout_id": number, "t_start": row.t_start, "t_end": row.t_end, "metrics": _finite_or_none(row.metrics)}
        lines.append(_ROW_ENCODER.encode(record))
    for number in sorted(table.train_steps):
        step = {"train_step": number, "metrics": _finite_or_none(table.train_steps[number])}
        lines.append(_ROW_ENCODER.encode(step))
    write_atomic(Path(path), "\n".join(lines) + "\n")


def write_run_metrics(run_dir: Path, data_dir: Path, table: MetricsTable) -> tuple[bool, int, MetricsTable]:
    """A run's `metrics.jsonl`: the log metrics merged with its debug events (`data_dir/events`,
    which win). Returns whether there were metrics to write, how many lines were malformed, and
    the table written."""
    events = data_dir / "events"
    if events.is_dir():
        table = merge(table, parse_events(events))
    written = bool(table.rows or table.train_steps)
    if written:
        write_metrics_jsonl(run_dir / "metrics.jsonl", table)
    return written, table.malformed, table


def _records(text: str) -> tuple[list[Any], list[int]]:
    """All JSON lines of `text`; one `json.loads` call for a clean file, per line otherwise."""
    try:  # one C-level pass: lines become array elements
        return json.loads("[" + text.strip().replace("\n", ",") + "]"), []
    except ValueError:
        pass
    lines = [line for line in text.split("\n") if line.strip()]
    records, bad = [], []
    for i, line in enumerate(lines, 1):
        try:
            records.append(json.loads(line))
        except ValueError:
            bad.append(i)
    return records, bad


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _record_metrics(raw: Any) -> tuple[dict[str, float], bool]:
    """A metrics.jsonl record's metrics (null reads as nan), and whether it held anything that is
    not a number (left out: a pulled `"train/loss": "abc"` never reaches a chart or a statistic)."""
    if not isinstance(raw, dict):
        return {}, raw is not None
    if all(type(v) is float or type(v) is int for v in raw.values()):  # what ledger writes, fast
        return raw, False
    out = {k: (math.nan if v is None else v) for k, v in raw.items() if v is None or _is_number(v)}
    return out, len(out) < len(raw)


def _time(value: Any) -> float | None:
    return float(value) if _is_number(value) else None


def _read_meta(table: MetricsTable, meta: Any) -> None:
    """The first line's `meta`: sources, malformed count and examples, where they have their types."""
    if not isinstance(meta, dict):
        return
    sources, malformed, examples = meta.get("sources"), meta.get("malformed"), meta.get("malformed_examples")
    if isinstance(sources, list):
        table.sources = [str(x) for x in sources if isinstance(x, str)]
    formats = meta.get("formats")
    if isinstance(formats, list):
        table.formats = [x for x in formats if isinstance(x, str)]
    if type(malformed) is int and malformed >= 0:
        table.malformed += malformed
    if isinstance(examples, list):
        table.malformed_examples = ([x for x in examples if isinstance(x, str)] + table.malformed_examples)[:MAX_EXAMPLES]


def _plain_time(value: object) -> TypeGuard[float | int | None]:
    return value is None or type(value) is float or type(value) is int


def _read_plain_row(table: MetricsTable, record: dict[str, object]) -> bool:
    """A row exactly as `write_metrics_jsonl` writes it (all of a file ledger wrote), added
    without `_read_record`'s checks one by one; False for any other shape, which they then read."""
    raw = record.get("metrics")
    if type(raw) is not dict or not all(type(v) is float or type(v) is int for v in raw.values()):
        return False
    if len(record) == 4:
        step, t_start, t_end = record.get("rollout_id"), record.get("t_start"), record.get("t_end")
        if type(step) is not int or not _plain_time(t_start) or not _plain_time(t_end) or "t_start" not in record or "t_end" not in record:
            return False
        table.rows[step] = StepRow(step, None if t_start is None else float(t_start), None if t_end is None else float(t_end), raw)
        return True
    step = record.get("train_step")
    if len(record) != 2 or type(step) is not int:
        return False
    table.train_steps[step] = raw
    return True


def _read_record(table: MetricsTable, record: Any, where: str) -> None:
    """One line of metrics.jsonl into `table`; a line whose step is no integer, or whose values
    are not numbers, counts as malformed (the rest of the line is kept)."""
    if type(record) is dict and _read_plain_row(table, record):
        return
    if not isinstance(record, dict):
        table.note_malformed(f"{where}: not a JSON object")
        return
    if "meta" in record and "rollout_id" not in record and "train_step" not in record:
        _read_meta(table, record["meta"])
        return
    step = record.get("rollout_id", record.get("train_step"))
    if type(step) is not int:
        table.note_malformed(f"{where}: its step is not an integer")
        return
    metrics, bad = _record_metrics(record.get("metrics"))
    t_start, t_end = record.get("t_start"), record.get("t_end")
    if bad or any(t is not None and not _is_number(t) for t in (t_start, t_end)):
        table.note_malformed(f"{where}: a value that is not a number (left out)")
    if "rollout_id" in record:
        table.rows[step] = StepRow(step, _time(t_start), _time(t_end), metrics)
    else:
        table.train_steps[step] = metrics


class _PlainLine(msgspec.Struct, forbid_unknown_fields=True):
    """A row or train step exactly as `write_metrics_jsonl` writes it (a key it never writes, a
    null metric, a bool, a step that is no integer: not this shape)."""

    metrics: dict[str, int | float]
    rollout_id: int | UnsetType = UNSET
    train_step: int | UnsetType = UNSET
    t_start: float | None | UnsetType = UNSET
    t_end: float | None | UnsetType = UNSET


_PLAIN_LINES = msgspec.json.Decoder(list[_PlainLine])


def _after_meta(table: MetricsTable, raw: bytes, name: str) -> bytes | None:
    """The lines after a first `{"meta": ...}` line, read into `table` (all of `raw` when there is
    none); None when that line is not the one object `write_metrics_jsonl` writes."""
    first, _, rest = raw.partition(b"\n")
    if not first.startswith(b'{"meta"'):
        return raw
    try:
        meta = json.loads(first)
    except ValueError:
        return None
    if type(meta) is not dict or len(meta) != 1:
        return None
    _read_record(table, meta, f"{name}, record 1")
    return rest


def _plain_table(raw: bytes, name: str) -> MetricsTable | None:
    """The table of a file all of whose lines are as ledger writes them, decoded and checked in
    one C-level pass (msgspec); None for any other file, which `_read_record` reads line by line
    (with the same result for this shape)."""
    table = MetricsTable()
    rest = _after_meta(table, raw.strip(), name)
    if rest is None:
        return None
    try:
        lines = _PLAIN_LINES.decode(b"[" + rest.replace(b"\n", b",") + b"]")
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    return table if all(map(functools.partial(_add_plain, table), lines)) else None


def _add_plain(table: MetricsTable, line: _PlainLine) -> bool:
    """A decoded line into `table` when it is a row (step, both times) or a train step (no
    times); False for any other mix of keys."""
    if line.train_step is UNSET:
        if line.rollout_id is UNSET or line.t_start is UNSET or line.t_end is UNSET:
            return False
        table.rows[line.rollout_id] = StepRow(line.rollout_id, line.t_start, line.t_end, line.metrics)  # type: ignore[arg-type]
        return True
    if line.rollout_id is UNSET and line.t_start is UNSET and line.t_end is UNSET:
        table.train_steps[line.train_step] = line.metrics  # type: ignore[assignment]
        return True
    return False


def read_metrics_jsonl(path: Path) -> MetricsTable:
    """Read a metrics.jsonl written by `write_metrics_jsonl`; unreadable lines count as malformed,
    and so do values of the wrong type (a pulled file is someone else's: see `_read_record`)."""
    return metrics_from_bytes(Path(path).read_bytes(), Path(path).name)


def metrics_from_bytes(raw: bytes, name: str) -> MetricsTable:
    """`read_metrics_jsonl` of a file's bytes; `name` is the file named in malformed examples."""
    plain = _plain_table(raw, name)
    if plain is not None:
        return plain
    records, bad = _records(raw.decode("utf-8", errors="replace"))
    table = MetricsTable()
    for line_no in bad:
        table.note_malformed(f"{name}:{line_no}: not a JSON object")
    for i, record in enumerate(records, 1):
        _read_record(table, record, f"{name}, record {i}")
    return table
