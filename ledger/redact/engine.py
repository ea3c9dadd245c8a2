"""The trigger engine: where in a block any of a set of patterns ends, in one pass.

Hyperscan scans for all patterns at once (several GB/s); where its wheel cannot be installed, or
it refuses a pattern, one combined Python regex gives the same ends, slower. A database is
compiled once per process and kept serialized; with `persist` (the rules' triggers, which hold no
secret, never a run's known values) also in the per-user cache, so a new process loads it
instead of compiling again. The only module that imports hyperscan.
"""

from __future__ import annotations

import hashlib
import platform
import re
from pathlib import Path
from typing import Any

from ledger.cache import user_cache_dir
from ledger.fsutil import write_atomic

Pattern = tuple[bytes, bool]  # (pattern, caseless)


def hyperscan_compiles(pattern: bytes, caseless: bool) -> bool:
    """Whether Hyperscan takes `pattern` (True where no Hyperscan is installed: `re` takes any)."""
    try:
        import hyperscan
    except ImportError:
        return True
    try:
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(expressions=[pattern], flags=[hyperscan.HS_FLAG_CASELESS if caseless else 0])
    except Exception:
        return False
    return True


_COMPILED: dict[tuple[Pattern, ...], bytes] = {}


def _database(hyperscan: Any, patterns: list[Pattern], persist: bool = False) -> Any:
    """A Hyperscan block database of `patterns` with its own scratch (one per stream, so one per
    thread): compiled once per process, then loaded from its serialized copy (far quicker).
    With `persist` (the rules' triggers: no secret in them, never a run's known values) the
    serialized copy is also kept in the per-user cache (`_db_file`), so a new process loads it."""
    key = tuple(patterns)
    if key not in _COMPILED:
        serialized = _load_db_file(hyperscan, patterns) if persist else None
        if serialized is None:
            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            db.compile(
                expressions=[p for p, _ in patterns],
                ids=list(range(len(patterns))),
                elements=len(patterns),
                flags=[hyperscan.HS_FLAG_CASELESS if c else 0 for _, c in patterns],
            )
            serialized = hyperscan.dumpb(db)
            if persist:
                _save_db_file(hyperscan, patterns, serialized)
        if len(_COMPILED) >= 8:  # the rules' set, and each Redactor's literals
            del _COMPILED[next(iter(_COMPILED))]  # the least recently used
        _COMPILED[key] = serialized
    _COMPILED[key] = _COMPILED.pop(key)  # most recently used last
    db = hyperscan.loadb(_COMPILED[key], hyperscan.HS_MODE_BLOCK)
    db.scratch = hyperscan.Scratch(db)
    return db


def _db_digest(hyperscan: Any, patterns: list[Pattern]) -> bytes:
    """What names a serialized database: every pattern and its flag, the Hyperscan binding's
    version and the machine's architecture (sha256)."""
    h = hashlib.sha256(f"{getattr(hyperscan, '__version__', '?')}\0{platform.machine()}\0".encode())
    for pattern, caseless in patterns:
        h.update(len(pattern).to_bytes(8, "little") + pattern + (b"i" if caseless else b"-"))
    return h.digest()


def _db_file(hyperscan: Any, patterns: list[Pattern]) -> Path:
    """Where the serialized database of `patterns` is kept for this user."""
    return user_cache_dir("hyperscan") / f"{_db_digest(hyperscan, patterns).hex()[:32]}.db"


def _load_db_file(hyperscan: Any, patterns: list[Pattern]) -> bytes | None:
    """The cached serialized database, or None: absent, unreadable, damaged, made for other patterns
    (its first bytes are the digest of the patterns it was compiled from) or for another platform
    (Hyperscan refuses to load it) are all a miss, never an error."""
    path = _db_file(hyperscan, patterns)
    try:
        data = path.read_bytes()
        if data[:32] != _db_digest(hyperscan, patterns):
            return None
        hyperscan.loadb(data[32:], hyperscan.HS_MODE_BLOCK)  # checks its own header, version and platform
    except Exception:  # noqa: BLE001 - any failure is a miss: the database is compiled again
        return None
    return data[32:]


def _save_db_file(hyperscan: Any, patterns: list[Pattern], data: bytes) -> None:
    """Keep the serialized database for the next process (an unwritable cache is only a miss)."""
    path = _db_file(hyperscan, patterns)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, _db_digest(hyperscan, patterns) + data)
    except OSError:
        pass


def _combined(patterns: list[Pattern]) -> re.Pattern[bytes]:
    """`patterns` as one Python regex (where Hyperscan is missing or refused them)."""
    return re.compile(b"|".join((b"(?i:" if c else b"(?:") + p + b")" for p, c in patterns))


class Engine:
    """Finds the end offsets of trigger matches in a block (Hyperscan, or Python's re)."""

    def __init__(self, patterns: list[Pattern], persist: bool = False):
        self._db: Any = None
        self._re: re.Pattern[bytes] | None = None
        self.kind = "none"
        self.refused = False  # Hyperscan is there but refused a pattern
        if not patterns:
            return
        try:
            import hyperscan
        except ImportError:  # no wheel for this platform: the same result in re
            self._re, self.kind = _combined(patterns), "re"
            return
        try:
            self._db, self.kind = _database(hyperscan, patterns, persist), "hyperscan"
        except Exception:  # a pattern it refuses (`Redactor._get_engine` then checks each form): re meanwhile
            self._re, self.kind, self.refused = _combined(patterns), "re", True

    def ends(self, data: bytes) -> list[int]:
        """End offsets (exclusive) of the matches in `data`, in no particular order."""
        if self._db is not None:
            found: list[int] = []

            def hit(_id: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
                found.append(end)

            self._db.scan(data, match_event_handler=hit)
            return found
        if self._re is not None:
            return [m.end() for m in self._re.finditer(data)]
        return []
