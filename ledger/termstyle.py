"""What the terminal sees: colour and progress bars, only where a person is watching.

Colour goes to a stream that is a terminal, never when piped, with `NO_COLOR` set (no-color.org)
or `TERM=dumb`. Progress bars come from tqdm (which DVC already brings; the only module that
imports it) and are drawn only on a terminal: a log file never gets `\\r` bars.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import IO, Any

RED, GREEN, YELLOW, CYAN, BOLD = "31", "32", "33", "36", "1"
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^(refused:|FORCED|ledger: FORCED)"), f"{BOLD};{RED}"),
    (re.compile(r"^(warning:|ledger: warning:|  no CI:)"), YELLOW),
    (re.compile(r"^(manifest diff:|code diff:|timing on|learning on|per-step )"), BOLD),
    (re.compile(r"^@@"), CYAN),
    (re.compile(r"^\+(?!\+\+ )"), GREEN),
    (re.compile(r"^-(?!-- )"), RED),
)


def _is_terminal(stream: IO[Any]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def colour_enabled(stream: IO[Any]) -> bool:
    """True when `stream` is a terminal and the user has not asked for no colour."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return _is_terminal(stream)


def paint(text: str, code: str) -> str:
    """`text` in an ANSI style (`RED`, `f"{BOLD};{RED}"`, ...)."""
    return f"\x1b[{code}m{text}\x1b[0m"


def paint_lines(text: str) -> str:
    """Colour a report line by line: refusals, warnings, headings, added and removed diff lines."""
    out = []
    for line in text.split("\n"):
        code = next((c for pattern, c in _RULES if pattern.match(line)), None)
        out.append(paint(line, code) if code and line else line)
    return "\n".join(out)


def _columns(stream: IO[Any]) -> int:
    """The width of the terminal `stream` is (0 where it tells none)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 0


def progress(what: str, stream: IO[str] | None = None, unit: str = "file") -> Callable[[int, int], None]:
    """A `report(done, total)` callback drawing one tqdm bar on a terminal, nothing elsewhere
    (nor is tqdm imported there)."""
    out = stream if stream is not None else sys.stderr
    if not _is_terminal(out):
        return lambda done, total: None
    from tqdm import tqdm

    # a terminal never given a size (0 x 0: `script`, some CI ptys) would get no bar: tqdm fits it to that
    size = {} if _columns(out) else {"ncols": 80, "nrows": 24}
    bar: tqdm[None] | None = None

    def report(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, desc=f"ledger: {what}", file=out, unit=unit, leave=True, **size)
        bar.total = total
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return report


# C0 controls but tab and newline, DEL, and the C1 controls (U+0080-U+009F: a lone U+009B is a CSI
# on many terminals). Pulled names, notes, setting values and log lines are someone else's
# bytes: an OSC 52 sequence would write the reader's clipboard, an OSC 0 their window title.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


def _escaped(m: re.Match[str]) -> str:
    return f"\\x{ord(m.group()):02x}"


def printable(text: str) -> str:
    """`text` with every control character but tab and newline shown escaped (`\\x1b`)."""
    return _CONTROLS.sub(_escaped, text)


def printable_cell(text: str) -> str:
    """`printable`, and a tab or newline shown escaped too (`\\x0a`): a table cell (a pulled run
    named `a<newline>b`) never splits its row or shifts its columns."""
    return _LINE_BREAKS.sub(_escaped, printable(text))


_LINE_BREAKS = re.compile("[\t\n]")


def printable_bytes(data: bytes) -> bytes:
    """Bytes for a terminal: control characters but tab and newline shown escaped (`\\x1b`), C1
    controls too (U+009B is a CSI), and bytes that are not UTF-8 (a bare 0x9b is a CSI on an
    8-bit terminal) as `\\x9b`; valid UTF-8 text is kept as it is."""
    text = data.decode("utf-8", "surrogateescape")
    text = _CONTROLS.sub(_escaped, text)
    text = _INVALID.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02x}", text)
    return text.encode("utf-8")


_INVALID = re.compile("[\udc80-\udcff]")


def say(text: str) -> None:
    """One message for the person at the terminal, on stderr: control characters shown escaped,
    coloured (`paint_lines`) when stderr is a terminal that takes colour."""
    stream = sys.stderr
    if stream is None:
        return
    text = printable(text)  # pulled names and values never reach the terminal as controls
    stream.write((paint_lines(text) if colour_enabled(stream) else text) + "\n")
    stream.flush()


def terminal_fd() -> int | None:
    """stdout's descriptor, for a job to write to the same terminal or file (None when it has none)."""
    try:
        sys.stdout.flush()
        return sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):
        return None
