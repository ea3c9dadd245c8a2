"""`ledger diff`'s answer, kept whole and found again before the comparison code is imported.

A repeated diff is mostly start-up: pygit2, the comparison modules, their regexes and
dataclasses. So the verb (`ledger.commands.diff`) asks this module first, which imports only the
cache helper and git as a subprocess. An answer is kept under everything it was computed from:

- the question (both names as typed, every option) and the version of ledger's code
  (`ledger.cache.code_version`, a hash of every file of the package: whatever module computed
  the answer is covered, with no list of modules to keep up to date);
- the repository (its top folder and common git folder);
- what the comparison read, checked again on every recall: the bytes of `.ledger.yaml` (its
  sha256, or that it was absent) and the ledger branch's tip. Every run, replica, note and tag
  the comparison can read is a file of that tip, so a new run, a pull or a tag is a miss
  (`ledger.storage.answers`: what `ledger list`'s kept answer is checked by too).

The git diff of the two records is not kept: the commands that print it are, and they run again
on a recall, so git's own configuration is read exactly as before. An answer is never kept for
`--html` or `--partial`, nor recalled while `GIT_DIR`-style variables point git elsewhere.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.cache import LocalCache
from ledger.storage.answers import config_fingerprint, ref_tips, repository
from ledger.storage.gitcmd import run_git


@dataclass
class DiffOutput:
    """What `ledger diff` prints and how it exits."""

    text: str
    json: dict[str, Any]
    refused: bool
    exit_code: int
    forced_banner: str | None
    html_path: Path | None = None
    skipped: dict[str, str] = field(default_factory=dict)  # runs the replica search could not read, and why


@dataclass(frozen=True)
class Question:
    """A diff as asked: the two names as typed and every option that changes the answer."""

    a: str
    b: str
    metrics: tuple[str, ...]
    force: bool
    steps_metric: str | None
    git_diff: bool
    ignore: tuple[str, ...]
    any_age: bool
    code_diff: bool

    def key(self, root: Path, common_dir: Path) -> str:
        text = json.dumps([str(root), str(common_dir), *(getattr(self, f) for f in self.__dataclass_fields__)])
        return hashlib.sha256(text.encode()).hexdigest()


# a git diff to print: its heading and git's arguments
GitDiff = tuple[str, list[str]]


@dataclass
class Kept:
    """An answer with what it was computed from (checked on recall) and its git diffs (run again)."""

    output: DiffOutput  # its text without the git diffs
    git_diffs: list[GitDiff]
    branch_ref: str
    tip: str
    config_path: str
    config_sha: str | None  # None: there was no such file


def git_diff_text(root: Path, diffs: list[GitDiff]) -> str:
    """The git diffs, each under its heading (git's output decoded as the terminal would show it)."""
    return "".join(head + run_git(root, *args, check=False).stdout.decode("utf-8", "replace") for head, args in diffs)


def with_git_diff(text: str, git_diff: str) -> str:
    """The report's text with the git diff shown last, under a blank line (as `render_text` ends it)."""
    return text + "\n" + git_diff.rstrip("\n") + "\n" if git_diff else text


def _cache(common_dir: Path) -> LocalCache:
    return LocalCache(common_dir, "answers")


def recall(start: Path, question: Question) -> DiffOutput | None:
    """The kept answer to `question`, its git diffs run again, or None when none is kept for
    this code, this repository, its `.ledger.yaml` and its ledger branch's tip."""
    where = repository(start)
    if where is None:
        return None
    root, common_dir = where
    kept = _cache(common_dir).read_pickle(question.key(root, common_dir), Kept)
    if kept is None or config_fingerprint(Path(kept.config_path)) != kept.config_sha:
        return None
    if ref_tips(root, [kept.branch_ref]) != {kept.branch_ref: kept.tip}:
        return None
    out = kept.output
    return DiffOutput(
        with_git_diff(out.text, git_diff_text(root, kept.git_diffs)),
        out.json,
        out.refused,
        out.exit_code,
        out.forced_banner,
        None,
        out.skipped,
    )


def keep(root: Path, common_dir: Path, question: Question, kept: Kept) -> None:
    """Keep `kept` as the answer to `question` in this repository (a failure only costs time)."""
    _cache(common_dir).write_pickle(question.key(root, common_dir), kept)
