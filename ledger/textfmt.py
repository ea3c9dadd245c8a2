"""The one way values read in ledger's text output: settings, table cells, absent and missing.

`ledger diff`, `ledger list --changed`, `ledger log` and the heat summary all print values through
these functions, so a setting one run lacks reads `<absent>` everywhere, and a number that was not
measured reads `-` everywhere. Every CSV and TSV ledger writes goes through `csv_text`, so no
cell opens in a spreadsheet as a formula (`spreadsheet_cell`).
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

ABSENT_TEXT = "<absent>"  # a setting the run does not have
MISSING = "-"  # a cell with no value (not measured, not known)

_AMBIGUOUS = {"true", "false", "null", "yes", "no", "on", "off", "~", ""}


class _Absent(str):
    """The value of a setting that one run does not have.

    A `str` subclass so that dumping it as JSON writes "<absent>" instead of failing; tell it from a
    real string with `value is ABSENT`.
    """

    def __repr__(self) -> str:
        return ABSENT_TEXT


ABSENT: Any = _Absent(ABSENT_TEXT)


def is_absent(value: Any) -> bool:
    """True for ABSENT, and for its JSON form read back from a stored report."""
    return value is ABSENT or (isinstance(value, str) and value == ABSENT_TEXT)


def show_value(value: Any, width: int | None = None) -> str:
    """A setting value as it would read in YAML, cut to `width` characters when given."""
    if is_absent(value):
        return ABSENT_TEXT
    if value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (int, float)):
        text = repr(value)
    elif isinstance(value, (list, tuple)):
        text = "[" + ", ".join(show_value(v) for v in value) + "]"
    else:
        text = str(value)
        if text.lower() in _AMBIGUOUS or text != text.strip() or "\n" in text or _looks_numeric(text):
            text = repr(text)
    if width is not None and len(text) > width:
        text = text[: width - 3] + "..."
    return text


def cell(value: Any) -> str:
    """A table cell: `-` for None or a non-finite number, else the value's text."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return MISSING
    return str(value)


# what a spreadsheet takes for the start of a formula (OWASP, "CSV Injection"): = + - @, and a tab
# or carriage return before one; a cell that is a plain number (-0.5, +3, 1e-05) is left as it is
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def spreadsheet_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as the text it is: a number stays a number, None is empty,
    and text that would start a formula (`=HYPERLINK(...)`, `@SUM(1)`, `+cmd|...`) gets a leading
    `'`, which spreadsheets read as "this is text" (pulled names, notes and metrics are anyone's)."""
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    text = str(value)
    if text.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def csv_text(header: Sequence[Any], rows: Iterable[Sequence[Any]], sep: str = ",") -> str:
    """A CSV (`sep` ","), or TSV ("\t"), document: the header, then one line per row, every cell
    through `spreadsheet_cell`."""
    import csv  # lazily: only the CSV writers need it

    buf = io.StringIO()
    writer = csv.writer(buf, delimiter=sep, lineterminator="\n")
    for row in (header, *rows):
        writer.writerow([spreadsheet_cell(v) for v in row])
    return buf.getvalue()


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def plural(count: int, noun: str) -> str:
    """`1 run`, `2 runs`, `0 runs`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


_SHA = __import__("re").compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
SHORT_SHA = 10


def short_sha(value: Any) -> Any:
    """A full git or sha256 hash shortened to its first 10 characters; anything else unchanged."""
    return value[:SHORT_SHA] if isinstance(value, str) and _SHA.fullmatch(value) else value


def _change_value(value: Any) -> str:
    """A change set's value: a hash as its short form, never quoted (`0262844e66` is a commit, not 2.6e71)."""
    short = short_sha(value)
    return str(short) if short is not value else show_value(value, width=40)


def change_text(changes: Sequence[Mapping[str, object]]) -> str:
    """A change set (`{"name", "a", "b"}` dicts) on one line; commit and sha256 values shortened."""
    if not changes:
        return "(no setting changed)"
    return ", ".join(f"{c['name']}: {_change_value(c['a'])} -> {_change_value(c['b'])}" for c in changes)


def size_text(n: int) -> str:
    """A byte count as a person reads it: `2.0 GiB`, `80 MiB`, `12 KiB`, `5 bytes`."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}" if shift == 30 else f"{n >> shift} {unit}"
    return plural(n, "byte")


NOTE_WIDTH = 40


def note_cell(note: Any) -> str:
    """A note in a table cell: its first line, cut to NOTE_WIDTH characters (`ledger show` has it whole)."""
    if not isinstance(note, str) or not note.strip():
        return MISSING
    lines = note.strip().splitlines()
    first = lines[0]
    if len(first) > NOTE_WIDTH or len(lines) > 1:
        return first[: NOTE_WIDTH - 1].rstrip() + "…"
    return first
