"""Scan the data files ledger tracks with DVC (rollout `.pt` files, event logs, `--data` paths) for secrets.

Those files go to the DVC cache and remote byte for byte: they cannot be redacted (a `.pt` file is a
zip archive made by `torch.save`; a masked byte would break it), so a file that holds a secret is
held back instead (`ledger.record.datatrack.track_data` keeps it out of DVC, and the manifest names the
file and the rule, never the value). A file is scanned as bytes, streamed: `CHUNK` bytes at a time,
each window overlapping the last by `OVERLAP` bytes, so a secret up to `OVERLAP` bytes long is found
whatever boundary it straddles and memory stays bounded whatever the file's size. Each window is
scanned as it is and without its NUL bytes (UTF-16/32 text, numpy string arrays) by the run's
`Redactor` triggers; around each trigger hit, `CONTEXT` bytes each side go through the rules that need
no name (`ledger.redact.rules.shape_spans`: the catalogue's and our own token shapes, credentials in
URLs and Authorization headers), on the bytes and on their printable runs (a token in a pickle ends
at an opcode byte, not at the space a rule may want), PEM private-key headers, and the run's known
secret values in every printed form (`ledger.redact.variants`). A zip archive's members (a `.pt`
file's pickle and tensor storages, compressed or not) are scanned the same way, each streamed from
the archive, and their names with them; then the archive's own bytes but for its stored members'
(the same bytes: scanned once); a member that cannot be read (encrypted, damaged) holds the file
back. A file named
as gitleaks' file rules say (`*.p12`, `*.pfx`: `ledger.redact.gitleaks.file_name_rules`) is held
back by its name.

Named syntaxes (``password: x``) are not looked for: a rollout holds model text, and a prompt about
passwords is no credential.
"""

from __future__ import annotations

import os
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import msgspec

from ledger.redact import rules
from ledger.redact.gitleaks import file_name_rules
from ledger.redact.names import KNOWN_VALUE, Redactions
from ledger.redact.scanner import Redactor
from ledger.redact.spans import literal_spans

CHUNK = 4 << 20
OVERLAP = 64 << 10
CONTEXT = 16 << 10
UNREADABLE = "unreadable-zip-member"
_PRINTABLE = re.compile(rb"[\t\x20-\x7e]{6,}")


class Hit(msgspec.Struct, frozen=True):
    """A secret found in a data file: which file (relative to what was scanned; ``a.pt!member``
    for a zip member) and which rule found it (a kind as `redacted` records it), never the value."""

    file: str
    rule: str


def scan_output(redactor: Redactor, root: Path) -> list[Hit]:
    """Every hit in the file `root`, or in every file below the folder `root` (symbolic links
    are not followed: DVC does not track them either)."""
    if root.is_file():
        return scan_file(redactor, root, root.name)
    hits: list[Hit] = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink():
                hits += scan_file(redactor, path, path.relative_to(root).as_posix())
    return hits


def scan_file(redactor: Redactor, path: Path, name: str) -> list[Hit]:
    """The hits in one file (`name`: how the hit names it), each rule once per file or member."""
    hits = [Hit(name, f"file-name:gitleaks:{rid}") for rid, rx in file_name_rules() if rx.search(name)]
    member_hits, stored = _zip_hits(redactor, path, name) if zipfile.is_zipfile(path) else ([], [])
    with open(path, "rb") as f:  # the file's own bytes, but for the stored members' (scanned already)
        kinds: set[str] = set()
        for start, end in _gaps(stored, os.fstat(f.fileno()).st_size):
            f.seek(start)
            kinds |= _stream_kinds(redactor, _Slice(f, end - start))
    return hits + [Hit(name, kind) for kind in sorted(kinds)] + member_hits


