"""Per-step metrics from Miles log lines and debug events.

Miles logs one Python dict literal per step and kind (see shared/miles-facts.md, "Log lines"):

    (RolloutManager pid=1805485) [2026-04-15 07:57:53] rollout.py:1193 - perf 0: {'perf/rollout_time': 371.18}
    [2026-11-29 11:13:54.120 main] train.py:88 - step 12: {'train/loss': 0.31}

- `perf N` comes twice per rollout id (rollout manager, then trainer); both merge into row N.
- `rollout N` merges into row N; `eval N` too, its keys prefixed `eval/` where they are not already.
- `step N` is the TRAIN step (Megatron logs it twice); it goes to `train_steps`, never to the rows;
  `critic-step N` (PPO critic) too, its bare keys prefixed `critic/`.
- `multi_turn N` merges into row N, its bare keys prefixed `multi_turn/`.
- Colour codes and Ray's `[repeated Nx across cluster]` suffix are removed before parsing.
- Each row gets `t_end` = the timestamp of the last line for that rollout id and `t_start` = the
  previous row's `t_end` (the first timestamp in the logs for the first row). Log timestamps carry
  no zone; they are read as UTC (Miles containers run on UTC).

Parsing scans raw bytes with one compiled regex for candidate lines, so a 100 MB log of mostly
engine chatter costs about one pass of `re.finditer`; only candidate lines are decoded. A payload
that is not a dict literal (a truncated last line, a line cut by another process) is counted in
`malformed` with its location, never fatal. Payloads go through `ast.literal_eval` only; `nan`,
`inf` and numpy-2 reprs such as `np.float64(1.5)` are accepted.

Other trainers' lines (`key=value`, `key: value` and JSON lines naming their step, read by
`ledger.compare.lineformats`) are rows too, keyed by that step, but only for logs that hold no
Miles line at all (a Miles run's own lines are the record, whatever else it prints), and never
from engine.log (the inference engines' lines, no trainer's: `step 4: {...}` there is SGLang's). Once a scan
has seen a Miles line it stops looking for them; before that, `may_hold_metrics` (substring
searches) keeps blocks without a step word away from any regex.

`--save-debug-event-data` writes JSON lines `{"type": "metric", "rollout_id": N, "metrics": {...}}`;
`parse_events` reads them and `merge` lets them win over log numbers, metric by metric.

`metrics.jsonl` (`write_metrics_jsonl`/`read_metrics_jsonl`): a first line `{"meta": {...}}` with
`version`, `sources`, `malformed`, `malformed_examples` and `formats` (which of `FORMATS` the
numbers came from); then one object per rollout id (another trainer's step)
`{"rollout_id": N, "t_start": s|null, "t_end": s|null, "metrics": {...}}` in id order; then one per
train step `{"train_step": N, "metrics": {...}}`. Non-finite values are written as null (strict
JSON) and read back as nan.
"""

from __future__ import annotations

import ast
import calendar
import json
import math
import mmap
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.compare.lineformats import FINDER, JSON_LINES, KEY_VALUE, MetricLine, may_hold_metrics, parse_line
from ledger.fsutil import mapped, write_atomic

METRICS_VERSION = 1
MAX_EXAMPLES = 5
MILES_LINES, METRIC_EVENTS = "miles", "metric events"
# every format ledger reads per-step metrics from, as `MetricsTable.formats` names them
FORMATS = (MILES_LINES, KEY_VALUE, JSON_LINES, METRIC_EVENTS, "jsonl file", "tensorboard")
# what a run without per-step metrics is told, naming what ledger reads (docs/recording.md lists them)
READS = (
    "Miles' `step N: {...}` lines, `step N: key=value` or `key: value` lines, JSON lines with a step "
    "(printed, or in a file a --metrics-* flag names), Miles' metric events and TensorBoard event files"
)
NO_METRICS = f'no per-step metrics found; ledger reads {READS} (docs/recording.md, "Per-step metrics")'
ENGINE_LOG = "engine.log"  # the split log of the inference engines' lines (ledger.capture.stream)
MAX_OTHER_LINE = 64 << 10  # longer lines are no other trainer's metric line (a 200 MB line costs nothing)
_LINE_TIMESTAMP = re.compile(rb"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?")

