"""Trees in pygit2's object database: what an entry's mode means, a folder or a set of path
edits written as a tree, and the paths where two trees differ.

Only the trees along the edited paths are rebuilt (`tree_with_edits`), whatever the size of the
rest of the tree. Names that are not UTF-8 (git's names are bytes; a path read
from the file system carries its undecodable bytes as surrogates) are written byte for byte.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pygit2

from ledger.storage.runtree import Edit

MODE_TREE = pygit2.enums.FileMode.TREE
MODE_BLOB = pygit2.enums.FileMode.BLOB
MODE_EXEC = pygit2.enums.FileMode.BLOB_EXECUTABLE
MODE_LINK = pygit2.enums.FileMode.LINK
MODE_COMMIT = pygit2.enums.FileMode.COMMIT  # a submodule's gitlink
# a name read from the file system with bytes that are not UTF-8 carries them as surrogates
_SURROGATE = re.compile("[\ud800-\udfff]")

_KINDS = {
    int(MODE_BLOB): "file",
    int(MODE_EXEC): "file",
    int(MODE_TREE): "folder",
    int(MODE_LINK): "symbolic link",
    int(MODE_COMMIT): "gitlink (a submodule's commit)",
}


def entry_kind(mode: int) -> str:
    """What a tree entry of `mode` is, in words for a message: file, folder, symbolic link, gitlink."""
    return _KINDS.get(mode, f"entry of mode {mode:o}")


def is_file_mode(mode: int) -> bool:
    """Whether a tree entry is a file whose bytes ledger may read (a blob; not a link or gitlink)."""
    return mode in (MODE_BLOB, MODE_EXEC)


def tree_from_dir(repo: pygit2.Repository, folder: Path) -> str:
    """A tree of every file below `folder` (symlinks stored as links, never followed)."""
    tb = repo.TreeBuilder()
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_symlink():
            tb.insert(entry.name, repo.create_blob(os.readlink(entry.path).encode()), MODE_LINK)
        elif entry.is_dir():
            tb.insert(entry.name, pygit2.Oid(hex=tree_from_dir(repo, Path(entry.path))), MODE_TREE)
        elif entry.is_file():
            mode = MODE_EXEC if entry.stat().st_mode & 0o111 else MODE_BLOB
            tb.insert(entry.name, repo.create_blob_fromdisk(entry.path), mode)
    return str(tb.write())


def _split_edits(edits: dict[str, Edit]) -> tuple[dict[str, Edit], dict[str, dict[str, Edit]]]:
    """The edits of this tree's own entries, and those below each of its folders."""
    here: dict[str, Edit] = {}
    below: dict[str, dict[str, Edit]] = {}
    for path, value in edits.items():
        head, sep, rest = path.partition("/")
        if sep:
            below.setdefault(head, {})[rest] = value
        else:
            here[head] = value
    return here, below


def _sub_base(base: Any, here: dict[str, Edit], name: str) -> str | None:
    """The folder that edits below `name` go on top of: the new value set for `name` in the same
    call (a run folder into the tip's shard folder), else the base tree's entry (None: none)."""
    if name in here:
        value = here[name]
        return value[0] if value is not None and value[1] == MODE_TREE else None
    existing = base[name] if base is not None and name in base else None
    return str(existing.id) if existing is not None and existing.filemode == MODE_TREE else None


def tree_with_edits(repo: pygit2.Repository, base_tree: str | None, edits: dict[str, Edit]) -> str:
    """`base_tree` with paths set to (oid, mode) or removed (None); only touched trees are rebuilt."""
    here, below = _split_edits(edits)
    base: Any = repo[base_tree] if base_tree else None
    for name, sub in below.items():
        new_sub = tree_with_edits(repo, _sub_base(base, here, name), sub)
        written: Any = repo[new_sub]
        here[name] = None if len(written) == 0 else (new_sub, int(MODE_TREE))
    if any(_SURROGATE.search(name) for name in here):
        return _raw_tree(repo, base, here)
    tb = repo.TreeBuilder(base) if base is not None else repo.TreeBuilder()
    for name, value in here.items():
        if value is None:
            if tb.get(name) is not None:
                tb.remove(name)
        else:
            tb.insert(name, pygit2.Oid(hex=value[0]), value[1])
    return str(tb.write())


def _raw_tree(repo: pygit2.Repository, base: Any, edits: dict[str, Edit]) -> str:
    """A tree written byte for byte, for names that are not UTF-8 (pygit2's TreeBuilder only
    takes UTF-8 names; git's names are bytes, and a path read from the file system arrives
    here with its undecodable bytes as surrogates)."""
    entries: dict[bytes, tuple[bytes, int]] = {}
    for e in base if base is not None else ():
        entries[e.raw_name] = (e.id.raw, int(e.filemode))
    for name, value in edits.items():
        raw = name.encode("utf-8", "surrogateescape")
        if value is None:
            entries.pop(raw, None)
        else:
            entries[raw] = (pygit2.Oid(hex=value[0]).raw, value[1])
    # git's order: names as bytes, a tree's name as if it ended in "/"
    order = sorted(entries, key=lambda n: n + b"/" if entries[n][1] == MODE_TREE else n)
    data = b"".join(b"%o %s\0%s" % (entries[n][1], n, entries[n][0]) for n in order)
    return str(repo.odb.write(pygit2.enums.ObjectType.TREE, data))


def tree_changes(repo: pygit2.Repository, old: str | None, new: str | None, prefix: str = "") -> dict[str, Edit]:
    """Every path whose entry differs between two trees (None: absent), as its entry in `new`
    (None: not there); a folder is walked only where the two folders' ids differ."""
    a, b = _entries(repo, old), _entries(repo, new)
    out: dict[str, Edit] = {}
    for name in sorted(a.keys() | b.keys()):
        was, now = a.get(name), b.get(name)
        if was != now:
            _add_change(repo, prefix + name, was, now, out)
    return out


def _folder(entry: Edit) -> str | None:
    """The tree id of an entry that is a folder (None: absent, or not a folder)."""
    return entry[0] if entry is not None and entry[1] == MODE_TREE else None


def _add_change(repo: pygit2.Repository, path: str, was: Edit, now: Edit, out: dict[str, Edit]) -> None:
    """One name whose entry differs into `out`: a file's new entry (None: gone), and below a
    folder on either side every path that differs."""
    was_folder, now_folder = _folder(was), _folder(now)
    if was_folder is None and now_folder is None:
        out[path] = now
        return
    if was is not None and was_folder is None:
        out[path] = None  # a file replaced by a folder
    if now is not None and now_folder is None:
        out[path] = now  # a folder replaced by a file
    out.update(tree_changes(repo, was_folder, now_folder, path + "/"))


def _entries(repo: pygit2.Repository, tree: str | None) -> dict[str, tuple[str, int]]:
    """name -> (oid, mode) of a tree's entries; names as paths read from disk carry them
    (undecodable bytes as surrogates)."""
    if tree is None:
        return {}
    obj: Any = repo[tree]
    return {e.raw_name.decode("utf-8", "surrogateescape"): (str(e.id), int(e.filemode)) for e in obj}
