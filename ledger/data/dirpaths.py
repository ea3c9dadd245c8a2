"""The paths a pulled DVC record names, checked before anything is written.

A `.dir` listing is a JSON list of `{"md5", "relpath"}` written by whoever pushed the run, and
dvc-data joins each relpath onto the checkout destination as it is: `../../.git/config` would be
written outside it (then run by git as a `core.fsmonitor` command). So every relpath must be a
plain relative path (no `..`, `.`, empty or absolute parts, no backslash or control character),
no two entries may name the same file or a file inside another file, and every md5 must be one.
`materialise` then writes each file below a destination whose folders it creates itself, never
following a symbolic link, and checks each file's md5 as it writes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ledger.errors import DataError

MD5_RE = re.compile(r"^[0-9a-f]{32}$")
OUT_MD5_RE = re.compile(r"^[0-9a-f]{32}(\.dir)?$")
MAX_LISTING_BYTES = 256 << 20  # a listing of a million files is ~80 MB
_BAD_PART = re.compile(r"[\x00-\x1f\x7f\\]")
_CHUNK = 1 << 20


def check_relpath(rel: Any) -> tuple[str, ...]:
    """The parts of a listing's relpath; DataError unless it stays inside its folder."""
    if not isinstance(rel, str) or not rel or rel.startswith("/"):
        raise DataError(
            f"the folder listing names the path {str(rel)[:80]!r}, which is not relative",
            "the run's data is not trusted; it was not written",
        )
    parts = tuple(rel.split("/"))
    if any(p in ("", ".", "..") or _BAD_PART.search(p) for p in parts):
        raise DataError(
            f"the folder listing names the path {rel[:80]!r}, which leaves its folder or is not plain",
            "the run's data is not trusted; it was not written",
        )
    return parts


def check_listing(raw: bytes, label: str) -> list[tuple[str, str]]:
    """(relpath, md5) of every file of a `.dir` listing, each path checked (see module doc)."""
    if len(raw) > MAX_LISTING_BYTES:
        raise DataError(f"the folder listing of {label} is {len(raw)} bytes, more than ledger reads", "the run's data is not trusted")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise DataError(f"the folder listing of {label} is not a DVC listing", "the run's data is not trusted") from exc
    if not isinstance(data, list):
        raise DataError(f"the folder listing of {label} is not a DVC listing", "the run's data is not trusted")
    out: list[tuple[str, str]] = []
    seen: set[tuple[str, ...]] = set()
    for entry in data:
        if not isinstance(entry, dict) or not isinstance(entry.get("md5"), str) or not MD5_RE.match(entry["md5"]):
            raise DataError(f"the folder listing of {label} has an entry without a valid md5", "the run's data is not trusted")
        parts = check_relpath(entry.get("relpath"))
        if parts in seen:
            raise DataError(f"the folder listing of {label} names {'/'.join(parts)[:80]!r} twice", "the run's data is not trusted")
        seen.add(parts)
        out.append(("/".join(parts), entry["md5"]))
    _check_no_file_is_a_folder(seen, label)
    return out


def _check_no_file_is_a_folder(seen: set[tuple[str, ...]], label: str) -> None:
    """Refuse a listing where a file is also a folder of another entry."""
    for parts in seen:
        for n in range(1, len(parts)):
            if parts[:n] in seen:
                raise DataError(
                    f"the folder listing of {label} names {'/'.join(parts[:n])[:80]!r} as a file and a folder",
                    "the run's data is not trusted",
                )


def open_dir(root: Path, parts: Sequence[str], create: bool) -> int:
    """A descriptor of `root/parts...`, each part created (when `create`) or opened without ever
    following a symbolic link; DataError when one is a link or not a folder."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i, part in enumerate(parts):
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                nfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                where = root.joinpath(*parts[: i + 1])
                raise DataError(
                    f"{where} is a symbolic link or not a folder ({exc.strerror})", "ledger never writes through a link; remove it"
                ) from exc
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def materialise(root: Path, dest: Sequence[str], files: Sequence[tuple[str | None, str, str]]) -> None:
    """Write `files` ((relpath or None for a single file, cache object path, md5)) at
    `root/dest...`: built under a temporary sibling without following links, each file's md5
    checked, then renamed into place. Nothing is left behind on failure."""
    *parent, name = dest
    pfd = open_dir(root, parent, create=True)
    tmp = f".{name}.{os.getpid()}.tmp"
    try:
        if any(rel is None for rel, _, _ in files):
            _, src, md5 = files[0]
            _write_one(pfd, tmp, src, md5, name)
        else:
            os.mkdir(tmp, 0o755, dir_fd=pfd)
            for rel, src, md5 in files:
                assert rel is not None
                *folders, leaf = rel.split("/")
                dfd = open_dir(root.joinpath(*parent), [tmp, *folders], create=True)
                try:
                    _write_one(dfd, leaf, src, md5, rel)
                finally:
                    os.close(dfd)
        os.rename(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
    except BaseException:
        shutil.rmtree(root.joinpath(*parent, tmp), ignore_errors=True)
        try:
            os.unlink(tmp, dir_fd=pfd)
        except OSError:
            pass
        raise
    finally:
        os.close(pfd)


def _write_one(dfd: int, leaf: str, src: str, md5: str, label: str) -> None:
    """Copy the cache object `src` to `leaf` in folder `dfd` (a new file, never through a link),
    hashing it on the way; DataError when its md5 is not the recorded one."""
    digest = hashlib.md5(usedforsecurity=False)
    out = os.open(leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dfd)
    try:
        with open(src, "rb") as f, os.fdopen(out, "wb", closefd=False) as w:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
                w.write(chunk)
    finally:
        os.close(out)
    if digest.hexdigest() != md5:
        os.unlink(leaf, dir_fd=dfd)
        raise DataError(
            f"{label}: the cached object does not match its recorded md5 {md5}",
            "the DVC cache or the remote holds altered data; it was not used",
        )
