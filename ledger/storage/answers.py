"""Answers kept whole, and found again before a verb imports its own code: what a repeated
`ledger diff` (`ledger.compare.answer`) and a repeated `ledger list` (`ledger.storage.listanswer`)
cost is start-up, so they ask here first, through git as a subprocess and the cache helper only.

An answer is kept under the question, the repository and the version of the code that computed it
(`ledger.cache`), with what it was computed from, checked again on every recall: the bytes of
`.ledger.yaml` (`config_fingerprint`) and the tips of the refs it read (`ref_tips`). Nothing is
recalled while `GIT_DIR`-style variables point git at another repository than the one ledger opens.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ledger.errors import LedgerError
from ledger.storage.gitcmd import run_git

# variables that make git read another repository than the one ledger opens (pygit2 ignores them)
_GIT_LOCATION = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_CEILING_DIRECTORIES")


def config_fingerprint(path: Path) -> str | None:
    """The sha256 of a file's bytes, None when it is absent or unreadable (then the slow path says why)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def repository(start: Path) -> tuple[Path, Path] | None:
    """The repository's top folder and its common git folder, as git finds them from `start`;
    None where git cannot say (then the verb's own code opens it and says what is wrong)."""
    if any(name in os.environ for name in _GIT_LOCATION):
        return None
    try:
        found = run_git(start, "rev-parse", "--show-toplevel", "--git-common-dir", check=False)
    except (LedgerError, OSError):  # git missing, a repository it refuses: the verb's code says so
        return None
    lines = found.stdout.decode("utf-8", "surrogateescape").splitlines()
    if found.returncode != 0 or len(lines) != 2:
        return None
    return Path(lines[0]).resolve(), (Path(start) / lines[1]).resolve()  # git prints the second relative to `start`


def ref_tips(root: Path, refs: list[str]) -> dict[str, str] | None:
    """The commit each of `refs` (full names) points at, those that exist; None when git cannot say."""
    try:
        found = run_git(root, "for-each-ref", "--format=%(refname) %(objectname)", *refs, check=False)
    except (LedgerError, OSError):
        return None
    if found.returncode != 0:
        return None
    tips = dict(line.split(" ", 1) for line in found.stdout.decode("utf-8", "surrogateescape").splitlines() if " " in line)
    return {ref: tip for ref, tip in tips.items() if ref in refs}  # for-each-ref matches prefixes too
