"""Find the log lines that may hold secrets, fast enough to keep up with a job's output.

The splitter (`ledger.capture.stream`) works on a *body*: a block of whole lines with one extra
``\\n`` in front, so every line is ``\\n`` + its content and a line starts right after a ``\\n``.
Launcher command lines (``+ ``, ``++ ``, ``EXEC: `` at a line start) are found by the same regex
that finds the engine lines (`split_regex`). The rest, which may come after a Ray prefix
(``(ActorName pid=1)``), is found here by `suspect_spans`:

- ``ENV_REPORT_JSON=`` lines (prefilter: a ``J`` byte, found with ``memchr``);
- Megatron argument-dump lines whose argument name is secret (``  wandb_key ..... value``);
  prefilter: an 8-byte-aligned word of dots (numpy), which every run of 15 or more dots holds
  (Megatron pads name and dots to 48 columns, so this finds names up to 33 characters);
- with ``secret_scan="all"``, also any line holding a token shape, URL credentials or a
  secret-named assignment (slow: ~0.1 GB/s).

Python's ``re`` and ``bytes.find`` with a short needle scan ~1 GB/s on our hardware, ``memchr``
and numpy compares ~10 GB/s; the prefilters use only the latter on lines that hold no secret.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from ledger.capture.redact import is_secret_name

SecretScan = Literal["all", "commands"]

# A line kept in `command_lines` (after an optional Ray prefix).
COMMAND = re.compile(rb"(?:\([^)\n]*\)[ \t]*)?(?:\++ |EXEC: |ENV_REPORT_JSON=)")
# A launcher command line: at a line start.
COMMAND_START = re.compile(rb"\++ |EXEC: ")
_SPECIAL = frozenset(".^$*+?{}[]()|")
_ENV_REPORT = b"ENV_REPORT_JSON="
# Megatron's dump: optional Ray prefix, spaces, the argument name, a space, 3+ dots, a space.
_DOTS8 = int.from_bytes(b"." * 8, "little")  # an 8-byte word of dots
_DUMP = re.compile(rb"(?:\([^)\n]*\))?[ \t]+([A-Za-z_][\w.-]*) \.{3,}(?: |$)")

# --- secret_scan="all": markers searched in the lower-cased bytes -----------------------------
_ALWAYS = (b"env_report_json=", b"secret", b"credential", b"passphrase")
_SHAPES = (b"hf_", b"gh", b"github_pat_", b"sk-", b"akia", b"asia", b"xox", b"eyj", b"://",
           b"bearer")  # fmt: skip
_GH_KINDS = (b"p_", b"o_", b"s_", b"u_", b"r_")
# Secret name endings: a hit counts only with an assignment-like character around it.
_NAME_ENDS = (b"key", b"token", b"auth", b"pass")
_AFTER_ASSIGN = frozenset(b"=\"'\\")
_AFTER_SPACED = frozenset(b" \t.")
_BEFORE_SPACED = frozenset(b"-_")


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


def split_regex(patterns: Sequence[str]) -> re.Pattern[bytes]:
    """The regex that `re.split` cuts a body with: group 1 holds an engine line (no newline).

    The ``\\n`` before the line is the match's own. The pattern starts with a literal ``\\n``,
    so ``re`` only tries it at line starts. Groups inside the engine patterns come after group 1.
    """
    return re.compile(rb"\n((?:" + engine_alternatives(patterns) + rb")[^\n]*)")


def line_span(body: bytes, i: int) -> tuple[int, int]:
    """``(start, end)`` of the line holding offset `i` of a body, without the newlines."""
    start = body.rfind(b"\n", 0, i) + 1
    end = body.find(b"\n", i)
    return start, end if end >= 0 else len(body)


def suspect_spans(body: bytes, scan: SecretScan) -> list[tuple[int, int]]:
    """Sorted spans of the lines of a body that need redaction, command lines included."""
    found: set[tuple[int, int]] = set()
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
    found.update(_dump_lines(body))
    if scan == "all":
        found.update(_marked_lines(body))
    return sorted(found)


def _dump_lines(body: bytes) -> list[tuple[int, int]]:
    """Spans of Megatron argument-dump lines whose argument name is secret."""
    import numpy as np  # lazily: keeps `ledger --help` fast

    words = np.frombuffer(body, np.uint64, count=len(body) // 8)
    hits = np.flatnonzero(words == _DOTS8)
    if not len(hits):
        return []
    spans: list[tuple[int, int]] = []
    end = -1
    for i in (hits * 8).tolist():
        if i < end:
            continue  # another hit on a line already looked at
        start, end = line_span(body, i)
        m = _DUMP.match(body, start, end)
        if m is not None and is_secret_name(m.group(1).decode("ascii")):
            spans.append((start, end))
    return spans


def _marked_lines(body: bytes) -> set[tuple[int, int]]:
    """Spans of lines holding a secret marker (``secret_scan="all"``)."""
    low = body.lower()
    found: set[tuple[int, int]] = set()
    for needle in _ALWAYS + _SHAPES:
        i = low.find(needle)
        while i >= 0:
            if needle != b"gh" or low[i + 2 : i + 4] in _GH_KINDS:
                found.add(line_span(low, i))
            i = low.find(needle, i + 1)
    for word in _NAME_ENDS:
        i = low.find(word)
        while i >= 0:
            after = low[i + len(word)] if i + len(word) < len(low) else 0
            before = low[i - 1] if i > 0 else 0
            if after in _AFTER_ASSIGN or (after in _AFTER_SPACED and before in _BEFORE_SPACED):
                found.add(line_span(low, i))
            i = low.find(word, i + 1)
    return found
