"""Spans of bytes, `(start, end)`: the lines they sit on, merged, and masked by ``***``.

What every rule reports is a list of spans; the caller merges them and replaces each by the mask
(`mask_spans`), keeping each line's own line end and UTF-16/32 text decodable.
"""

from __future__ import annotations

from collections.abc import Iterable

from ledger.redact.names import MASK_BYTES

Span = tuple[int, int]


def line_span(body: bytes, i: int) -> Span:
    """``(start, end)`` of the line holding offset `i`, without the newlines."""
    start = body.rfind(b"\n", 0, i) + 1
    end = body.find(b"\n", i)
    return start, end if end >= 0 else len(body)


def literal_spans(data: bytes, needles: Iterable[bytes]) -> list[Span]:
    """Every occurrence of every needle (the known secret values and their escaped forms)."""
    out: list[Span] = []
    for needle in needles:
        i = data.find(needle)
        while i >= 0:
            out.append((i, i + len(needle)))
            i = data.find(needle, i + 1)
    return out


def mask_spans(data: bytes, spans: list[Span]) -> bytes:
    """`data` with each union of overlapping spans replaced by ``***`` (newlines are kept)."""
    if not spans:
        return data
    parts: list[bytes] = []
    pos = 0
    for start, end in merge(spans):
        if start < pos:
            start = pos
        if b"\0" in data[start:end] or b"\0" in (data[end : end + 1], data[start - 1 : start]):
            start, end, mask = _wide(data, start, end)
        else:
            mask = MASK_BYTES
        parts.append(data[pos:start])
        # a span never swallows a line break: each line keeps its own mask
        parts.append(b"\n".join(mask if seg.strip(b"\0") else seg for seg in data[start:end].split(b"\n")))
        pos = end
    parts.append(data[pos:])
    return b"".join(parts)


def _wide(data: bytes, start: int, end: int) -> tuple[int, int, bytes]:
    """A span in UTF-16/32 text (ASCII characters and NUL bytes) widened to whole characters, and
    the mask in the same encoding, so that the text stays decodable."""
    if data[end : end + 1] == b"\0":  # little-endian: each character's NULs follow it
        width = 1 + len(data[start + 1 : start + 4]) - len(data[start + 1 : start + 4].lstrip(b"\0"))
        while end < len(data) and data[end : end + 1] == b"\0":
            end += 1
        return start, end, (b"*" + b"\0" * (width - 1)) * 3
    while start > 0 and data[start - 1 : start] == b"\0":  # big-endian: they come first
        start -= 1
    width = 1 + len(data[start : start + 3]) - len(data[start : start + 3].lstrip(b"\0"))
    return start, end, (b"\0" * (width - 1) + b"*") * 3


def merge(spans: list[Span]) -> list[Span]:
    """Sorted spans with overlapping or touching ones joined."""
    out: list[Span] = []
    for start, end in sorted(spans):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out
