"""Per-step metrics from Miles log lines (and other trainers' lines).

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
`malformed` with its location, never fatal. Payloads are read by `ledger.metrics.payloads`.

Other trainers' lines (`key=value`, `key: value` and JSON lines naming their step, read by
`ledger.metrics.lineformats`) are rows too, keyed by that step, but only for logs that hold no
Miles line at all (a Miles run's own lines are the record, whatever else it prints), and never
from engine.log (the inference engines' lines, no trainer's: `step 4: {...}` there is SGLang's). Once a scan
has seen a Miles line it stops looking for them; before that, `may_hold_metrics` (substring
searches) keeps blocks without a step word away from any regex.

Debug events are `ledger.metrics.events`'; `metrics.jsonl` is `ledger.metrics.jsonl`'s.
"""

from __future__ import annotations

import calendar
import mmap
import re
from collections.abc import Iterable
from pathlib import Path

from ledger.fsutil import mapped
from ledger.metrics.lineformats import FINDER, MetricLine, may_hold_metrics, parse_line
from ledger.metrics.payloads import JSON_DICT, RAY_REPEATED, json_payloads, slow_payload
from ledger.metrics.table import MAX_EXAMPLES, MILES_LINES, MetricsTable, StepRow

ENGINE_LOG = "engine.log"  # the split log of the inference engines' lines (ledger.capture.stream)
MAX_OTHER_LINE = 64 << 10  # longer lines are no other trainer's metric line (a 200 MB line costs nothing)
_LINE_TIMESTAMP = re.compile(rb"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?")

# Candidate lines: the message part of a Miles line, and its payload (the rest of the line).
# Everything else is checked on the few hits.
_CANDIDATE = re.compile(rb" - (perf|rollout|step|eval|critic-step|multi_turn) (\d+): ([^\n]*)")
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


def _unix(groups: tuple[bytes | None, ...]) -> float:
    y, mo, d, h, mi, s, frac = groups
    assert y and mo and d and h and mi and s
    seconds = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(s), 0, 0, 0))
    return seconds + (int(frac) / 10 ** len(frac) if frac else 0.0)


# a candidate line: its start, kind, number, payload, time and whether it lacks its newline
_Found = tuple[int, bytes, int, bytes, float, bool]
_BATCH = 4096


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
        if not all(map(JSON_DICT.fullmatch, payloads)):
            return False
        numbers = json_payloads(payloads)
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
        fast = [i for i, f in enumerate(found) if JSON_DICT.fullmatch(f[3])]
        numbers: list[dict[str, float] | None] = [None] * len(found)
        for i, parsed in zip(fast, json_payloads([found[i][3] for i in fast])):
            numbers[i] = parsed
        add_step, added = self._add_step, False
        for (start, kind_bytes, number, payload, ts, truncated), metrics in zip(found, numbers):
            if metrics is None:
                metrics = slow_payload(payload)
            if metrics is None:
                if len(self.table.malformed_examples) < MAX_EXAMPLES:  # line numbers cost a count
                    counted[1] += data[counted[0] : start].count(b"\n")
                    counted[0] = start
                why = "truncated last line" if truncated else "payload is not a dict literal"
                self.table.note_malformed(f"{path.name}:{counted[1]}: {kind_bytes.decode()} {number}: {why}")
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
        """Other trainers' metric lines in whole lines of `data` (see `ledger.metrics.lineformats`)."""
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
            parsed = parse_line(RAY_REPEATED.sub("", text) if "[repeated " in text else text)
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
