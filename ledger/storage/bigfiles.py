"""Uncommitted files too big to store in a run's tree: recorded by size and git blob id instead.

Reading a file before the job starts holds the job back by as long as the read takes (a 2 GiB
dirty file: 83 s of redaction scan, compression and write before the job's first instruction, and
the whole blob in the run's tree). A changed tracked file over `code.max_file_mb` is therefore not
read before the job (`ledger.storage.snapshot.code_snapshot` keeps HEAD's entry and notes its size and mtime); its
blob id, as `git hash-object` gives it, is computed here on a thread once the job has started, and
the record waits for it when the job ends. A file whose size or mtime changed from what the
snapshot saw (the job wrote to it) gets no id: what the job started with can no longer be read.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO, TypedDict

from ledger.timefmt import iso

CHUNK = 1 << 20
_ZEROS = bytes(CHUNK)


def too_big(path: Path, limit: int | None) -> dict[str, int] | None:
    """{"size", "mtime_ns"} of a regular file bigger than `limit` bytes (None: smaller, or no limit)."""
    if limit is None:
        return None
    try:
        st = path.lstat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size <= limit:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


class LargeFile(TypedDict):
    """One entry of the manifest's `code.large_files` (a changed file too big for the code tree)."""

    size: int
    mtime: str | None  # ISO time
    oid: str | None  # git's blob id; None until hashed, or when the file changed while the job ran


def describe(large: Mapping[str, Mapping[str, int]]) -> dict[str, LargeFile]:
    """The manifest's `code.large_files` before anything is hashed: path -> size, mtime, oid None."""
    return {path: {"size": seen["size"], "mtime": iso(seen["mtime_ns"] / 1e9), "oid": None} for path, seen in large.items()}


def blob_id(path: Path, seen: Mapping[str, int]) -> str | None:
    """git's blob id of the file at `path`; None when it is not the file the code snapshot saw
    (another size or mtime, before or after the read) or cannot be read."""
    try:
        with open(path, "rb") as f:
            if not _same(os.fstat(f.fileno()), seen):
                return None
            digest = hashlib.sha1(b"blob %d\0" % seen["size"], usedforsecurity=False)
            if not _hash_file(f, digest, seen["size"]):
                return None
            return digest.hexdigest() if _same(os.fstat(f.fileno()), seen) else None
    except OSError:
        return None


def _hash_file(f: BinaryIO, digest: Any, size: int) -> bool:
    """Feed the file's first `size` bytes to `digest`; False when it is shorter. The holes of a
    sparse file are zeros by definition: they are hashed as zeros, not read (SEEK_DATA/SEEK_HOLE)."""
    fd, pos = f.fileno(), 0
    while pos < size:
        data, hole = _next_data(fd, pos, size)
        for _ in range((data - pos) // CHUNK):
            digest.update(_ZEROS)
        digest.update(_ZEROS[: (data - pos) % CHUNK])
        os.lseek(fd, data, os.SEEK_SET)
        left = hole - data
        while left > 0:
            chunk = os.read(fd, min(CHUNK, left))
            if not chunk:  # it shrank meanwhile
                return False
            digest.update(chunk)
            left -= len(chunk)
        pos = hole
    return True


def _next_data(fd: int, pos: int, size: int) -> tuple[int, int]:
    """(start, end) of the next stretch of data at or after `pos`, within `size`; the whole rest
    when the file system cannot say where its holes are."""
    try:
        data = min(os.lseek(fd, pos, os.SEEK_DATA), size)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # no data after `pos`: the rest is a hole
            return size, size
        return pos, size
    try:
        return data, min(os.lseek(fd, data, os.SEEK_HOLE), size)
    except OSError:
        return data, size


def _same(st: os.stat_result, seen: Mapping[str, int]) -> bool:
    return st.st_size == seen["size"] and st.st_mtime_ns == seen["mtime_ns"]


class BlobHashes:
    """The blob ids of the code snapshot's big files, computed on a thread started once the job
    runs; `result` waits for them (a sparse file's holes cost no read, the rest one read)."""

    def __init__(self, root: Path, large: Mapping[str, Mapping[str, int]]):
        self._root = root
        self._large = dict(large)
        self.ids: dict[str, str | None] = {}
        self._thread = threading.Thread(target=self._hash, name="ledger-bigfiles", daemon=True)
        if self._large:
            self._thread.start()

    def _hash(self) -> None:
        for rel, seen in self._large.items():
            self.ids[rel] = blob_id(self._root / rel, seen)

    def result(self) -> tuple[dict[str, LargeFile], list[str]]:
        """`code.large_files` with each blob id (None: the file changed while the job ran), and a
        warning per file left without one."""
        if self._large:
            self._thread.join()
        out = describe(self._large)
        notes = []
        for rel, entry in out.items():
            entry["oid"] = self.ids.get(rel)
            if entry["oid"] is None:
                notes.append(f"{rel}: no blob id recorded (it changed while the job ran, or could not be read); its size and mtime are")
        return out, notes
