"""The one cache helper: small derived files under `.git/ledger/<kind>/`, named by a content key.

Everything cached there can be rebuilt from git or from the machine (parsed metrics, diff
reports, image probe answers, host facts), so every failure to read or write a cache entry is a
miss, never an error: a damaged, foreign or unreadable entry is simply rebuilt.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any, TypeVar

from ledger.fsutil import write_atomic

T = TypeVar("T")


class LocalCache:
    """One kind of cached entry (`metrics`, `diffs`, `images`, `host`, ...) of one repository."""

    def __init__(self, common_dir: Path, kind: str):
        self.dir = Path(common_dir) / "ledger" / kind

    @classmethod
    def at(cls, folder: Path) -> LocalCache:
        """A cache kept in `folder` itself (callers that are handed their cache folder)."""
        cache = cls.__new__(cls)
        cache.dir = Path(folder)
        return cache

    def path(self, key: str, suffix: str = "") -> Path:
        return self.dir / f"{key}{suffix}"

    def read_json(self, key: str) -> Any | None:
        """The entry's JSON value, or None when absent or unreadable."""
        try:
            return json.loads(self.path(key, ".json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def write_json(self, key: str, value: Any) -> None:
        self._write(self.path(key, ".json"), json.dumps(value, indent=1, sort_keys=True, default=str).encode())

    def read_pickle(self, key: str, kind: type[T]) -> T | None:
        """The pickled entry if it is a `kind` (our own files only: the cache lives inside `.git`)."""
        try:
            with open(self.path(key, ".pickle"), "rb") as f:
                value = pickle.load(f)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError, ImportError, ValueError):
            return None
        return value if isinstance(value, kind) else None

    def write_pickle(self, key: str, value: Any) -> None:
        self._write(self.path(key, ".pickle"), pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))

    def _write(self, path: Path, data: bytes) -> None:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            write_atomic(path, data)
        except OSError:
            pass  # a cache we cannot write only costs time
