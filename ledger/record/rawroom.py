"""A full disk while the logs are split: the raw output's split start is given back to the disk.

The copy of the job's output (`output.raw`) and its split (trainer.log, engine.log) share one
disk. When that disk fills while a log is written, the raw file's blocks that are already split
are freed (`punch_hole`), so that the logs can hold what was captured, less a quarter kept for the
record itself (its git objects, manifest and status). An empty `output.punched` marks a raw file
whose start is gone, so that `ledger recover` never splits it again.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from pathlib import Path

PUNCHED = "output.punched"  # the raw file's start was freed on a full disk (`RawRoom.make_room`)
_KEEP_SIZE, _PUNCH_HOLE = 0x01, 0x02  # linux/falloc.h
# on a full disk the logs keep the captured output less a quarter of it (at least this much), so
# that the record itself can still be written on that disk: its git objects, manifest and status
RECORD_ROOM = 1 << 20


class RawRoom:
    """The room a split may take on a disk that filled: the raw file's split start, given back.

    `written` says how much the two logs hold so far; `read_to` is kept by the split (how far the
    raw file has been read: what is past it is not split yet)."""

    def __init__(self, raw: Path, written: Callable[[], int]):
        self.raw = raw
        self._written = written
        self._budget: int | None = None  # bytes the two logs may hold, once the disk was full
        self.read_to = 0
        self._punched = 0  # the raw file's start given back to the disk (see `make_room`)

    def make_room(self) -> bool:
        """The disk is full while a log is written: give the raw file's blocks that are already
        read (split, or held in memory) back to the file system, so that the logs can hold what
        was captured (a disk filled by the raw copy left a 0-byte trainer.log). Marked
        by an empty `output.punched` (an empty file needs no block of a full disk), so that `ledger
        recover` never splits the emptied start again."""
        start, end = self._punched, self.read_to - self.read_to % 4096
        if end - start < 4096:
            return False
        if self._budget is None:  # the record (git objects, manifest) needs room on this disk too
            try:
                size = self.raw.stat().st_size
            except OSError:
                return False
            self._budget = size - max(size // 4, RECORD_ROOM)
        try:
            os.close(os.open(self.raw.parent / PUNCHED, os.O_WRONLY | os.O_CREAT, 0o600))
        except OSError:
            return False  # no room for even that: the logs stop here, and say so
        if not punch_hole(self.raw, start, end - start):
            return False
        self._punched = end
        return True

    def give_back_split(self) -> None:
        """The split is done: on a disk that filled, give the rest of the raw file back too (the
        copy may have refilled what `make_room` freed while the job still wrote, and the
        worker's metrics and result need room: without it the worker failed and the run kept
        only the note that its logs were cut where the split stopped)."""
        if (
            self._budget is not None
            and self.read_to - self._punched >= 4096
            and punch_hole(self.raw, self._punched, self.read_to - self._punched)
        ):
            self._punched = self.read_to

    def room(self) -> int | None:
        """How many more bytes the logs may take (None: no bound, the disk has not filled)."""
        if self._budget is None:
            return None
        return self._budget - self._written()


def punch_hole(path: Path, offset: int, length: int) -> bool:
    """Free a range of a file's blocks, its size unchanged (Linux `fallocate` with
    FALLOC_FL_PUNCH_HOLE: ext4, xfs, btrfs, tmpfs). False where the system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fallocate = libc.fallocate
    except (OSError, AttributeError):
        return False
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        return int(fallocate(fd, _PUNCH_HOLE | _KEEP_SIZE, offset, length)) == 0
    finally:
        os.close(fd)


def was_punched(staging_dir: Path) -> bool:
    """Whether the raw output's start was given back to a full disk (`RawRoom.make_room`)."""
    return (staging_dir / PUNCHED).exists()
