"""git's command line for ledger: the one subprocess helper (`run_git`, whose errors show the
command, its exit code and git's last line), the errors a git command ends in, and GitPython for
what it is good at (remotes, fetch and push; ~85 ms to import, so never on `ledger run`'s path).
The only module that imports GitPython; `git.py`, `gittree.py` and `snapshot.py` keep the object database (pygit2).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from ledger.errors import LedgerError


class GitError(LedgerError):
    """A git command or object operation failed."""


class RefMoved(Exception):
    """The compare-and-swap on a ref failed: somebody else moved it first."""


class RefLocked(RefMoved):
    """The ref's lock was held by another git process for longer than `REF_LOCK_WAIT_S`."""


class RefRefused(GitError):
    """git refused to move a ref for another reason than a moved value or a lock (a hook's no, a
    repository git will not work in): trying again cannot help."""


class UnsafeRepository(GitError):
    """git (or libgit2) refuses a repository owned by another user (`safe.directory`)."""


# how git says the expected old value no longer holds (refs/files-backend.c): the ref moved
_CAS_FAILED = ("but expected", "reference already exists", "unable to resolve reference", "reference is missing")
_DUBIOUS = re.compile(r"dubious ownership in repository at '([^']*)'")
NOT_OWNED = re.compile(r"repository path '([^']*)' is not owned by current user")


def unsafe_repository(path: str) -> UnsafeRepository:
    """The one-line refusal of a repository owned by another user, with git's own fix."""
    return UnsafeRepository(
        f"git refuses to work in {path}: it is owned by another user (dubious ownership; git's safe.directory check)",
        f"if you trust it: git config --global --add safe.directory {shlex.quote(path)}",
    )


# how long a ref lock held by another git process is waited for before it counts as stuck: a
# concurrent `ledger run` or `git update-ref` holds it for milliseconds
REF_LOCK_WAIT_S = 3.0


# git runs with GIT_OPTIONAL_LOCKS=0 so that reads never refresh the user's index stat cache
GIT_ENV = {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}


@dataclass(frozen=True)
class GitResult:
    """What a git command printed, and how it ended."""

    returncode: int
    stdout: bytes
    stderr: str


def run_git(root: Path, *args: str, check: bool = True) -> GitResult:
    """Run `git ARGS` in `root` as a plain subprocess (GitPython, ~85 ms to import, is kept for
    what it is good at: remotes, config, fetch and push; `ledger run` never imports it). With
    `check`, a failure raises GitError showing the command, its exit code and git's last line."""
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=root,
            env={**os.environ, **GIT_ENV},
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on PATH", "install git") from exc
    result = GitResult(proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace"))
    if result.returncode != 0 and (dubious := _DUBIOUS.search(result.stderr)):
        raise unsafe_repository(dubious.group(1))  # never a failure to retry or to read past
    if check and result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        raise GitError(f"`git {' '.join(args)}` failed with exit {result.returncode}: {lines[-1] if lines else ''}")
    return result


def run_gitpython(root: Path, *args: str) -> GitResult:
    """Run a git command that talks to a remote through GitPython's command wrapper (fetch, push)."""
    import git as gitpython

    try:
        code, out, err = gitpython.Git(str(root)).execute(
            ["git", *args],
            env=GIT_ENV,
            with_extended_output=True,
            with_exceptions=False,
            stdout_as_string=False,
            strip_newline_in_stdout=False,
            istream=subprocess.DEVNULL,
        )
    except gitpython.GitCommandNotFound as exc:
        raise GitError("git is not installed or not on PATH", "install git") from exc
    return GitResult(int(code or 0), bytes(out or b""), str(err or ""))


def remote_names(root: Path) -> list[str]:
    """The git remotes of the repository at `root`, by name."""
    import git as gitpython

    return [r.name for r in gitpython.Repo(str(root)).remotes]


def ref_failure(ref: str, stderr: str) -> Exception:
    """What a failed `git update-ref` means: the ref moved (RefMoved: rebuild and try again), its
    lock outlived the wait (RefLocked), or git refused (RefRefused: a `reference-transaction` hook
    said no, with what it printed; anything else, with git's last line)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    first = lines[0].removeprefix("fatal: ") if lines else "no message"
    last = lines[-1].removeprefix("fatal: ").removeprefix("error: ") if lines else "no message"
    if ".lock': File exists" in stderr:
        return RefLocked(first)
    if "aborted by hook" in last:
        return _hook_refused(ref, lines)
    if any(s in stderr for s in _CAS_FAILED):
        return RefMoved(first)
    return RefRefused(f"git refused to move {ref}: {last}")


def _hook_refused(ref: str, lines: list[str]) -> RefRefused:
    """A `reference-transaction` hook's refusal, with what it printed (git's own lines left out)."""
    said = list(dict.fromkeys(line for line in lines[:-1] if not line.startswith(("fatal:", "error:", "hint:"))))
    output = "; ".join(said)[:400] or "no output"
    return RefRefused(
        f"git's reference-transaction hook refused to move {ref} (it said: {output})",
        "ask whoever installed the hook (core.hooksPath or .git/hooks/reference-transaction) to allow it",
    )


class UntrackedCount:
    """How many untracked files the code snapshot left out, counted by git itself (`git status
    --porcelain -z -uall`, never writing the index) on a thread while the job runs, so that the time
    until the job starts does not grow with their number. Files changed at or after
    `since` (the job's own outputs) are not counted: `since` is read from the inode clock
    (`fsutil.inode_clock`) just before the job starts, as their ctimes are."""

    def __init__(self, root: Path, since: float):
        self._since = since
        self.count: int | None = None
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=all"],
                cwd=root,
                env={**os.environ, **GIT_ENV},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            os.setpriority(os.PRIO_PROCESS, self._proc.pid, 19)  # the job starting comes first
        except OSError:
            self._proc = None
        self._root = root
        self._thread = threading.Thread(target=self._read, name="ledger-untracked", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        if self._proc is None or self._proc.stdout is None:
            return
        out = self._proc.stdout.read()
        if self._proc.wait() != 0:
            return
        count, entries = 0, iter(out.split(b"\0"))
        for entry in entries:
            if entry[:1] in (b"R", b"C"):
                next(entries, None)  # a rename's second path
            elif entry.startswith(b"?? "):
                try:
                    changed = (self._root / os.fsdecode(entry[3:])).lstat().st_ctime
                except OSError:
                    continue  # gone already: the job removed it
                count += changed < self._since
        self.count = count

    def result(self, timeout: float = 60) -> int | None:
        """The count (None: git failed, or took longer than `timeout`)."""
        self._thread.join(timeout)
        if self._thread.is_alive() and self._proc is not None:
            self._proc.kill()
        return self.count