# Candidate lines: the message part of a Miles line, and its payload (the rest of the line).
# Everything else is checked on the few hits.
_CANDIDATE = re.compile(rb" - (perf|rollout|step|eval|critic-step|multi_turn) (\d+): ([^\n]*)")
_ANSI_TEXT = re.compile(r"\x1b\[[0-9;]*m")
# What precedes " - " on a real Miles line: optional ANSI colour, optional Ray actor prefix
# `(Name pid=N)` / `(Name pid=N, ip=A)`, the timestamp with optional millis and process, file:line.
_ANSI = rb"(?:\x1b\[[0-9;]*m)*"
_HEAD = re.compile(
    _ANSI
    + rb"(?:\([^()\n]*pid=\d+[^()\n]*\)"
    + _ANSI
    + rb"\s+)?\[(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?(?: [^\]\n]*)?\]"
    rb" [\w./<>-]+:\d+"
)
# A whole Miles metric line from its start (`_HEAD`, then `_CANDIDATE`): its seconds, fraction,
# kind, number and payload. `[^\S\n]` is `\s` within one line.
_MILES_LINE = re.compile(
    rb"^"
    + _ANSI
    + rb"(?:\([^()\n]*pid=\d+[^()\n]*\)"
    + _ANSI
    + rb"[^\S\n]+)?\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:[.,](\d{1,6}))?(?: [^\]\n]*)?\]"
    rb" [\w./<>-]+:\d+ - (perf|rollout|step|eval|critic-step|multi_turn) (\d+): ([^\n]*)",
    re.MULTILINE,
)
_ANY_TIMESTAMP = re.compile(rb"\[(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?")
# Ray's log deduplication appends this to a repeated line.
_RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
_NON_LITERAL = re.compile(r"\bnp\.\w+\(([^()]*)\)|(?<![\w'\"])-?(?:nan|inf)(?![\w'\"])")


@dataclass(slots=True)
class StepRow:
    """Metrics of one rollout id, with the wall-clock span it covers (unix seconds, UTC)."""

    step: int
    t_start: float | None
    t_end: float | None
    metrics: dict[str, float]


@dataclass
class MetricsTable:
    """Per-step metrics of one run: rows by rollout id, train-step metrics apart."""

    rows: dict[int, StepRow] = field(default_factory=dict)
    train_steps: dict[int, dict[str, float]] = field(default_factory=dict)
    malformed: int = 0
    malformed_examples: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)  # of FORMATS, in the order first seen

    def has_metrics(self) -> bool:
        """Whether any step logged anything."""
        return bool(self.rows or self.train_steps)

    def add_format(self, fmt: str) -> None:
        if fmt not in self.formats:
            self.formats.append(fmt)

    def _note_malformed(self, where: str) -> None:
        self.malformed += 1
        if len(self.malformed_examples) < MAX_EXAMPLES:
            self.malformed_examples.append(where)


def _unix(groups: tuple[bytes | None, ...]) -> float:
    y, mo, d, h, mi, s, frac = groups
    assert y and mo and d and h and mi and s
    seconds = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(s), 0, 0, 0))
    return seconds + (int(frac) / 10 ** len(frac) if frac else 0.0)


def _numbers(payload: Any) -> dict[str, float] | None:
    """The numeric entries of a parsed payload, or None when it is not a dict."""
    if not isinstance(payload, dict):
        return None
    out: dict[str, float] = {}
    for key, value in payload.items():
        if isinstance(value, bool) or not isinstance(key, str):
            continue
        if isinstance(value, (int, float)):
            out[key] = float(value)
        elif value is None:  # stands for nan after _literal's rewrite, or a real None
            out[key] = math.nan
    return out


