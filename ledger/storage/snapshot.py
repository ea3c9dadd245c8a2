"""The code a run sees: HEAD's tree plus the uncommitted changes to tracked files, written as
objects through pygit2 without touching the index (`code_snapshot`).

libgit2's status compares HEAD, index and working tree like `git status`, in-process and
without writing the index (no stat-cache refresh: the user's index stays byte-for-byte).
Untracked files are not looked at here (100,000 of them would hold the job back); they are
counted while the job runs (`UntrackedCount`).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

import msgspec
import pygit2

from ledger.storage.bigfiles import too_big
from ledger.storage.gittree import MODE_BLOB, MODE_COMMIT, MODE_EXEC, MODE_LINK, tree_changes, tree_with_edits
from ledger.storage.runtree import Edit, as_committed, patch_id

Scrub = Callable[[bytes], bytes | None]

# a path whose content differs from HEAD in the index or the working tree (untracked alone is not)
_CHANGED = (
    pygit2.enums.FileStatus.INDEX_NEW
    | pygit2.enums.FileStatus.INDEX_MODIFIED
    | pygit2.enums.FileStatus.INDEX_DELETED
    | pygit2.enums.FileStatus.INDEX_RENAMED
    | pygit2.enums.FileStatus.INDEX_TYPECHANGE
    | pygit2.enums.FileStatus.WT_MODIFIED
    | pygit2.enums.FileStatus.WT_DELETED
    | pygit2.enums.FileStatus.WT_TYPECHANGE
    | pygit2.enums.FileStatus.WT_RENAMED
)


class SubmoduleState(TypedDict):
    """A changed submodule: the commit it has checked out (the tree's gitlink), whether its
    tracked files have uncommitted changes, and the sha256 of those changes (None: none)."""

    commit: str
    dirty: bool
    patch: str | None


class CodeSnapshot(msgspec.Struct, frozen=True):
    """The code a run saw: HEAD plus uncommitted changes to tracked files."""

    commit: str
    branch: str | None
    tree: str
    dirty: bool
    patch_sha256: str | None
    untracked: int | None  # untracked files left out (None: not counted here, see UntrackedCount)
    scrubbed: list[str] = msgspec.field(default_factory=list)
    submodules: dict[str, SubmoduleState] = msgspec.field(default_factory=dict)  # by path
    # changed configuration files whose uncommitted changes the tree leaves out (runtree.as_committed)
    kept_committed: list[str] = msgspec.field(default_factory=list)
    # changed files too big to read before the job: path -> {"size": bytes, "mtime_ns": ...}; the
    # tree keeps HEAD's entry (ledger.storage.bigfiles hashes them while the job runs)
    large: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)


def changed_paths(repo: pygit2.Repository) -> list[str]:
    """The tracked paths whose content differs from HEAD in the index or the working tree."""
    return sorted(p for p, flags in repo.status(untracked_files="no").items() if flags & _CHANGED)


class _Changes(msgspec.Struct):
    """What the changed paths of a working tree come to, gathered path by path."""

    edits: dict[str, Edit] = msgspec.field(default_factory=dict)
    scrubbed: list[str] = msgspec.field(default_factory=list)
    submodules: dict[str, SubmoduleState] = msgspec.field(default_factory=dict)
    large: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)


def code_snapshot(
    repo: pygit2.Repository, root: Path, head: str, branch: str | None, scrub: Scrub | None = None, max_file_bytes: int | None = None
) -> CodeSnapshot:
    """HEAD's tree plus uncommitted changes to tracked files, without touching the index.

    `scrub` may rewrite the bytes of changed files before they are stored (ledger uses it to
    redact secrets pasted into an uncommitted launcher); files it changes are listed in
    `CodeSnapshot.scrubbed`; a file it returns None for is left out of the tree. Configuration
    files (`ledger.storage.runtree.as_committed`) keep HEAD's entry (`kept_committed`), and so
    does a changed file over `max_file_bytes`, which is never read here (`large`: its size and
    mtime; its blob id is computed once the job has started, `ledger.storage.bigfiles`).
    """
    changed = changed_paths(repo)
    commit: Any = repo[head]
    head_tree = str(commit.tree_id)
    found = _Changes()
    for rel in changed:
        if not as_committed(rel):
            _add_change(repo, root, rel, head_tree, found, scrub, max_file_bytes)
    tree = tree_with_edits(repo, head_tree, found.edits) if found.edits else head_tree
    # one id for the uncommitted state, from exactly what the tree changes (a pull recomputes it)
    patch_sha = patch_id(tree_changes(repo, head_tree, tree)) if tree != head_tree else None
    dirty = tree != head_tree or bool(found.large) or any(sub["dirty"] for sub in found.submodules.values())
    kept = [rel for rel in changed if as_committed(rel)]
    # in the order of CodeSnapshot's fields, above; untracked files are counted while the job runs
    return CodeSnapshot(head, branch, tree, dirty, patch_sha, None, found.scrubbed, found.submodules, kept, found.large)


def _add_change(
    repo: pygit2.Repository, root: Path, rel: str, head_tree: str, found: _Changes, scrub: Scrub | None, max_file_bytes: int | None
) -> None:
    """One changed path into `found`: a submodule's gitlink, a big file noted, or a new blob."""
    sub = _submodule_state(repo, root, rel, head_tree)
    if sub is not None:  # a gitlink to the commit it has checked out, never dropped
        found.submodules[rel] = sub
        found.edits[rel] = (sub["commit"], int(MODE_COMMIT))
        return
    path = root / rel
    if path.is_dir() and not path.is_symlink():
        return  # a submodule not checked out, or a file replaced by a folder: HEAD's entry stays
    big = too_big(path, max_file_bytes)
    if big is not None:  # reading (and scrubbing, compressing) it would hold the job back
        found.large[rel] = big
        return
    found.edits[rel] = _blob_from_worktree(repo, path, scrub, found.scrubbed, rel)


def _is_gitlink(repo: pygit2.Repository, rel: str, head_tree: str) -> bool:
    """Whether HEAD's tree or the index has a submodule's gitlink at `rel`."""
    tree: Any = repo[head_tree]
    try:
        if int(tree[rel].filemode) == MODE_COMMIT:
            return True
    except KeyError:
        pass
    try:
        return bool(repo.index[rel].mode == MODE_COMMIT)
    except (KeyError, pygit2.GitError, ValueError):
        return False


def _submodule_state(repo: pygit2.Repository, root: Path, rel: str, head_tree: str) -> SubmoduleState | None:
    """What a submodule at `rel` has checked out (None: `rel` is no submodule, or one that is
    not checked out, whose gitlink then stays as HEAD has it). Its uncommitted changes are
    hashed (never written: the submodule's objects are its own), not stored."""
    path = root / rel
    if not _is_gitlink(repo, rel, head_tree) or not (path / ".git").exists():
        return None
    try:
        sub = pygit2.Repository(str(path))
        commit = str(sub.head.target)
        changed = changed_paths(sub)
    except pygit2.GitError:
        return None
    lines = []
    for name in changed:
        file = path / name
        if file.is_symlink():
            oid = str(pygit2.hash(os.readlink(file).encode()))
        elif file.is_file():
            oid = str(pygit2.hashfile(str(file)))
        else:
            oid = "-"
        lines.append(f"{name}\0{oid}\n")
    patch = hashlib.sha256("".join(lines).encode("utf-8", "surrogateescape")).hexdigest() if changed else None
    return SubmoduleState(commit=commit, dirty=bool(changed), patch=patch)


def _blob_from_worktree(repo: pygit2.Repository, path: Path, scrub: Scrub | None, scrubbed: list[str], rel: str) -> Edit:
    """A working-tree file as a blob and its mode (None: gone, or refused by `scrub`)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return str(repo.create_blob(os.readlink(path).encode())), int(MODE_LINK)
    mode = MODE_EXEC if st.st_mode & 0o111 else MODE_BLOB
    if scrub is not None:  # any size: a big dirty file must not bypass redaction
        data = path.read_bytes()
        clean = scrub(data)
        if clean != data:
            scrubbed.append(rel)
        if clean is None:  # the scrub refused the file: it is left out of the tree
            return None
        return str(repo.create_blob(clean)), int(mode)
    return str(repo.create_blob_fromdisk(str(path))), int(mode)
