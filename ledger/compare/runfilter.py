"""Which runs `ledger list` shows: `--where`, `--name`, `--state`, `--tag`, `--since`, `--archived`.

`--where KEY OP VALUE` compares a setting (from `settings.json`) or a summary metric's last value
(from `summary.json`'s `metrics`: `ledger.metrics.summarymetrics`). `=` and `!=` compare numbers
as numbers (`lr=1e-6` matches `0.000001`) and anything else as text; `<`, `>`, `<=`, `>=` need a
number on both sides (a run whose value is not a number does not match). A run without the key
matches only `!=`. A key no run has is a usage error naming the nearest known keys.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import operator
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.errors import UsageError
from ledger.globs import matches_any
from ledger.metrics.summarymetrics import metric_value
from ledger.timefmt import parse_iso, utc_now

if TYPE_CHECKING:
    from ledger.storage.listrow import FullRow, ListFields

_WHERE_RE = re.compile(r"^\s*([^<>=!\s][^<>=!]*?)\s*(!=|<=|>=|==|=|<|>)\s*(.*?)\s*$")
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
}
_RELATIVE_RE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
STATES = ("finished", "failed", "killed", "lost", "running", "orphaned")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


class Where(msgspec.Struct, frozen=True):
    """One `--where KEY OP VALUE`."""

    key: str
    op: str
    value: str

    @classmethod
    def parse(cls, text: str) -> Where:
        m = _WHERE_RE.match(text)
        if not m:
            raise UsageError(
                f"--where {text!r} is not KEY=VALUE", "write KEY=VALUE, KEY!=VALUE or KEY<NUMBER (also >, <=, >=), e.g. --where lr=1e-6"
            )
        key, op, value = m.group(1), "=" if m.group(2) == "==" else m.group(2), m.group(3)
        if op in _OPS and _number(value) is None:
            raise UsageError(f"--where {text!r}: {op} needs a number, not {value!r}", f"e.g. --where '{key}{op}1.0'")
        return cls(key, op, value)

    def bound(self) -> tuple[str, float] | None:
        """`("<", 4.5)` for `KEY<4.5`: what `matches` asks of a number (None for `=` and `!=`)."""
        want = _number(self.value)
        return (self.op, want) if self.op in _OPS and want is not None else None

    def matches(self, present: bool, value: Any) -> bool:
        if not present:
            return self.op == "!="
        if self.op in _OPS:
            got = _number(value)
            want = _number(self.value)
            return got is not None and want is not None and _OPS[self.op](got, want)
        got_n, want_n = _number(value), _number(self.value)
        same = got_n == want_n if got_n is not None and want_n is not None else _text(value) == self.value
        return same if self.op == "=" else not same


def parse_since(text: str, now: dt.datetime | None = None) -> str:
    """`--since`: a date (`2026-11-29`), a time (`2026-11-29T10:00`, UTC unless it says) or an age
    (`3d`, `12h`, `30m`, `2w`): the ISO time runs must have started at or after."""
    m = _RELATIVE_RE.match(text.strip())
    if m:
        when = (now or utc_now()) - dt.timedelta(seconds=int(m.group(1)) * _UNIT_S[m.group(2)])
        return when.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    seconds = parse_iso(text.strip())
    if seconds is None:
        raise UsageError(
            f"--since {text!r} is not a date or an age", "give a date (2026-11-29), a UTC time (2026-11-29T10:00) or an age (3d, 12h, 30m)"
        )
    return dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class RunFilter(msgspec.Struct, frozen=True):
    """All the conditions of one `ledger list` (every one must hold)."""

    where: tuple[Where, ...] = ()
    name: str | None = None  # a glob
    states: tuple[str, ...] = ()  # any of them
    tags: tuple[str, ...] = ()  # all of them
    since: str | None = None  # ISO time
    archived: bool = False  # show archived runs too

    def check_keys(self, known: set[str]) -> None:
        """Refuse a `--where` key that is not in `known` (every setting and metric name any run
        has), naming the nearest known keys."""
        for w in self.where:
            if w.key not in known:
                close = difflib.get_close_matches(w.key, sorted(known), n=3, cutoff=0.5)
                hint = f"did you mean {' or '.join(close)}?" if close else "no run has it; `ledger show RUN` lists a run's settings"
                raise UsageError(f"--where: no setting or metric named '{w.key}'", hint)

    def keep(self, row: FullRow) -> bool:
        """Whether a run (its listing fields, settings and summary metrics) passes every condition."""
        return self.passes_fields(row.fields) and self._where_passes(row)

    def passes_fields(self, f: ListFields) -> bool:
        """The listing fields' conditions alone: archived, name glob, state, tags, since (a
        listing that read the `--where` columns apart asks only these of each run)."""
        if f.archived and not self.archived:
            return False
        if self.name is not None and not matches_any(f.name or "", (self.name,)):
            return False
        if self.states and (f.state or "") not in self.states:
            return False
        if self.tags and not set(self.tags) <= set(f.tags):
            return False
        return self.since is None or (f.started or "") >= self.since

    def _where_passes(self, row: FullRow) -> bool:
        """Every `--where`: on the setting of that name, else on the summary metric."""
        for w in self.where:
            if w.key in row.settings:
                if not w.matches(True, row.settings[w.key]):
                    return False
            else:
                value = metric_value(row.metrics, w.key)
                if not w.matches(value is not None, value):
                    return False
        return True


def check_states(states: Iterable[str]) -> tuple[str, ...]:
    out = tuple(states)
    for s in out:
        if s not in STATES:
            close = difflib.get_close_matches(s, STATES, n=1)
            raise UsageError(
                f"--state {s!r} is not a run state", (f"did you mean {close[0]}? " if close else "") + "states: " + ", ".join(STATES)
            )
    return out