# The shape of nearly every Miles payload, `{'perf/rollout_time': 371.18, 'train/loss': nan}`: a
# flat dict of quoted keys and plain numbers, read by two regexes ~10x faster than `ast` (the
# parse of a big log's metric lines is most of its cost). Anything else goes to `_literal`.
_NUMBER = r"-?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"
_PAIR = r"'[^'\\\n]*': " + _NUMBER
_FLAT_DICT = re.compile(r"\{(?:" + _PAIR + r"(?:, " + _PAIR + r")*)?\}")
_FLAT_PAIRS = re.compile(r"'([^'\\\n]*)': (" + _NUMBER + ")")


def _payload_numbers(text: str) -> dict[str, float] | None:
    """The numbers of a payload: the flat-dict fast path, else `_literal` and `_numbers`."""
    if _FLAT_DICT.fullmatch(text):
        return {key: float(value) for key, value in _FLAT_PAIRS.findall(text)}
    return _numbers(_literal(text))


# A flat dict that reads the same as JSON once its quotes are swapped: printable ASCII keys
# without quotes or backslashes, JSON's own numbers. Such payloads of a block are parsed by one
# `json.loads` call (`_json_payloads`), with `parse_int=float`: each number is `float` of its
# text, as `_payload_numbers` gives it. Any other payload takes `_payload_numbers`.
_JSON_KEY = rb"'[ !#-&(-\[\]-~]*'"
_JSON_NUMBER = rb"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?"
_JSON_PAIR = _JSON_KEY + rb": " + _JSON_NUMBER
_JSON_DICT = re.compile(rb"\{(?:" + _JSON_PAIR + rb"(?:, " + _JSON_PAIR + rb")*)?\}")


def _json_payloads(payloads: list[bytes]) -> list[dict[str, float]]:
    """The numbers of payloads that all match `_JSON_DICT`, in one C-level parse (none where
    that parse fails: each then takes `_payload_numbers`)."""
    if not payloads:
        return []
    text = b"".join([b"[", b",".join(payloads).replace(b"'", b'"'), b"]"])
    try:
        parsed: list[dict[str, float]] = json.loads(text, parse_int=float)
    except (ValueError, RecursionError):
        return []
    return parsed


# a candidate line: its start, kind, number, payload, time and whether it lacks its newline
_Found = tuple[int, bytes, int, bytes, float, bool]
_BATCH = 4096


