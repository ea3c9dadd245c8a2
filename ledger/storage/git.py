"""Git access for ledger: the repository's objects and refs. The only module that imports pygit2
(`gitcmd.py` runs git's command line and owns GitPython).

Objects (blobs, trees, commits) are written through pygit2's object database: at 10,000 runs a
commit costs ~1 ms that way, against 20-80 ms through plumbing subprocesses (see
../shared/machine-notes.md). Refs are moved with `git update-ref NEW OLD`, git's own
compare-and-swap, so concurrent writers never lose each other's runs. Reads of the user's
working tree run git with GIT_OPTIONAL_LOCKS=0 so that not even the index's stat cache is
refreshed: HEAD, index and working tree stay byte-for-byte as they were.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2

from ledger.errors import LedgerError
from ledger.storage.bigfiles import too_big
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
from ledger.storage.runtree import Edit, as_committed, patch_id

ZERO_OID = "0" * 40
MODE_TREE = pygit2.enums.FileMode.TREE
MODE_BLOB = pygit2.enums.FileMode.BLOB
MODE_EXEC = pygit2.enums.FileMode.BLOB_EXECUTABLE
MODE_LINK = pygit2.enums.FileMode.LINK
MODE_COMMIT = pygit2.enums.FileMode.COMMIT  # a submodule's gitlink
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


@dataclass(frozen=True)
class CodeSnapshot:
    """The code a run saw: HEAD plus uncommitted changes to tracked files."""

    commit: str
    branch: str | None
    tree: str
    dirty: bool
    patch_sha256: str | None
    untracked: int | None  # untracked files left out (None: not counted here, see UntrackedCount)
    scrubbed: list[str] = field(default_factory=list)
    # changed submodules: path -> {"commit": checked-out commit (the tree's gitlink), "dirty":
    # uncommitted changes to its tracked files, "patch": sha256 of those changes or None}
    submodules: dict[str, dict[str, Any]] = field(default_factory=dict)
    # changed configuration files whose uncommitted changes the tree leaves out (runtree.as_committed)
    kept_committed: list[str] = field(default_factory=list)
    # changed files too big to read before the job: path -> {"size": bytes, "mtime_ns": ...}; the
    # tree keeps HEAD's entry (ledger.storage.bigfiles hashes them while the job runs)
    large: dict[str, dict[str, int]] = field(default_factory=dict)


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
    def code_snapshot(self, scrub: Callable[[bytes], bytes | None] | None = None, max_file_bytes: int | None = None) -> CodeSnapshot:
        """HEAD's tree plus uncommitted changes to tracked files, without touching the index.

        `scrub` may rewrite the bytes of changed files before they are stored (ledger uses it to
        redact secrets pasted into an uncommitted launcher); files it changes are listed in
        `CodeSnapshot.scrubbed`; a file it returns None for is left out of the tree. Configuration
        files (`ledger.storage.runtree.as_committed`) keep HEAD's entry (`kept_committed`), and so
        does a changed file over `max_file_bytes`, which is never read here (`large`: its size and
        mtime; its blob id is computed once the job has started, `ledger.storage.bigfiles`).
        """
        head = self.head_commit()
        # libgit2's status compares HEAD, index and working tree like `git status`, in-process and
        # without writing the index (no stat-cache refresh: the user's index stays byte-for-byte)
        # untracked files are not looked at here: 100,000 of them cost ~0.6 s before the job; they
        # are counted by `UntrackedCount` while the job runs
        status = self._repo.status(untracked_files="no")
        changed = sorted(p for p, flags in status.items() if flags & _CHANGED)
        head_tree = str(self._obj(head).tree_id)
        scrubbed: list[str] = []
        submodules: dict[str, dict[str, Any]] = {}
        large: dict[str, dict[str, int]] = {}
        edits: dict[str, Edit] = {}
        for rel in changed:
            if as_committed(rel):
                continue
            sub = self._submodule_state(rel, head_tree)
            if sub is not None:  # a gitlink to the commit it has checked out, never dropped
                submodules[rel] = sub
                edits[rel] = (sub["commit"], int(MODE_COMMIT))
                continue
            if (self.root / rel).is_dir() and not (self.root / rel).is_symlink():
                continue  # a submodule not checked out, or a file replaced by a folder: HEAD's entry stays
            big = too_big(self.root / rel, max_file_bytes)
            if big is not None:  # reading (and scrubbing, compressing) it would hold the job back
                large[rel] = big
                continue
            edits[rel] = self._blob_from_worktree(self.root / rel, scrub, scrubbed, rel)
        tree = self.tree_with_edits(head_tree, edits) if edits else head_tree
        # one id for the uncommitted state, from exactly what the tree changes (a pull recomputes it)
        patch_sha = patch_id(self.tree_changes(head_tree, tree)) if tree != head_tree else None
        dirty = tree != head_tree or bool(large) or any(sub["dirty"] for sub in submodules.values())
        return CodeSnapshot(
            commit=head,
            branch=self.current_branch(),
            tree=tree,
            dirty=dirty,
            patch_sha256=patch_sha,
            untracked=None,
            scrubbed=scrubbed,
            submodules=submodules,
            kept_committed=[rel for rel in changed if as_committed(rel)],
            large=large,
        )

    def tree_changes(self, old: str | None, new: str | None, prefix: str = "") -> dict[str, Edit]:
        """Every path whose entry differs between two trees (None: absent), as its entry in `new`
        (None: not there); a folder is walked only where the two folders' ids differ."""
        a, b = self._entries(old), self._entries(new)
        out: dict[str, Edit] = {}
        for name in sorted(a.keys() | b.keys()):
            was, now = a.get(name), b.get(name)
            if was == now:
                continue
            path = prefix + name
            was_tree = was is not None and was[1] == MODE_TREE
            now_tree = now is not None and now[1] == MODE_TREE
            if not (was_tree or now_tree):
                out[path] = now
                continue
            if was is not None and not was_tree:
                out[path] = None  # a file replaced by a folder
            if now is not None and not now_tree:
                out[path] = now  # a folder replaced by a file
            out.update(self.tree_changes(was[0] if was and was_tree else None, now[0] if now and now_tree else None, path + "/"))
        return out

    def _entries(self, tree: str | None) -> dict[str, tuple[str, int]]:
        """name -> (oid, mode) of a tree's entries; names as paths read from disk carry them
        (undecodable bytes as surrogates)."""
        if tree is None:
            return {}
        return {e.raw_name.decode("utf-8", "surrogateescape"): (str(e.id), int(e.filemode)) for e in self._obj(tree)}

    def _submodule_state(self, rel: str, head_tree: str) -> dict[str, Any] | None:
        """What a submodule at `rel` has checked out (None: `rel` is no submodule, or one that is
        not checked out, whose gitlink then stays as HEAD has it). Its uncommitted changes are
        hashed (never written: the submodule's objects are its own), not stored."""
        path = self.root / rel
        entry = self.tree_entry(head_tree, rel)
        try:
            in_index = self._repo.index[rel].mode == MODE_COMMIT
        except (KeyError, pygit2.GitError, ValueError):
            in_index = False
        if not ((entry is not None and entry[1] == MODE_COMMIT) or in_index) or not (path / ".git").exists():
            return None
        try:
            sub = pygit2.Repository(str(path))
            commit = str(sub.head.target)
            status = sub.status(untracked_files="no")
        except pygit2.GitError:
            return None
        changed = sorted(p for p, flags in status.items() if flags & _CHANGED)
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
        return {"commit": commit, "dirty": bool(changed), "patch": patch}

    def _blob_from_worktree(
        self, path: Path, scrub: Callable[[bytes], bytes | None] | None = None, scrubbed: list[str] | None = None, rel: str = ""
    ) -> tuple[str, int] | None:
        try:
            st = path.lstat()
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode):
            return str(self._repo.create_blob(os.readlink(path).encode())), int(MODE_LINK)
        mode = MODE_EXEC if st.st_mode & 0o111 else MODE_BLOB
        if scrub is not None:  # any size: a big dirty file must not bypass redaction
            data = path.read_bytes()
            clean = scrub(data)
            if clean != data and scrubbed is not None:
                scrubbed.append(rel)
            if clean is None:  # the scrub refused the file: it is left out of the tree
                return None
            return str(self._repo.create_blob(clean)), int(mode)
        return str(self._repo.create_blob_fromdisk(str(path))), int(mode)

    # ---- writing objects -----------------------------------------------------------
    def blob(self, data: bytes) -> str:
        return str(self._repo.create_blob(data))

    def tree_from_dir(self, folder: Path) -> str:
        """A tree of every file below `folder` (symlinks stored as links, never followed)."""
        tb = self._repo.TreeBuilder()
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if entry.is_symlink():
                tb.insert(entry.name, self._repo.create_blob(os.readlink(entry.path).encode()), MODE_LINK)
            elif entry.is_dir():
                tb.insert(entry.name, pygit2.Oid(hex=self.tree_from_dir(Path(entry.path))), MODE_TREE)
            elif entry.is_file():
                mode = MODE_EXEC if entry.stat().st_mode & 0o111 else MODE_BLOB
                tb.insert(entry.name, self._repo.create_blob_fromdisk(entry.path), mode)
        return str(tb.write())

    def tree_with_edits(self, base_tree: str | None, edits: dict[str, tuple[str, int] | None]) -> str:
        """`base_tree` with paths set to (oid, mode) or removed (None); only touched trees are rebuilt."""
        here: dict[str, tuple[str, int] | None] = {}
        below: dict[str, dict[str, tuple[str, int] | None]] = {}
        for path, value in edits.items():
            head, sep, rest = path.partition("/")
            if sep:
                below.setdefault(head, {})[rest] = value
            else:
                here[head] = value
        base = self._obj(base_tree) if base_tree else None
        for name, sub in below.items():
            # edits below a path set in the same call go on top of that new value (a run folder
            # into the tip's shard folder), else on top of the base tree's entry
            if name in here:
                value = here[name]
                sub_base = value[0] if value is not None and value[1] == MODE_TREE else None
            else:
                existing = base[name] if base is not None and name in base else None
                sub_base = str(existing.id) if existing is not None and existing.filemode == MODE_TREE else None
            new_sub = self.tree_with_edits(sub_base, sub)
            here[name] = None if len(self._obj(new_sub)) == 0 else (new_sub, int(MODE_TREE))
        if not all(_utf8(name) for name in here):
            return self._raw_tree(base, here)
        tb = self._repo.TreeBuilder(base) if base is not None else self._repo.TreeBuilder()
        for name, value in here.items():
            if value is None:
                if tb.get(name) is not None:
                    tb.remove(name)
            else:
                tb.insert(name, pygit2.Oid(hex=value[0]), value[1])
        return str(tb.write())

    def _raw_tree(self, base: Any, edits: dict[str, tuple[str, int] | None]) -> str:
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
        return str(self._repo.odb.write(pygit2.enums.ObjectType.TREE, data))

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
        deciding that nothing is due costs git ~5 ms, which `ledger run` has no reason to wait
        on (its own session: a Ctrl-C at the terminal never reaches it half way).
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


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
