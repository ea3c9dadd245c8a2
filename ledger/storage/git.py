"""Git access for ledger: the repository's objects and refs. With `gittree.py` (trees) and
`snapshot.py` (the code a run sees), the only modules that import pygit2 (`gitcmd.py` runs git's
command line and owns GitPython).

Objects (blobs, trees, commits) are written through pygit2's object database, in-process: a
plumbing subprocess per object would cost far more once the branch holds thousands of runs (see
../shared/machine-notes.md). Refs are moved with `git update-ref NEW OLD`, git's own
compare-and-swap, so concurrent writers never lose each other's runs. Reads of the user's
working tree run git with GIT_OPTIONAL_LOCKS=0 so that not even the index's stat cache is
refreshed: HEAD, index and working tree stay byte-for-byte as they were.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pygit2

from ledger.errors import LedgerError
from ledger.storage import gittree
from ledger.storage.gitcmd import (
    GIT_ENV,
    NOT_OWNED,
    REF_LOCK_WAIT_S,
    GitError,
    GitResult,
    ref_failure,
    remote_names,
    run_git,
    run_gitpython,
    unsafe_repository,
)

# the entry modes and the code snapshot, where the rest of ledger has always imported them
from ledger.storage.gittree import MODE_BLOB as MODE_BLOB
from ledger.storage.gittree import MODE_TREE as MODE_TREE
from ledger.storage.gittree import entry_kind as entry_kind
from ledger.storage.gittree import is_file_mode as is_file_mode
from ledger.storage.runtree import Edit
from ledger.storage.snapshot import CodeSnapshot as CodeSnapshot
from ledger.storage.snapshot import Scrub, code_snapshot

ZERO_OID = "0" * 40


class Repo:
    """A git repository opened for ledger's reads and writes."""

    def __init__(self, start: Path):
        try:
            found = pygit2.discover_repository(str(start))
        except pygit2.GitError:
            found = None
        if not found:
            raise LedgerError(f"{start} is not inside a git repository", "cd into your project's repository, or run `git init` first")
        try:
            self._repo = pygit2.Repository(found)
        except pygit2.GitError as exc:
            owner = NOT_OWNED.search(str(exc))
            if owner:  # libgit2 applies git's ownership rule (and reads safe.directory) itself
                raise unsafe_repository(owner.group(1).rstrip("/")) from exc
            raise GitError(f"cannot open the repository at {found}: {exc}", "check it with `git status`") from exc
        if self._repo.is_bare:
            raise LedgerError(f"{found} is a bare repository", "run ledger inside a checkout with a working tree")
        self.root = Path(self._repo.workdir).resolve()
        self.git_dir = Path(self._repo.path).resolve()
        common = self._repo.path
        # worktrees keep their common dir in `commondir`
        commondir_file = Path(common) / "commondir"
        self.common_dir = (Path(common) / commondir_file.read_text().strip()).resolve() if commondir_file.exists() else self.git_dir

    def _obj(self, oid: str) -> Any:
        """An object by id, typed loosely (pygit2's stubs return the base class)."""
        return self._repo[oid]

    # ---- reading -----------------------------------------------------------------
    def head_commit(self) -> str:
        try:
            return str(self._repo.head.target)
        except pygit2.GitError as exc:
            raise LedgerError(
                "the repository has no commits yet", "make a first commit (`git commit --allow-empty -m init`) before recording runs"
            ) from exc

    def current_branch(self) -> str | None:
        if self._repo.head_is_detached or self._repo.head_is_unborn:
            return None
        return self._repo.head.shorthand

    def ref_tip(self, ref: str) -> str | None:
        try:
            return str(self._repo.references[ref].resolve().target)
        except (KeyError, pygit2.GitError):
            return None

    def branch_tip(self, branch: str) -> str | None:
        return self.ref_tip(f"refs/heads/{branch}")

    def read_blob(self, oid: str) -> bytes:
        """A blob's bytes; GitError when `oid` names no blob here (a tree, a commit, a gitlink's
        commit this repository never had): callers check an entry's mode first, this is the guard."""
        try:  # the object database's read: no object built (half the time of `repo[oid].data`)
            kind, data = self._repo.odb.read(oid)[:2]
        except (KeyError, ValueError) as exc:
            raise GitError(f"object {oid[:12]} is not in this repository", "the record is not one ledger wrote") from exc
        if kind != pygit2.enums.ObjectType.BLOB:
            raise GitError(f"object {oid[:12]} is not a file's content", "the record is not one ledger wrote")
        return bytes(data)

    def _lookup(self, oid: str) -> Any:
        try:
            return self._repo[oid]
        except (KeyError, ValueError) as exc:
            raise GitError(f"object {oid[:12]} is not in this repository", "the record is not one ledger wrote") from exc

    def _tree(self, oid: str) -> Any:
        """The tree of a tree or commit id; GitError for anything else."""
        obj = self._lookup(oid)
        tree = obj.tree if isinstance(obj, pygit2.Commit) else obj
        if not isinstance(tree, pygit2.Tree):
            raise GitError(f"object {oid[:12]} is not a folder", "the record is not one ledger wrote")
        return tree

    def commit_info(self, oid: str) -> tuple[str, list[str], str]:
        """(message, parent ids, tree id) of a commit."""
        c = self._obj(oid)
        return c.message, [str(p) for p in c.parent_ids], str(c.tree_id)

    def commit_time(self, oid: str) -> int:
        return int(self._obj(oid).commit_time)

    def tree_entry(self, tree_or_commit: str, path: str) -> tuple[str, int] | None:
        """(oid, filemode) of `path` inside a tree or commit, or None (a path through a file is none)."""
        try:
            entry = self._tree(tree_or_commit)[path]
        except KeyError:
            return None
        return str(entry.id), int(entry.filemode)

    def entries_named(self, tree_oid: str, names: tuple[str, ...]) -> list[tuple[str, int] | None]:
        """(oid, filemode) of each of the given names in one tree (None where absent), one object read."""
        tree = self._tree(tree_oid)
        out: list[tuple[str, int] | None] = []
        for name in names:
            try:
                entry = tree[name]
            except KeyError:
                out.append(None)
                continue
            out.append((str(entry.id), int(entry.filemode)))
        return out

    def tree_size(self, tree_oid: str) -> int:
        """How many entries a tree holds (none of them is built)."""
        return len(self._obj(tree_oid))

    def blob_size(self, oid: str) -> int:
        """A blob's size in bytes, from its header: the content is not read where git can help it."""
        try:
            return int(self._repo.odb.read_header(pygit2.Oid(hex=oid))[1])
        except (KeyError, ValueError) as exc:  # missing, or not an object id: a pulled record's
            raise GitError(f"object {oid[:12]} is not in this repository", "the record is not one ledger wrote") from exc

    def list_tree(self, tree_oid: str) -> list[tuple[str, str, int]]:
        """(name, oid, mode) of a tree's entries; GitError when `tree_oid` is no tree."""
        return [(e.name, str(e.id), int(e.filemode)) for e in self._tree(tree_oid)]

    def walk_blobs(self, tree_oid: str, prefix: str = "") -> Iterator[tuple[str, str, int]]:
        """Every entry below a tree that is not a tree, as (path, oid, mode): files, links and
        gitlinks alike, so a caller that reads one checks its mode (`is_file_mode`)."""
        for e in self._tree(tree_oid):
            path = f"{prefix}{e.name}"
            if e.filemode == MODE_TREE:
                yield from self.walk_blobs(str(e.id), path + "/")
            else:
                yield path, str(e.id), int(e.filemode)

    def first_parent_walk(self, start: str, limit: int | None = None) -> Iterator[str]:
        oid: str | None = start
        n = 0
        while oid is not None and (limit is None or n < limit):
            yield oid
            n += 1
            parents = self._obj(oid).parent_ids
            oid = str(parents[0]) if parents else None

    def reflog_messages(self, ref: str) -> list[str]:
        """The messages of `ref`'s reflog (local to this clone; empty when it has none)."""
        try:
            return [str(e.message) for e in self._repo.references[ref].log()]
        except (KeyError, pygit2.GitError):
            return []

    def commit_identity(self, oid: str) -> tuple[str, str]:
        """("Name <email>" of the author, of the committer) of a commit."""
        c = self._obj(oid)
        return f"{c.author.name} <{c.author.email}>", f"{c.committer.name} <{c.committer.email}>"

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        if ancestor == descendant:
            return True
        return bool(self._repo.descendant_of(descendant, ancestor))

    # ---- the code a run sees ------------------------------------------------------
    def code_snapshot(self, scrub: Scrub | None = None, max_file_bytes: int | None = None) -> CodeSnapshot:
        """HEAD's tree plus uncommitted changes to tracked files, without touching the index
        (`ledger.storage.snapshot.code_snapshot`: what `scrub` and `max_file_bytes` do)."""
        return code_snapshot(self._repo, self.root, self.head_commit(), self.current_branch(), scrub, max_file_bytes)

    def tree_changes(self, old: str | None, new: str | None) -> dict[str, Edit]:
        """Every path whose entry differs between two trees (None: absent), as its entry in `new`."""
        return gittree.tree_changes(self._repo, old, new)

    # ---- writing objects -----------------------------------------------------------
    def blob(self, data: bytes) -> str:
        return str(self._repo.create_blob(data))

    def tree_from_dir(self, folder: Path) -> str:
        """A tree of every file below `folder` (symlinks stored as links, never followed)."""
        return gittree.tree_from_dir(self._repo, folder)

    def tree_with_edits(self, base_tree: str | None, edits: dict[str, Edit]) -> str:
        """`base_tree` with paths set to (oid, mode) or removed (None); only touched trees are rebuilt."""
        return gittree.tree_with_edits(self._repo, base_tree, edits)

    def commit(self, tree: str, parents: list[str], message: str) -> str:
        """Write a commit object (no ref moves). Identity from git config, else a ledger default."""
        sig = self._signature()
        return str(self._repo.create_commit(None, sig, sig, message, pygit2.Oid(hex=tree), [pygit2.Oid(hex=p) for p in parents]))

    def _signature(self) -> pygit2.Signature:
        try:
            return self._repo.default_signature
        except (KeyError, pygit2.GitError):
            return pygit2.Signature("ledger", "ledger@localhost")

    def update_ref(self, ref: str, new: str, old: str | None, message: str) -> None:
        """Move `ref` to `new` only if it is still at `old` (None: must not exist). Raises RefMoved
        (RefLocked when the ref's lock outlived `REF_LOCK_WAIT_S`).

        Another writer's `update-ref` holds the ref's lock for milliseconds: git itself waits for
        it (`core.filesRefLockTimeout`, retried with growing, randomised pauses) instead of
        failing at once, so only a lock that outlives the bound is reported."""
        wait = f"core.filesRefLockTimeout={int(REF_LOCK_WAIT_S * 1000)}"
        proc = run_git(self.root, "-c", wait, "update-ref", "-m", message, ref, new, old or ZERO_OID, check=False)
        if proc.returncode != 0:
            raise ref_failure(ref, proc.stderr)

    def gc_auto(self) -> None:
        """Let git pack loose objects when it thinks it is time (`git gc --auto` detaches itself).

        ledger writes objects through pygit2, which never triggers git's own housekeeping; without
        this, 10,000 runs leave ~50,000 loose objects and every read gets slower. Not waited for:
        `ledger run` has no reason to wait while git decides whether anything is due (its own
        session: a Ctrl-C at the terminal never reaches it half way).
        """
        try:
            subprocess.Popen(
                ["git", "gc", "--auto", "--quiet"],
                cwd=self.root,
                env={**os.environ, **GIT_ENV},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            pass  # no git: the run is recorded all the same

    # ---- porcelain (git processes; GitPython for remotes and config) ---------------------
    def git(self, *args: str, check: bool = True) -> GitResult:
        """Any other git command (diffs for display, plumbing without a pygit2 equivalent)."""
        return run_git(self.root, *args, check=check)

    def remote_names(self) -> list[str]:
        """The repository's git remotes, by name."""
        return remote_names(self.root)

    def checked_out_branches(self) -> dict[str, Path]:
        """Branch name -> the worktree that has it checked out, over every worktree of the repo
        (`git worktree list --porcelain`: a bare repository's HEAD names no checkout)."""
        found: dict[str, Path] = {}
        where: Path | None = None
        for line in run_git(self.root, "worktree", "list", "--porcelain", "-z").stdout.split(b"\0"):
            text = line.decode("utf-8", "surrogateescape")
            if text.startswith("worktree "):
                where = Path(text[len("worktree ") :])
            elif text.startswith("branch refs/heads/") and where is not None:
                found.setdefault(text[len("branch refs/heads/") :], where)
        return found


def merge_base(repo: Repo, a: str, b: str) -> str | None:
    """The best common ancestor of two commits, or None for unrelated histories."""
    try:
        found = repo._repo.merge_base(a, b)
    except (KeyError, ValueError, pygit2.GitError):
        return None
    return str(found) if found else None


def is_commit(repo: Repo, oid: str) -> bool:
    """Whether `oid` names a commit in this clone's object store."""
    try:
        return isinstance(repo._repo[oid], pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError):
        return False


def has_object(repo: Repo, oid: str) -> bool:
    try:
        return oid in repo._repo
    except (ValueError, pygit2.GitError):
        return False


def git_remote_cmd(repo: Repo, *args: str) -> tuple[int, str]:
    """Run a git command that talks to a remote through GitPython's command wrapper.

    Returns (exit status, stderr text) instead of raising, since a rejected push is an
    expected outcome the caller handles.
    """
    result = run_gitpython(repo.root, *args)
    return result.returncode, result.stderr


def valid_branch_name(name: str) -> bool:
    """Whether git accepts `name` as a branch (the rules of `git check-ref-format --branch`)."""
    return not name.startswith("-") and bool(pygit2.reference_is_valid_name(f"refs/heads/{name}"))
