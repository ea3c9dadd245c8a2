"""Find the log lines the splitter must look at: command lines, and the lines that may hold secrets.

The splitter (`ledger.capture.stream`) works on a *body*: a block of whole lines with one extra
``\\n`` in front, so every line is ``\\n`` + its content and a line starts right after a ``\\n``.
The engine lines are found a run at a time (`engine_runs`). Launcher command lines (``+ ``,
``++ ``, ``EXEC: `` at a line start) and the rest, which may come after a Ray prefix
(``(ActorName pid=1)``), are found here by `suspect_spans`:

- ``ENV_REPORT_JSON=`` lines (prefilter: a ``J`` byte, found with ``memchr``);
- every line the run's `ledger.redact.scanner.Redactor` flags (one trigger scan per body).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ledger.redact.scanner import Redactor

# A line kept in `command_lines` (after an optional Ray prefix).
COMMAND = re.compile(rb"(?:\([^)\n]*\)[ \t]*)?(?:\++ |EXEC: |ENV_REPORT_JSON=)")
# A launcher command line: at a line start.
COMMAND_START = re.compile(rb"\++ |EXEC: ")
_SPECIAL = frozenset(".^$*+?{}[]()|")
_ENV_REPORT = b"ENV_REPORT_JSON="


def engine_alternatives(patterns: Sequence[str]) -> bytes:
    """The engine line-start patterns as one regex alternation (a leading ``^`` is implied)."""
    bodies = [p.removeprefix("^") for p in patterns]
    return "|".join(f"(?:{b})" for b in bodies).encode() or b"(?!)"


def literal_prefix(pattern: str) -> tuple[bytes, bool]:
    """The literal text every match of `pattern` starts with, and whether that is all of it.

    Conservative: stops at the first special character; no prefix for a pattern with ``|``.
    """
    pattern = pattern.removeprefix("^")
    if "|" in pattern:
        return b"", False
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            if i + 1 >= len(pattern) or pattern[i + 1].isalnum():
                break  # \d, \w, \1 ...: not a literal
            char, step = pattern[i + 1], 2
        elif pattern[i] in _SPECIAL:
            break
        else:
            char, step = pattern[i], 1
        if pattern[i + step : i + step + 1] in ("*", "+", "?", "{"):
            break  # a repeated character is not part of every match
        out.append(char)
        i += step
    return "".join(out).encode(), i == len(pattern)


@dataclass(frozen=True)
class EngineRuns:
    """The regexes that sort a body's lines (each ``\\n`` + content) into engine and other lines.

    `run` matches a whole run of consecutive engine lines, from the ``\\n`` before its first line
    to the end of its last line: one match per run, not per line, so a block of engine chatter
    costs one C-level pass. `starts` matches the ``\\n`` and engine pattern at each engine line
    start (its last group is empty, so `findall` builds no new bytes): where a pattern can match
    across a line end, a run holds a newline that begins no engine match, and the counts differ.
    """

    run: re.Pattern[bytes]
    starts: re.Pattern[bytes]


def engine_runs(alternatives: bytes) -> EngineRuns:
    """`EngineRuns` of an `engine_alternatives` regex.

    The line regex is written twice (``L(?:L)*``, not ``(?:L)+``) so that ``re`` sees its literal
    start and searches for it (2-3x faster); a pattern with groups is written once, so that its
    group numbers and names stay what its back-references expect."""
    line = rb"\n(?:" + alternatives + rb")[^\n]*"
    twice = re.compile(alternatives).groups == 0
    run = line + rb"(?:" + line + rb")*" if twice else rb"(?:" + line + rb")+"
    return EngineRuns(re.compile(run), re.compile(rb"\n(?:" + alternatives + rb")()"))


def line_span(body: bytes, i: int) -> tuple[int, int]:
    """``(start, end)`` of the line holding offset `i` of a body, without the newlines."""
    start = body.rfind(b"\n", 0, i) + 1
    end = body.find(b"\n", i)
    return start, end if end >= 0 else len(body)


def suspect_spans(body: bytes, redactor: Redactor) -> list[tuple[int, int]]:
    """Sorted spans of the lines of a body that need `redactor.redact_line`, command lines included."""
    found: set[tuple[int, int]] = set(redactor.flagged(body, 1))
    if body[:1] == b"+" and COMMAND_START.match(body, 0):
        found.add(line_span(body, 0))
    # "+" alone is common mid-line ("1.25E+00" in every Megatron loss line); at a line start it is rare
    i = body.find(b"\n+")
    while i >= 0:
        if COMMAND_START.match(body, i + 1):
            found.add(line_span(body, i + 1))
        i = body.find(b"\n+", i + 2)
    for byte, needle in ((b"X", b"\nEXEC: "), (b"J", _ENV_REPORT)):
        if byte not in body:  # memchr: cheap; most chunks stop here
            continue
        i = body.find(needle)
        while i >= 0:
            span = line_span(body, i + 1)
            found.add(span)
            i = body.find(needle, span[1])
    return sorted(found)
