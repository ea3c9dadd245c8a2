"""The secret VALUES a run was started with, so they can be scrubbed from anything the job
itself printed (a trainer echoing its argv, a library logging its config).

Redaction by name and shape (`redact`) catches secrets in command lines; a job may still print a
key it was given in an unexpected format. Since ledger knows which values it redacted from the
argv and which secret-named variables were in the job's environment, it replaces those exact
values in the logs before anything is committed.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ledger.capture.redact import MASK, is_secret_name, redact_argv, redact_text

MIN_LENGTH = 6  # shorter values would scrub ordinary text
BLOCK = 1 << 24


def removed_values(original: str, redacted: str) -> list[str]:
    """The substrings of `original` that redaction replaced by the mask."""
    parts = redacted.split(MASK)
    if len(parts) == 1 or not original.startswith(parts[0]):
        return []
    out: list[str] = []
    pos = len(parts[0])
    for i, lit in enumerate(parts[1:], 1):
        last = i == len(parts) - 1
        if last and lit == "":
            end = len(original)
        elif last:
            end = original.rfind(lit)
        else:
            end = original.find(lit, pos + 1) if lit else -1
        if end < pos:
            return out
        out.append(original[pos:end])
        pos = end + len(lit)
    return out


def known_secrets(argv: Sequence[str], environ: Mapping[str, str], texts: Iterable[str] = ()) -> set[str]:
    """Secret values found in argv (by redaction), secret-named variables, and free texts."""
    found: set[str] = set()
    redacted, _ = redact_argv(list(argv))
    for orig, red in zip(argv, redacted):
        if orig != red:
            found.update(removed_values(orig, red))
    for name, value in environ.items():
        if value and is_secret_name(name):
            found.add(value)
        elif value and MASK not in value:
            clean, _ = redact_text(value)
            if clean != value:
                found.update(removed_values(value, clean))
    for text in texts:
        for line in text.splitlines():
            clean, _ = redact_text(line)
            if clean != line:
                found.update(removed_values(line, clean))
    return {v for v in found if len(v) >= MIN_LENGTH and v != MASK}


def scrub_file(path: Path, secrets: Iterable[str]) -> bool:
    """Replace every occurrence of the given values in a file by the mask; True if any was found."""
    needles = sorted({s.encode("utf-8", "surrogateescape") for s in secrets}, key=len, reverse=True)
    if not needles or not path.exists() or path.stat().st_size == 0:
        return False
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        if all(mm.find(n) == -1 for n in needles):
            return False
    keep = max(len(n) for n in needles) - 1
    mask = MASK.encode()
    tmp = path.with_name(f".{path.name}.scrub")
    with open(path, "rb") as src, open(tmp, "wb") as dst:
        carry = b""
        while True:
            block = src.read(BLOCK)
            data = carry + block
            for n in needles:
                data = data.replace(n, mask)
            if not block:
                dst.write(data)
                break
            cut = max(0, len(data) - keep)
            dst.write(data[:cut])
            carry = data[cut:]
    os.replace(tmp, path)
    return True
