"""The forms a secret value takes when a job prints it (raw, escaped, URL-encoded, base64, per line)."""

from __future__ import annotations

import base64
import json
import urllib.parse

from ledger.redact.names import MASK

MIN_LENGTH = 6  # shorter values would scrub ordinary text


def variants(value: str | bytes) -> set[bytes]:
    """`value` as printed raw, ``repr``-escaped, JSON-escaped, URL-encoded and base64-encoded, and
    each line of a multi-line value; forms shorter than `MIN_LENGTH` are left out."""
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
    forms.update(line.strip() for line in raw.splitlines())
    return {f for f in forms if len(f) >= MIN_LENGTH and f != MASK.encode()}
