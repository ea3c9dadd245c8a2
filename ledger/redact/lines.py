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

import functools
import importlib
import re
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from ledger.redact.scanner import Redactor
from ledger.redact.spans import line_span

# A line kept in `command_lines` (after an optional Ray prefix).
COMMAND = re.compile(rb"(?:\([^)\n]*\)[ \t]*)?(?:\++ |EXEC: |ENV_REPORT_JSON=)")
# A launcher command line: at a line start.
COMMAND_START = re.compile(rb"\++ |EXEC: ")
_ENV_REPORT = b"ENV_REPORT_JSON="
_MID_LINE_PLUSES = 64  # "+" bytes not at a line start after which a body is searched for "\n+"


def engine_alternatives(patterns: Sequence[str]) -> bytes:
    """The engine line-start patterns as one regex alternation (a leading ``^`` is implied)."""
    bodies = [p.removeprefix("^") for p in patterns]
    return "|".join(f"(?:{b})" for b in bodies).encode() or b"(?!)"


def _sre_parser() -> Any:
    """Python's own regex parser (`re._parser`; `sre_parse` before 3.11), or None."""
    for name in ("re._parser", "sre_parse"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


_DOTALL = re.DOTALL.value
# the classes (`\\s`, `\\D`, `\\W` and their Unicode forms) that hold a newline, and those that do not
_CLASSES_WITH_NEWLINE = frozenset(
    f"CATEGORY_{k}"
    for k in ("SPACE", "NOT_DIGIT", "NOT_WORD", "LINEBREAK", "UNI_SPACE", "UNI_NOT_DIGIT", "UNI_NOT_WORD", "UNI_LINEBREAK", "LOC_NOT_WORD")
)
_CLASSES_WITHOUT = frozenset(
    f"CATEGORY_{k}"
    for k in ("DIGIT", "NOT_SPACE", "WORD", "NOT_LINEBREAK", "UNI_DIGIT", "UNI_NOT_SPACE", "UNI_WORD", "UNI_NOT_LINEBREAK", "LOC_WORD")
)


def _set_holds_newline(items: Any) -> bool:
    """Whether a parsed character set (`[...]`, `\\s`) matches a newline; True where unsure."""
    negate = holds = False
    for op, arg in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            holds |= arg == 10
        elif name == "RANGE":
            holds |= arg[0] <= 10 <= arg[1]
        elif name == "CATEGORY" and str(arg) in _CLASSES_WITH_NEWLINE | _CLASSES_WITHOUT:
            holds |= str(arg) in _CLASSES_WITH_NEWLINE
        else:
            return True
    return holds != negate


def _may_match_newline(items: Any, dotall: bool) -> bool:
    """Whether a parsed regex may consume a newline; True for anything not known not to."""
    return any(str(op) != "AT" and _item_may_match_newline(str(op), arg, dotall) for op, arg in items)


def _item_may_match_newline(name: str, arg: Any, dotall: bool) -> bool:
    """`_may_match_newline` of one parsed item that matches a character (or holds items that do)."""
    if name == "LITERAL":
        return bool(arg == 10)
    if name == "NOT_LITERAL":
        return bool(arg != 10)
    if name == "ANY":
        return dotall
    if name == "IN":
        return _set_holds_newline(arg)
    return _group_may_match_newline(name, arg, dotall)


def _group_may_match_newline(name: str, arg: Any, dotall: bool) -> bool:
    """`_may_match_newline` of a repeat, group, branch or assertion: whether what it holds may."""
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        return _may_match_newline(arg[2], dotall)
    if name == "SUBPATTERN":
        _, add, delete, sub = arg
        return _may_match_newline(sub, (dotall or bool(add & _DOTALL)) and not delete & _DOTALL)
    if name == "BRANCH":
        return any(_may_match_newline(branch, dotall) for branch in arg[1])
    if name == "ATOMIC_GROUP":
        return _may_match_newline(arg, dotall)
    if name in ("ASSERT", "ASSERT_NOT"):
        return _may_match_newline(arg[1], dotall)
    return True  # a back-reference, a conditional group, a construct of a later Python


@functools.lru_cache(maxsize=64)
def line_local(pattern: str) -> bool:
    """Whether `pattern` can never match a newline, read from Python's own parse of it (so never
    across a line end): then the splitter need not count engine line starts. False where unsure."""
    parser = _sre_parser()
    if parser is None:
        return False
    try:
        parsed = parser.parse(pattern.encode())
        flags = parsed.state.flags
        return not _may_match_newline(parsed, bool(flags & _DOTALL))
    except Exception:  # noqa: BLE001 - any surprise in a private module: not known to be line-local
        return False


class EngineRuns(msgspec.Struct, frozen=True):
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


def _plus_line_starts(body: bytes) -> Iterator[int]:
    """Offsets of the ``+`` bytes that start a line of a body (each right after a ``\\n``). Most
    output holds no ``+`` at all, so ``+`` alone is searched for first (one ``memchr`` over the
    body, where a search for ``\\n+`` stops at every newline); once a body shows many ``+``
    mid-line ("1.25E+00" in every Megatron loss line) the rest is searched for ``\\n+``."""
    i, mid_line = body.find(b"+", 1), 0
    while i >= 0 and mid_line < _MID_LINE_PLUSES:
        if body[i - 1] == 0x0A:
            yield i
        else:
            mid_line += 1
        i = body.find(b"+", i + 1)
    if i < 0:
        return
    i = body.find(b"\n+", i - 1)  # from the "+" at i on, none of them yielded yet
    while i >= 0:
        yield i + 1
        i = body.find(b"\n+", i + 2)


def suspect_spans(body: bytes, redactor: Redactor) -> list[tuple[int, int]]:
    """Sorted spans of the lines of a body that need `redactor.redact_line`, command lines included."""
    found: set[tuple[int, int]] = set(redactor.flagged(body, 1))
    if body[:1] == b"+" and COMMAND_START.match(body, 0):
        found.add(line_span(body, 0))
    for i in _plus_line_starts(body):
        if COMMAND_START.match(body, i):
            found.add(line_span(body, i))
    for byte, needle in ((b"X", b"\nEXEC: "), (b"J", _ENV_REPORT)):
        if byte not in body:  # memchr: cheap; most chunks stop here
            continue
        i = body.find(needle)
        while i >= 0:
            span = line_span(body, i + 1)
            found.add(span)
            i = body.find(needle, span[1])
    return sorted(found)
