"""The forms a secret value takes when a job prints it (raw, escaped, URL-encoded, hex, base64, per line)."""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Callable

from ledger.redact.names import MASK

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
    entry: the scan reads text without its NUL bytes (`ledger.redact.scanner.View`)."""
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
    return {f for f in forms if len(f) >= MIN_LENGTH and f != MASK.encode()}
