"""The one cache helper: small derived files under `.git/ledger/<kind>/`, named by a content key.

Everything cached there can be rebuilt from git or from the machine (parsed metrics, diff
reports, image probe answers, host facts), so every failure to read or write a cache entry is a
miss, never an error: a damaged, foreign or unreadable entry is simply rebuilt.

Every entry's name carries the version of the code that produced it (`code_version`: a hash of
the source of the modules each cache names), so a ledger whose parser or report changed never
reads an entry an older one wrote, and nobody has to remember to bump a version by hand.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from ledger.fsutil import write_atomic

T = TypeVar("T")


@functools.cache
def code_version(*modules: str) -> str:
    """A short hash of the source files of `modules` (dotted names, read, never imported)."""
    digest = hashlib.sha256()
    for name in modules:
        loaded = sys.modules.get(name)
        origin = getattr(loaded, "__file__", None) if loaded is not None else None
        if origin is None:
            spec = importlib.util.find_spec(name)
            origin = spec.origin if spec is not None else None
        digest.update(name.encode() + b"\0")
        if origin:
            digest.update(Path(origin).read_bytes())
    return digest.hexdigest()[:12]


class LocalCache:
    """One kind of cached entry (`metrics`, `diffs`, `images`, `host`, ...) of one repository.

    `code`: the modules whose code makes the entries (see `code_version`); their version is part of
    every entry's name."""

    def __init__(self, common_dir: Path, kind: str, code: Sequence[str] = ()):
        self.dir = Path(common_dir) / "ledger" / kind
        self.version = code_version(*code) if code else ""

    @classmethod
    def at(cls, folder: Path, code: Sequence[str] = ()) -> LocalCache:
        """A cache kept in `folder` itself (callers that are handed their cache folder)."""
        cache = cls.__new__(cls)
        cache.dir = Path(folder)
        cache.version = code_version(*code) if code else ""
        return cache

    def path(self, key: str, suffix: str = "") -> Path:
        return self.dir / (f"{key}-{self.version}{suffix}" if self.version else f"{key}{suffix}")

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
