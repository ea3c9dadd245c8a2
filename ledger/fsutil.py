"""The one way ledger replaces a file: write a temp file beside it, then `os.replace`.

A reader (another ledger, `git`, a crash-time `ledger recover`) sees the old bytes or the new ones,
never half a file. Temp names carry the pid and thread id, so concurrent writers of the same path
never share a temp file; the temp file is removed when the write fails. Also the one way a log
is read whole without copying it (`mapped`).
"""

from __future__ import annotations

import mmap
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


@contextmanager
def atomic_writer(path: Path, mode: int = 0o666) -> Iterator[BinaryIO]:
    """A binary file that replaces `path` when the block ends without an error (`mode`: its
    permissions from the first byte, less the umask: 0o600 for what holds secrets)."""
    path = Path(path)
    tmp = _temp_name(path)
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: Path, data: bytes | str) -> None:
    """Replace `path` with `data` (text is written as UTF-8) in one step."""
    with atomic_writer(path) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


@contextmanager
def mapped(path: Path) -> Iterator[bytes | mmap.mmap]:
    """A file's bytes, memory-mapped read-only (an empty file, which cannot be mapped, is b"")."""
    with open(path, "rb") as f:
        try:
            view: bytes | mmap.mmap = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:
            view = b""
        try:
            yield view
        finally:
            if isinstance(view, mmap.mmap):
                view.close()


def inode_clock(folder: Path) -> float:
    """Now, on the clock the kernel stamps inode times with: a coarse clock, up to a tick (~4 ms)
    behind `time.time()`, so a file made just after `t = time.time()` has a ctime before `t`. A file
    changed after this call has a ctime at or after what it returns (read from a file made in
    `folder` and removed again; `time.time()` where `folder` cannot take one)."""
    probe = _temp_name(Path(folder) / "clock")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return time.time()
    try:
        return os.fstat(fd).st_ctime
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)
