"""The one cache helper: small derived files under `.git/ledger/<kind>/`, named by a content key.

Everything cached there can be rebuilt from git or from the machine (parsed metrics, diff
reports, image probe answers, host facts), so every failure to read or write a cache entry is a
miss, never an error: a damaged, foreign or unreadable entry is simply rebuilt.

Every entry's name carries the version of the code that produced it (`code_version`: a hash of
every file of the package), so a ledger whose parser or report changed never reads an entry an
older one wrote, and nobody has to remember which modules an entry depends on.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
from pathlib import Path
from typing import Any, TypeVar

from ledger.fsutil import write_atomic

T = TypeVar("T")


@functools.cache
def code_version() -> str:
    """A short hash of every file of the installed `ledger` package (its code and its data files).

    Whatever module computes a cached entry, directly or through another, its source is in the
    hash: no list of modules to keep up to date, no version to bump by hand. Any change to ledger
    is a miss for every cache (they are rebuilt from git)."""
    return tree_version(Path(__file__).resolve().parent)


def tree_version(root: Path) -> str:
    """A short hash of the names and bytes of every file under `root` (bytecode left out)."""
    digest = hashlib.sha256()
    for path in sorted(_package_files(root)):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _package_files(root: Path) -> list[Path]:
    """The package's files, compiled bytecode left out."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        out += [Path(folder) / f for f in files if not f.endswith((".pyc", ".pyo"))]
    return out


class LocalCache:
    """One kind of cached entry (`metrics`, `diffs`, `images`, `host`, ...) of one repository; the
    version of ledger's code (`code_version`) is part of every entry's name."""

    def __init__(self, common_dir: Path, kind: str):
        self.dir = Path(common_dir) / "ledger" / kind
        self.version = code_version()

    @classmethod
    def at(cls, folder: Path) -> LocalCache:
        """A cache kept in `folder` itself (callers that are handed their cache folder)."""
        cache = cls.__new__(cls)
        cache.dir = Path(folder)
        cache.version = code_version()
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
