"""Secrets spread over several lines: PEM/OpenSSH private key blocks and YAML block scalars
under a secret name (``password: |`` and the lines indented below it).

Each is masked line by line, so a redacted text keeps its line count. A streaming redactor
carries the state from one line to the next (`pem_step`, `pem_after`, `block_after`); a whole
text is handled at once (`pem_text_spans`, `block_scalar_spans`).
"""

from __future__ import annotations

import re

from ledger.redact.names import Redactions, is_secret_name
from ledger.redact.rules import BLOCK_HEAD, PEM_BEGIN, PEM_END, NameTest
from ledger.redact.spans import Span
from ledger.redact.view import View

BLOCK_MAX_LINES = 400
PEM_MAX_LINES = 400  # a 16384-bit RSA key in PEM is ~200 lines; a lone BEGIN never masks a whole log

# A YAML block scalar being read: (indent of its key, lines it may still hold).
Block = tuple[int, int]


def block_scalar_spans(text: bytes, acc: Redactions, secret: NameTest = is_secret_name) -> list[Span]:
    """The lines of a YAML block scalar under a secret name (``password: |`` and the lines more
    indented than it), one span per line."""
    spans: list[Span] = []
    lines = text.split(b"\n")
    pos = 0
    i = 0
    offsets = []
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    while i < len(lines):
        m = BLOCK_HEAD.match(lines[i].rstrip(b"\r"))
        i += 1
        if m is None or not secret(m.group("name").decode("ascii")):
            continue
        indent = len(m.group("ind"))
        taken = 0
        while i < len(lines) and taken < BLOCK_MAX_LINES:
            line = lines[i].rstrip(b"\r")
            body = line.lstrip(b" \t")
            if body and len(line) - len(body) <= indent:
                break
            if body:
                spans.append((offsets[i] + len(line) - len(body), offsets[i] + len(line)))
                acc.add_name(m.group("name").decode("ascii"))
            i += 1
            taken += 1
    return spans


def pem_step(data: bytes, is_open: bool, acc: Redactions) -> tuple[list[Span], bool]:
    """PEM private-key spans in one line (or one window of a long line), and whether a block is
    open after it. In an open block the segment is key material up to an END marker; a BEGIN
    without an END after it opens a block. (How many lines a block may hold is the caller's.)
    """
    spans: list[Span] = []
    pos = 0
    if is_open:
        end = PEM_END.search(data)
        if end is None:
            if data:
                spans.append((0, len(data)))
            return spans, True
        spans.append((0, end.end()))
        pos = end.end()
    while (begin := PEM_BEGIN.search(data, pos)) is not None:
        acc.add_kind("private-key")
        end = PEM_END.search(data, begin.end())
        if end is None:
            spans.append((begin.start(), len(data)))
            return spans, True
        spans.append((begin.start(), end.end()))
        pos = end.end()
    return spans, False


def pem_text_spans(text: bytes, acc: Redactions) -> list[Span]:
    """PEM blocks in a multi-line text, one span per line so that the line count is kept."""
    spans: list[Span] = []
    left = 0
    start = 0
    while start <= len(text):
        nl = text.find(b"\n", start)
        end = len(text) if nl < 0 else nl
        if left > 0 or PEM_BEGIN.search(text, start, end) is not None:
            line_end = end - 1 if end > start and text[end - 1 : end] == b"\r" else end
            found, is_open = pem_step(text[start:line_end], left > 0, acc)
            spans.extend((start + a, start + b) for a, b in found)
            left = pem_after(left, left > 0, is_open)
        if nl < 0:
            break
        start = nl + 1
    return spans


def pem_after(left: int, open_before: bool, open_after: bool) -> int:
    """Lines a PEM block may still hold after one line (0: closed)."""
    if not open_after:
        return 0
    return left - 1 if open_before else PEM_MAX_LINES


def block_head(line: bytes) -> re.Match[bytes] | None:
    """A YAML block-scalar header line (``password: |``), cheaply refused for most lines."""
    if b"|" not in line and b">" not in line:
        return None
    return BLOCK_HEAD.match(View(line).text.rstrip(b"\r"))


def block_after(content: bytes, block: Block | None, secret: NameTest | None) -> tuple[Block | None, bool]:
    """The YAML block-scalar state after one line's visible content, and whether the line is
    inside the block (its value is masked whole). `secret` None: no block opens (rules off)."""
    if block is not None:
        body = content.lstrip(b" \t")
        if not body:
            return block, False
        if len(content) - len(body) > block[0] and block[1] > 0:
            return (block[0], block[1] - 1), True
    m = block_head(content) if secret is not None else None
    if m is not None and secret is not None and secret(m.group("name").decode("ascii")):
        return (len(m.group("ind")), BLOCK_MAX_LINES), False
    return None, False