def _zip_hits(redactor: Redactor, path: Path, name: str) -> tuple[list[Hit], list[tuple[int, int]]]:
    """The hits in each member of a zip archive (its name, its bytes read through the archive:
    decompressed), and where the stored members' bytes lie in the file."""
    hits: list[Hit] = []
    stored: list[tuple[int, int]] = []
    try:
        with zipfile.ZipFile(path) as archive, open(path, "rb") as raw:
            for info in archive.infolist():
                where = f"{name}!{info.filename}"
                kinds = kinds_in(redactor, info.filename.encode("utf-8", "surrogateescape"))
                try:
                    with archive.open(info) as member:
                        kinds |= _stream_kinds(redactor, member)
                except (OSError, RuntimeError, zipfile.BadZipFile, NotImplementedError, EOFError):
                    kinds.add(UNREADABLE)  # encrypted, damaged or of an unknown compression: not known clean
                else:
                    if info.compress_type == zipfile.ZIP_STORED:
                        start = _data_offset(raw, info)
                        stored.append((start, start + info.compress_size))
                hits += [Hit(where, kind) for kind in sorted(kinds)]
    except (OSError, zipfile.BadZipFile):  # not a readable archive after all: its bytes are scanned whole
        return [], []
    return hits, stored


def _data_offset(raw: IO[bytes], info: zipfile.ZipInfo) -> int:
    """Where a member's bytes start: after its local header (30 bytes, its name, its extra field)."""
    raw.seek(info.header_offset + 26)
    lengths = raw.read(4)
    return info.header_offset + 30 + int.from_bytes(lengths[:2], "little") + int.from_bytes(lengths[2:], "little")


def _gaps(covered: list[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """The ranges of a file of `size` bytes outside the `covered` ones."""
    out: list[tuple[int, int]] = []
    pos = 0
    for start, end in sorted(covered):
        if start > pos:
            out.append((pos, start))
        pos = max(pos, end)
    if pos < size or size == 0:
        out.append((pos, size))
    return out


class _Slice:
    """`size` bytes of an open file from where it stands, read like a file."""

    def __init__(self, f: IO[bytes], size: int):
        self.f, self.left = f, size

    def read(self, n: int) -> bytes:
        data = self.f.read(min(n, self.left))
        self.left -= len(data)
        return data


def _windows(f: IO[bytes] | _Slice) -> Iterator[bytes]:
    """The stream in windows of up to `CHUNK` + `OVERLAP` bytes, each starting `OVERLAP` bytes
    before the previous one ended."""
    tail = b""
    while chunk := f.read(CHUNK):
        window = tail + chunk
        yield window
        tail = window[-OVERLAP:]


def _stream_kinds(redactor: Redactor, f: IO[bytes] | _Slice) -> set[str]:
    kinds: set[str] = set()
    for window in _windows(f):
        kinds |= kinds_in(redactor, window)
        if b"\0" in window:
            kinds |= kinds_in(redactor, window.replace(b"\0", b""))
    return kinds


def kinds_in(redactor: Redactor, data: bytes) -> set[str]:
    """The kinds of the secrets in `data` (bytes of any kind): shapes, PEM private keys and the
    run's known values, each looked for only around a trigger hit."""
    ends = sorted(set(redactor.trigger_ends(data)))
    found: set[str] = set()
    for start, end in _contexts(ends, len(data)):
        part = data[start:end]
        acc = Redactions()
        rules.shape_spans(part, acc)
        # its printable runs, one a line: a token in a pickle is followed by an opcode byte, where
        # a rule wants the token's end (a space, a quote, the line's end)
        rules.shape_spans(b"\n".join(_PRINTABLE.findall(part)), acc)
        if rules.PEM_BEGIN.search(part) is not None:
            acc.add_kind("private-key")
        if redactor.needles and literal_spans(part, redactor.needles):
            acc.add_kind(KNOWN_VALUE)
        found |= acc.kinds
    return found


def _contexts(ends: list[int], size: int) -> list[tuple[int, int]]:
    """`CONTEXT` bytes before and after each hit, overlapping ones joined."""
    out: list[tuple[int, int]] = []
    for end in ends:
        start, stop = max(0, end - CONTEXT), min(size, end + CONTEXT)
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], stop)
        else:
            out.append((start, stop))
    return out
