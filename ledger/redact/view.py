"""What the rules see of a line: its bytes without terminal colour/cursor sequences and NUL bytes.

A log written for a terminal may carry escape sequences around or inside a secret, and
UTF-16/32 text has NUL bytes between its characters; the rules scan the `View` of the bytes and
each span they report is mapped back to the original bytes, where the mask is applied.
"""

from __future__ import annotations

import bisect
import re

from ledger.redact.spans import Span

# What a terminal draws but a rule must not see: colour/cursor sequences (CSI, OSC, two-byte
# escapes) and NUL bytes (UTF-16/32 text of ASCII characters). The rules scan the text without
# them (`visible`) and the mask is applied to the original bytes.
_HIDDEN = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|[@-Z\\-_])|\x00+")


class View:
    """`data` without `_HIDDEN` sequences, and the map of its offsets back to `data`."""

    def __init__(self, data: bytes):
        self.data = data
        self.segments: list[tuple[int, int]] = []  # (offset in the view, offset in data)
        if b"\x1b" not in data and b"\x00" not in data:
            self.text = data
            return
        parts: list[bytes] = []
        pos = at = 0
        for m in _HIDDEN.finditer(data):
            if m.start() > pos:
                self.segments.append((at, pos))
                parts.append(data[pos : m.start()])
                at += m.start() - pos
            pos = m.end()
        if pos < len(data):
            self.segments.append((at, pos))
            parts.append(data[pos:])
        self.text = b"".join(parts)

    @property
    def same(self) -> bool:
        """True when nothing was hidden (offsets are the same)."""
        return self.text is self.data

    def at(self, i: int) -> int:
        """The offset in `data` of the view's byte `i`."""
        if self.same or not self.segments:
            return i
        k = bisect.bisect_right(self.segments, (i, len(self.data) + 1)) - 1
        view_at, data_at = self.segments[max(k, 0)]
        return data_at + i - view_at

    def span(self, start: int, end: int) -> Span:
        """A span of the view as a span of `data`."""
        if self.same:
            return start, end
        if end <= start:
            return self.at(start), self.at(start)
        return self.at(start), self.at(end - 1) + 1


def content_end(line: bytes) -> int:
    """Where a line's content ends: before its ``\\r\\n``, ``\\n`` or ``\\r``."""
    if line.endswith(b"\r\n"):
        return len(line) - 2
    return len(line) - 1 if line.endswith((b"\n", b"\r")) else len(line)
