"""The one cache helper: small derived files under `.git/ledger/<kind>/`, named by a content key.

Everything cached there can be rebuilt from git or from the machine (parsed metrics, diff
reports, image probe answers, host facts), so every failure to read or write a cache entry is a
miss, never an error: a damaged, foreign or unreadable entry is simply rebuilt.

Every entry's name carries the version of the code that produced it (`code_version`: a hash of
every file of the package, or of the files the modules that compute the entry import, followed to
the end: `ledger.codeclosure`), so a ledger whose parser or report changed never reads an entry an
older one wrote, and nobody has to remember which modules an entry depends on.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import time
from pathlib import Path
from typing import Any, TypeVar

from ledger.fsutil import write_atomic

T = TypeVar("T")


def user_cache_dir(kind: str) -> Path:
    """`~/.cache/ledger/<kind>` (or under XDG_CACHE_HOME): what is kept per user, not per repository."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ledger" / kind


@functools.cache
def code_version(*modules: str) -> str:
    """A short hash of the installed `ledger` package: of every file of it (its code and its data
    files), or, given the modules that compute a cache's entries (`ledger.storage.listing`), of
    the code those modules run (`ledger.codeclosure.closure`: their imports within ledger followed
    to the end) and every data file.

    Whatever module computes a cached entry, directly or through another, its source is in the
    hash: no list of modules to keep up to date, no version to bump by hand. Without `modules` any
    change to ledger is a miss; with them, a change to code they never run is not."""
    return tree_version(Path(__file__).resolve().parent, memo=user_cache_dir("code-version"), modules=modules)


_RACY_NS = 2_000_000_000  # file times are kept in coarse ticks (a few ms); two seconds is far above


def tree_version(root: Path, memo: Path | None = None, modules: tuple[str, ...] = ()) -> str:
    """A short hash of the names and bytes of every file under `root` (bytecode left out); with
    `modules` (names in the package `root` is), of the Python files they run and every other file.

    With `memo`, the hash is kept there under the files' names, sizes, modification times and
    inodes: the rule git's index uses to know a file unchanged without reading it. Any file
    written, added, removed or renamed changes that key, so the hash is read again only for the
    very files it was computed from. As git does with "racy" entries, nothing is kept while a file
    is younger than the filesystem's clock can tell apart (`_RACY_NS`): a second write in the same
    tick would keep the same mtime."""
    files = _package_files(root)
    key = None
    if memo is not None:
        stats, newest = hashlib.sha256(os.fsencode(root) + "\0".join(("", *modules)).encode()), 0
        for rel, entry in files:
            st = entry.stat()
            stats.update(f"\0{rel}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}".encode())
            newest = max(newest, st.st_mtime_ns)
        key = memo / stats.hexdigest()[:32] if newest < time.time_ns() - _RACY_NS else None
    if key is not None:
        try:
            known = key.read_text()
            if len(known) == 12 and all(c in "0123456789abcdef" for c in known):
                return known
        except OSError:
            pass
    contents = []
    for rel, entry in files:
        with open(entry.path, "rb") as f:
            contents.append((rel, f.read()))
    if modules:
        contents = _run_by(contents, modules)
    digest = hashlib.sha256()
    for rel, data in contents:
        digest.update(rel.encode() + b"\0")
        digest.update(data)
    version = digest.hexdigest()[:12]
    if key is not None:
        try:
            key.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(key, version.encode())
        except OSError:
            pass  # not kept: computed again next time
    return version


def _run_by(contents: list[tuple[str, bytes]], modules: tuple[str, ...]) -> list[tuple[str, bytes]]:
    """The package's files that `modules` run (`codeclosure.closure`), and every file that is not
    Python source (data files: a module may read any of them)."""
    from ledger.codeclosure import PACKAGE, closure

    rels = {
        ".".join([PACKAGE, *rel.removesuffix(".py").split("/")]).removesuffix(".__init__"): rel
        for rel, _ in contents
        if rel.endswith(".py")
    }
    source = dict(contents)
    run = {rels[name] for name in closure({name: source[rel] for name, rel in rels.items()}, modules)}
    return [(rel, data) for rel, data in contents if rel in run or not rel.endswith(".py")]


def _package_files(root: Path) -> list[tuple[str, os.DirEntry[str]]]:
    """The package's files as (path relative to `root`, with `/`, and its directory entry), by
    that path; compiled bytecode left out."""
    out: list[tuple[str, os.DirEntry[str]]] = []
    folders = [("", str(root))]
    while folders:
        prefix, folder = folders.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        folders.append((prefix + entry.name + "/", entry.path))
                elif not entry.name.endswith((".pyc", ".pyo")):
                    out.append((prefix + entry.name, entry))
    return sorted(out, key=lambda f: f[0])


class LocalCache:
    """One kind of cached entry (`metrics`, `diffs`, `images`, `host`, ...) of one repository; the
    version of ledger's code (`code_version`, of the modules `code` names where they alone compute
    the entries) is part of every entry's name."""

    def __init__(self, common_dir: Path, kind: str, code: tuple[str, ...] = ()):
        self.dir = Path(common_dir) / "ledger" / kind
        self.version = code_version(*code)

    @classmethod
    def at(cls, folder: Path, code: tuple[str, ...] = ()) -> LocalCache:
        """A cache kept in `folder` itself (callers that are handed their cache folder)."""
        cache = cls.__new__(cls)
        cache.dir = Path(folder)
        cache.version = code_version(*code)
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
