"""Read launcher command lines back out of a finished run's log files.

bash's `set -x` prints one command over several output lines when an argument holds a newline
(Miles launchers build `--runtime-env-json` as a multi-line string; miles-facts.md, "Real
launchers"): only the first line starts with `+ `. The capture keeps `+ ` lines only, so the
command lines are read again here from trainer.log after the job, each with the lines that
continue it until its quotes close. `ENV_REPORT_JSON=` lines are taken from every log, behind
any Ray prefix or colour code. The files are mapped, and searched with C-level regexes: lines
are decoded only where a candidate is found.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterable
from pathlib import Path

from ledger.fsutil import mapped
from ledger.understand.launcher import MAX_CONTINUATION, Operator, _tokenize, shell_words

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ANSI_B = rb"(?:\x1b\[[0-9;]*m)*"
_XTRACE = re.compile(_ANSI_B + rb"\++ ")  # at a line start: after a newline (found fast), or at 0
_XTRACE_AFTER_NL = re.compile(rb"\n" + _ANSI_B + rb"\++ ")  # 9x faster than `(?m)^...` on a big log
_MARKERS = re.compile(rb"EXEC: |ENV_REPORT_JSON=")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _open_quote(text: str) -> bool:
    """Whether shell text leaves a quote open (so the next output line continues it)."""
    return not _tokenize(text)[1]


def command_lines(paths: Iterable[Path]) -> list[str]:
    """Launcher command lines (`+ ...`, `EXEC: ...`, `ENV_REPORT_JSON=...`) of the logs, in file
    order, colour codes removed, each followed by its continuation lines."""
    out: list[str] = []
    for path in paths:
        if not path.is_file():
            continue
        with mapped(path) as data:
            out.extend(command_lines_in(data)[0])
    return out


def command_lines_in(data: bytes | mmap.mmap, final: bool = True) -> tuple[list[str], int]:
    """The command lines of `data` (whole lines, from a line start) and how far it is done.

    Streamed (`final` False: more lines may follow), a command whose quote is still open at the
    end of `data` is left, from its first line, for the next call: the offset returned is where
    that call must start. Fed block by block this gives what one call on the whole file gives.
    """
    out: list[str] = []
    starts: set[int] = set()
    # each regex runs only where a byte it needs is there (a one-byte find is a memchr, many GB/s):
    # most blocks of a big log hold no command line at all
    if data.find(b"+") >= 0:
        starts.update(m.start() + 1 for m in _XTRACE_AFTER_NL.finditer(data))
    if _XTRACE.match(data):
        starts.add(0)
    if data.find(b"X") >= 0 or data.find(b"J") >= 0:
        starts.update(data.rfind(b"\n", 0, m.start()) + 1 for m in _MARKERS.finditer(data))
    for start in sorted(starts):
        lines, ran_out = _logical_line(data, start)
        if ran_out and not final:
            return out, start
        out.extend(lines)
    return out, len(data)


def _line_at(data: bytes | mmap.mmap, start: int) -> tuple[str, int]:
    end = data.find(b"\n", start)
    end = len(data) if end < 0 else end
    return ANSI.sub("", bytes(data[start:end]).decode("utf-8", "replace")).rstrip("\r"), end + 1


def _logical_line(data: bytes | mmap.mmap, start: int) -> tuple[list[str], bool]:
    """The line at `start` and its continuation lines; True when `data` ended with a quote open."""
    first, pos = _line_at(data, start)
    lines = [first]
    if "ENV_REPORT_JSON=" in first and "EXEC: " not in first and not first.startswith("+"):
        return lines, False
    text = first
    while (still_open := _open_quote(text.split("EXEC: ", 1)[-1].lstrip("+ "))) and len(lines) <= MAX_CONTINUATION and pos < len(data):
        line, pos = _line_at(data, pos)
        lines.append(line)
        text += "\n" + line
    return lines, still_open and len(lines) <= MAX_CONTINUATION and pos >= len(data)


def exported_env(lines: Iterable[str]) -> dict[str, str]:
    """`NAME=value` of every `+ export NAME=value` in an xtrace (the last one wins)."""
    env: dict[str, str] = {}
    for line in lines:
        if not line.startswith("+") or " export " not in line[:40]:
            continue
        words = [w for w in shell_words(line.lstrip("+ ")) if not isinstance(w, Operator)]
        if not words or words[0] != "export":
            continue
        for word in words[1:]:
            name, sep, value = word.partition("=")
            if sep and _NAME_RE.fullmatch(name):
                env[name] = value
    return env