def _slow_payload(payload: bytes) -> dict[str, float] | None:
    """The numbers of one payload as it was printed (colour codes and Ray's repeat note removed),
    or None when it is not a dict literal."""
    text = payload.decode("utf-8", "replace")
    text = _RAY_REPEATED.sub("", _ANSI_TEXT.sub("", text)).strip()
    try:
        return _payload_numbers(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _literal(text: str) -> Any:
    """`ast.literal_eval`, retried with `nan`/`inf`/`np.float64(x)` rewritten to literals."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass

    def fix(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return m.group(1)
        word = m.group(0)
        return "None" if word.endswith("nan") else word.replace("inf", "1e999")

    return ast.literal_eval(_NON_LITERAL.sub(fix, text))


class LogScan:
    """Accumulates rows over several log files, a whole file or a block of lines at a time."""

    def __init__(self) -> None:
        self.table = MetricsTable()
        self.last_seen: dict[int, float] = {}
        self.first_ts: float | None = None
        self._no_timestamp_yet: set[str] = set()
        # other trainers' metric lines (`lineformats`), kept apart: used when no Miles line is seen
        self.other = MetricsTable()
        self.other_seen: dict[int, float] = {}
        self._seconds: dict[bytes, float] = {}  # `_stamp`'s

    def scan(self, path: Path) -> None:
        with mapped(path) as data:
            self.scan_bytes(data, path)

    def scan_bytes(self, data: bytes | mmap.mmap, path: Path, line_base: int = 0) -> None:
        """Scan whole lines of `path` (a whole file, or, streamed, the next block of it: a block
        starts at a line start; `line_base` is the number of lines before it)."""
        key = str(path)
        if key not in self.table.sources:
            self.table.sources.append(key)
            self._no_timestamp_yet.add(key)
        if key in self._no_timestamp_yet:  # a file's first timestamp, whichever block holds it
            first = _ANY_TIMESTAMP.search(data)
            if first is not None:
                ts = _unix(first.groups())
                self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
                self._no_timestamp_yet.discard(key)
        if _CANDIDATE.search(data) is not None and self._all_at_once(data):
            pass
        else:
            self._line_by_line(data, path, line_base)
        if not self.table.has_metrics() and path.name != ENGINE_LOG and may_hold_metrics(data):
            self._scan_other(data)

    def _all_at_once(self, data: bytes | mmap.mmap) -> bool:
        """The usual block, whose Miles lines all carry JSON-shaped payloads: every line read by one
        `findall` and one `json.loads`, Python then only adding each to its row. False (nothing
        added) for any other block, which `_line_by_line` reads."""
        found = _MILES_LINE.findall(data)
        payloads = [f[4] for f in found]
        if not all(map(_JSON_DICT.fullmatch, payloads)):
            return False
        numbers = _json_payloads(payloads)
        if len(numbers) != len(found):
            return False
        seconds = self._seconds
        if len(seconds) > 100_000:
            seconds.clear()
        for key in {f[0] for f in found} - seconds.keys():
            stamp = _LINE_TIMESTAMP.match(key)
            assert stamp is not None  # the same digits `_MILES_LINE` matched
            seconds[key] = _unix(stamp.groups())
        fractions = {frac: int(frac) / 10 ** len(frac) if frac else 0.0 for frac in {f[1] for f in found}}
        add_step = self._add_step
        for (key, frac, kind, number_text, _), metrics in zip(found, numbers):
            ts = seconds[key] + fractions[frac]
            number = int(number_text)
            if kind != b"perf" and kind != b"rollout":
                self._add(kind.decode(), number, metrics, ts)
                continue
            add_step(number, metrics, ts)
        if found:
            self.table.add_format(MILES_LINES)
        return True

    def _line_by_line(self, data: bytes | mmap.mmap, path: Path, line_base: int) -> None:
        """Each Miles line of a block on its own: its payload read as it was printed, a malformed
        one counted with its line number."""
        # the candidate lines with a Miles head are gathered a batch at a time, then their payloads
        # parsed (the JSON-shaped ones of a batch in one call), then each line taken in order
        found: list[_Found] = []
        counted = [0, line_base + 1]  # the line number of offset counted[0], for malformed examples
        for m in _CANDIDATE.finditer(data):
            start = data.rfind(b"\n", 0, m.start()) + 1
            head = _HEAD.fullmatch(data, start, m.start())
            if head is None:
                continue  # the words occur inside some other message
            kind, number, payload = m.group(1, 2, 3)
            found.append((start, kind, int(number), payload, self._stamp(data, head), m.end() == len(data)))
            if len(found) >= _BATCH:
                self._take(found, data, path, counted)
                found = []
        self._take(found, data, path, counted)

    def _add_step(self, number: int, metrics: dict[str, float], ts: float) -> None:
        """A `perf`/`rollout` line's metrics into its step's row, the step's last time kept."""
        row = self.table.rows.get(number)
        if row is None:
            row = self.table.rows[number] = StepRow(number, None, None, {})
        row.metrics.update(metrics)
        seen = self.last_seen.get(number)
        self.last_seen[number] = ts if seen is None or ts >= seen else seen

    def _take(self, found: list[_Found], data: bytes | mmap.mmap, path: Path, counted: list[int]) -> None:
        """Add the candidate lines of `found` (in line order); count the malformed ones. A
        `perf`/`rollout` line (all but a few of a big log's) is added here, the rest by `_add`."""
        fast = [i for i, f in enumerate(found) if _JSON_DICT.fullmatch(f[3])]
        numbers: list[dict[str, float] | None] = [None] * len(found)
        for i, parsed in zip(fast, _json_payloads([found[i][3] for i in fast])):
            numbers[i] = parsed
        add_step, added = self._add_step, False
        for (start, kind_bytes, number, payload, ts, truncated), metrics in zip(found, numbers):
            if metrics is None:
                metrics = _slow_payload(payload)
            if metrics is None:
                if len(self.table.malformed_examples) < MAX_EXAMPLES:  # line numbers cost a count
                    counted[1] += data[counted[0] : start].count(b"\n")
                    counted[0] = start
                why = "truncated last line" if truncated else "payload is not a dict literal"
                self.table._note_malformed(f"{path.name}:{counted[1]}: {kind_bytes.decode()} {number}: {why}")
                continue
            if kind_bytes != b"perf" and kind_bytes != b"rollout":
                self._add(kind_bytes.decode(), number, metrics, ts)
                continue
            added = True
            add_step(number, metrics, ts)
        if added:
            self.table.add_format(MILES_LINES)

    def _stamp(self, data: bytes | mmap.mmap, head: re.Match[bytes]) -> float:
        """The unix time of a line's head; the seconds of each distinct `YYYY-MM-DD HH:MM:SS`
        are worked out once (the lines of one step share them)."""
        key = data[head.start(1) : head.end(6)]
        seconds = self._seconds.get(key)
        if seconds is None:
            if len(self._seconds) > 100_000:
                self._seconds.clear()
            seconds = self._seconds[key] = _unix((*head.groups()[:6], None))
        frac = head.group(7)
        return seconds + int(frac) / 10 ** len(frac) if frac else seconds

    def _scan_other(self, data: bytes | mmap.mmap) -> None:
        """Other trainers' metric lines in whole lines of `data` (see `ledger.compare.lineformats`)."""
        done_to = -1
        for m in FINDER.finditer(data):
            if m.start() < done_to:
                continue  # a line already read (several step words on it)
            start = data.rfind(b"\n", 0, m.start()) + 1
            end = data.find(b"\n", m.end())
            done_to = end = len(data) if end < 0 else end
            if end - start > MAX_OTHER_LINE:
                continue
            text = data[start:end].decode("utf-8", "replace")
            parsed = parse_line(_RAY_REPEATED.sub("", text) if "[repeated " in text else text)
            if parsed is not None:
                stamp = _LINE_TIMESTAMP.search(data, start, end)
                self._add_other(parsed, _unix(stamp.groups()) if stamp else None)

    def _add_other(self, line: MetricLine, ts: float | None) -> None:
        row = self.other.rows.get(line.step)
        if row is None:
            row = self.other.rows[line.step] = StepRow(line.step, None, None, {})
        row.metrics.update(line.metrics)
        self.other.add_format(line.fmt)
        if ts is not None:
            self.other_seen[line.step] = max(ts, self.other_seen.get(line.step, ts))

    def absorb(self, later: LogScan) -> None:
        """Add what `later` scanned (other files) as if it had been scanned after this scan's
        files: the result equals one scan over all the files in that order."""
        for number, row in later.table.rows.items():
            mine = self.table.rows.get(number)
            if mine is None:
                self.table.rows[number] = StepRow(number, None, None, dict(row.metrics))
            else:
                mine.metrics.update(row.metrics)
            ts = later.last_seen[number]
            self.last_seen[number] = max(ts, self.last_seen.get(number, ts))
        for number, metrics in later.table.train_steps.items():
            self.table.train_steps.setdefault(number, {}).update(metrics)
        for example in later.table.malformed_examples:
            if len(self.table.malformed_examples) < MAX_EXAMPLES:
                self.table.malformed_examples.append(example)
        self.table.malformed += later.table.malformed
        self.table.sources.extend(s for s in later.table.sources if s not in self.table.sources)
        for fmt in later.table.formats:
            self.table.add_format(fmt)
        for number, row in later.other.rows.items():
            self.other.rows.setdefault(number, StepRow(number, None, None, {})).metrics.update(row.metrics)
            if number in later.other_seen:
                ts = later.other_seen[number]
                self.other_seen[number] = max(ts, self.other_seen.get(number, ts))
        for fmt in later.other.formats:
            self.other.add_format(fmt)
        if later.first_ts is not None:
            self.first_ts = later.first_ts if self.first_ts is None else min(self.first_ts, later.first_ts)

    def _add(self, kind: str, number: int, metrics: dict[str, float], ts: float) -> None:
        self.table.add_format(MILES_LINES)
        if kind in ("step", "critic-step"):  # critic-step N: the PPO critic's train step N
            if kind == "critic-step":
                metrics = {(k if "/" in k else f"critic/{k}"): v for k, v in metrics.items()}
            self.table.train_steps.setdefault(number, {}).update(metrics)
            return
        if kind == "multi_turn":
            metrics = {(k if "/" in k else f"multi_turn/{k}"): v for k, v in metrics.items()}
        if kind == "eval":
            metrics = {(k if k.startswith("eval/") else f"eval/{k}"): v for k, v in metrics.items()}
        row = self.table.rows.get(number)
        if row is None:
            row = self.table.rows[number] = StepRow(number, None, None, {})
        row.metrics.update(metrics)
        self.last_seen[number] = max(ts, self.last_seen.get(number, ts))

    def finish(self) -> MetricsTable:
        if not self.table.has_metrics() and self.other.rows:  # no Miles line: the other formats count
            self.table.rows, self.last_seen = self.other.rows, self.other_seen
            self.table.formats = list(self.other.formats)
        previous = self.first_ts
        ordered = {}
        for number in sorted(self.table.rows):
            row = self.table.rows[number]
            row.t_end = self.last_seen.get(number)
            row.t_start = previous
            previous = row.t_end
            ordered[number] = row
        self.table.rows = ordered
        self.table.train_steps = dict(sorted(self.table.train_steps.items()))
        return self.table


def parse_logs(paths: Iterable[Path]) -> MetricsTable:
    """Per-step metrics from Miles log files (missing files are skipped, not errors)."""
    scan = LogScan()
    for path in paths:
        if Path(path).is_file():
            scan.scan(Path(path))
    return scan.finish()


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def parse_events(directory: Path) -> MetricsTable:
    """Per-step metrics from the `metric` events of `--save-debug-event-data` (`*.jsonl`).

    Events with a train `step` and no `rollout_id` go to `train_steps`; eval rollout ids
    (`eval_<n>`) and other event types are ignored. A line that is not JSON is counted as
    malformed. A missing directory gives an empty table.
    """
    table = MetricsTable()
    directory = Path(directory)
    if not directory.is_dir():
        return table
    for path in sorted(directory.glob("*.jsonl")):
        table.sources.append(str(path))
        with open(path, "rb") as fh:
            for line_no, line in enumerate(fh, 1):
                if b'"metric"' not in line:
                    continue  # cheap filter: most events are not metrics
                try:
                    event = json.loads(line)
                except ValueError:
                    table._note_malformed(f"{path.name}:{line_no}: not a JSON object")
                    continue
                if not isinstance(event, dict) or event.get("type") != "metric":
                    continue
                metrics = _numbers(event.get("metrics"))
                if metrics is None:
                    table._note_malformed(f"{path.name}:{line_no}: metrics is not an object")
                    continue
                rollout_id = _as_int(event.get("rollout_id"))
                train_step = _as_int(event.get("step"))
                table.add_format(METRIC_EVENTS)
                if rollout_id is not None:
                    row = table.rows.get(rollout_id)
                    if row is None:
                        row = table.rows[rollout_id] = StepRow(rollout_id, None, None, {})
                    row.metrics.update(metrics)
                elif train_step is not None:
                    table.train_steps.setdefault(train_step, {}).update(metrics)
    table.rows = dict(sorted(table.rows.items()))
    table.train_steps = dict(sorted(table.train_steps.items()))
    return table


def merge(log_table: MetricsTable, event_table: MetricsTable) -> MetricsTable:
    """One table from both sources: event metrics win per metric name; times come from the logs."""
    out = MetricsTable(
        malformed=log_table.malformed + event_table.malformed,
        malformed_examples=(log_table.malformed_examples + event_table.malformed_examples)[:MAX_EXAMPLES],
        sources=log_table.sources + event_table.sources,
        formats=list(dict.fromkeys(log_table.formats + event_table.formats)),
    )
    for number in sorted(set(log_table.rows) | set(event_table.rows)):
        log_row = log_table.rows.get(number)
        event_row = event_table.rows.get(number)
        timed = log_row or event_row
        assert timed is not None
        metrics = dict(log_row.metrics) if log_row else {}
        if event_row:
            metrics.update(event_row.metrics)
        out.rows[number] = StepRow(number, timed.t_start, timed.t_end, metrics)
    for number in sorted(set(log_table.train_steps) | set(event_table.train_steps)):
        merged = dict(log_table.train_steps.get(number, {}))
        merged.update(event_table.train_steps.get(number, {}))
        out.train_steps[number] = merged
    return out


# one encoder for all rows: `json.dumps(..., allow_nan=False)` builds a new one per call (a third
# of the time of writing 40,000 rows); the output is the same
_ROW_ENCODER = json.JSONEncoder(allow_nan=False)


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
        record: dict[str, Any] = {"rollout_id": number, "t_start": row.t_start, "t_end": row.t_end}
        record["metrics"] = _finite_or_none(row.metrics)
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


def _plain_time(value: Any) -> bool:
    return value is None or type(value) is float or type(value) is int


def _read_plain_row(table: MetricsTable, record: dict[str, Any]) -> bool:
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
        table._note_malformed(f"{where}: not a JSON object")
        return
    if "meta" in record and "rollout_id" not in record and "train_step" not in record:
        _read_meta(table, record["meta"])
        return
    step = record.get("rollout_id", record.get("train_step"))
    if type(step) is not int:
        table._note_malformed(f"{where}: its step is not an integer")
        return
    metrics, bad = _record_metrics(record.get("metrics"))
    t_start, t_end = record.get("t_start"), record.get("t_end")
    if bad or any(t is not None and not _is_number(t) for t in (t_start, t_end)):
        table._note_malformed(f"{where}: a value that is not a number (left out)")
    if "rollout_id" in record:
        table.rows[step] = StepRow(step, _time(t_start), _time(t_end), metrics)
    else:
        table.train_steps[step] = metrics


def read_metrics_jsonl(path: Path) -> MetricsTable:
    """Read a metrics.jsonl written by `write_metrics_jsonl`; unreadable lines count as malformed,
    and so do values of the wrong type (a pulled file is someone else's: see `_read_record`)."""
    records, bad = _records(Path(path).read_text(encoding="utf-8", errors="replace"))
    table = MetricsTable()
    name = Path(path).name
    for line_no in bad:
        table._note_malformed(f"{name}:{line_no}: not a JSON object")
    for i, record in enumerate(records, 1):
        _read_record(table, record, f"{name}, record {i}")
    return table


_ROLLOUT_LINE = re.compile(rb" - (?:perf|rollout) (\d+): ")


def last_step(data: bytes) -> tuple[int, str | None] | None:
    """The last rollout id in a piece of Miles log (`perf N:` / `rollout N:` lines), and the
    timestamp of that line as `YYYY-MM-DD HH:MM:SS` (None when the line has none). Without a
    Miles line, the step of the last of another trainer's metric lines (`lineformats`)."""
    found = None
    for match in _ROLLOUT_LINE.finditer(data):
        found = match
    if found is None:
        return _last_other_step(data)
    start = data.rfind(b"\n", 0, found.start()) + 1
    return int(found.group(1)), _when(_ANY_TIMESTAMP.search(data, start, found.start()))


def _when(stamp: re.Match[bytes] | None) -> str | None:
    if stamp is None:
        return None
    y, mo, d, h, mi, s = (g.decode() for g in stamp.groups()[:6])
    return f"{y}-{mo}-{d} {h}:{mi}:{s}"


LAST_STEP_TRIES = 200  # lines with a step word tried, newest first, before giving up


def _last_other_step(data: bytes) -> tuple[int, str | None] | None:
    if not may_hold_metrics(data):
        return None
    tried = 0
    for line in reversed(data.split(b"\n")):
        if len(line) > MAX_OTHER_LINE or not may_hold_metrics(line):
            continue
        parsed = parse_line(line.decode("utf-8", "replace"))
        if parsed is not None:
            return parsed.step, _when(_LINE_TIMESTAMP.search(line))
        tried += 1
        if tried >= LAST_STEP_TRIES:
            break
    return None
