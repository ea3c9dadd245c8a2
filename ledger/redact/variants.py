"""The forms a secret value takes when a job prints it (raw, escaped, URL-encoded, hex, base64, per line),
and the pieces of one wrapped over two lines."""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Callable

from ledger.redact.names import MASK_BYTES
from ledger.redact.spans import Span
from ledger.redact.view import View

MIN_LENGTH = 6  # shorter values would scrub ordinary text


def b64_at_offsets(raw: bytes, enc: Callable[[bytes], bytes] = base64.b64encode) -> set[bytes]:
    """The base64 characters that encode `raw` whatever its offset in the encoded data (3
    alignments): a value inside a base64'd JSON document or header is found by these. Only the
    characters made of `raw`'s bits alone are kept."""
    out: set[bytes] = set()
    for k in range(3):
        coded = enc(b"\0" * k + raw)
        first = -(-8 * k // 6)  # the first character holding none of the padding's bits
        last = 8 * (k + len(raw)) // 6
        out.add(coded[first:last])
    return out


def variants(value: str | bytes) -> set[bytes]:
    """`value` as printed raw, ``repr``-escaped, JSON-escaped, URL-encoded, hex, base64-encoded
    (also at any offset of a longer encoded text, `b64_at_offsets`), and each line of a
    multi-line value; forms shorter than `MIN_LENGTH` are left out. UTF-16/32 forms need no
    entry: the scan reads text without its NUL bytes (`ledger.redact.view.View`)."""
    raw = value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")
    text = raw.decode("utf-8", "surrogateescape")
    forms = {
        raw,
        repr(text)[1:-1].encode("utf-8", "surrogateescape"),
        json.dumps(text)[1:-1].encode(),
        json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8", "surrogateescape"),
        urllib.parse.quote(raw, safe="").encode(),
        urllib.parse.quote_plus(raw).encode(),
        urllib.parse.quote(raw).encode(),
    }
    for enc in (base64.b64encode, base64.urlsafe_b64encode):
        forms.add(enc(raw).rstrip(b"="))
        for form in (raw, json.dumps(text)[1:-1].encode()):
            forms.update(b64_at_offsets(form, enc))
    forms.update({raw.hex().encode(), raw.hex().upper().encode()})
    forms.update(line.strip() for line in raw.splitlines())
    return {f for f in forms if len(f) >= MIN_LENGTH and f != MASK_BYTES}


def wrapped_piece_spans(line: bytes, wrapped: list[bytes]) -> list[Span]:
    """A known value's head at the end of this line or its tail at the start (the value wrapped
    over two lines): each piece at least `MIN_LENGTH` long and shorter than the value. A head
    holds the value's first `MIN_LENGTH` bytes and a tail its last ones, so only where those are
    is a piece compared (a line costs a few finds per value, not one per split of it)."""
    out: list[Span] = []
    if not wrapped or len(line) < MIN_LENGTH:
        return out
    stripped = line.lstrip(b" \t")
    lead = len(line) - len(stripped)
    for value in wrapped:
        n = len(value)
        i = line.find(value[:MIN_LENGTH], max(0, len(line) - (n - MIN_LENGTH)))
        while i >= 0:  # the line ends with value[:k], MIN_LENGTH <= k <= n - MIN_LENGTH
            if len(line) - i >= MIN_LENGTH and value.startswith(line[i:]):
                out.append((i, len(line)))
            i = line.find(value[:MIN_LENGTH], i + 1)
        j = stripped.find(value[-MIN_LENGTH:], 0, n - MIN_LENGTH)
        while j >= 0:  # the line starts with value[n - t:], MIN_LENGTH <= t <= n - MIN_LENGTH
            if value.endswith(stripped[: j + MIN_LENGTH]):
                out.append((lead, lead + j + MIN_LENGTH))
            j = stripped.find(value[-MIN_LENGTH:], j + 1, n - MIN_LENGTH)
    return out


def wrapped_spans(text: bytes, needles: list[bytes]) -> list[Span]:
    """Known values wrapped over the lines of a text (a line break, and the next line's indent,
    inside them): one span per piece (`ledger.redact.spans.mask_spans` masks each line's part)."""
    if b"\n" not in text:
        return []
    joined = View(text.replace(b"\r\n", b"\x00\x00").replace(b"\n", b"\x00"))  # breaks: hidden bytes
    out: list[Span] = []
    for needle in needles:
        if len(needle) < 2 * MIN_LENGTH:
            continue
        i = joined.text.find(needle)
        while i >= 0:
            out.append(joined.span(i, i + len(needle)))
            i = joined.text.find(needle, i + 1)
    return out
