"""Runs on the experiments branch: write one commit per run, read manifests back.

Layout of a run commit (see README.md, "Storage"):
  tree    = the code the run saw (HEAD's tree + uncommitted changes to tracked files, but to
            configuration: ledger/storage/runtree.py)
            with `runs/` = HEAD's `runs/` + every earlier run's shard folders + the new run
  parents = [previous tip of the branch, the code commit the run was launched from]
            ([the code commit] for the branch's first run)
A pulled commit is checked to be exactly that (ledger/storage/incoming.py).
Runs live at `runs/<shard>/<id>/`, shard = the first two of the id's four hex digits, so no tree
on the path to a run grows past a few hundred entries however many runs accumulate.
"""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

import msgspec

from ledger.errors import DataError, LedgerError
from ledger.manifest import NOT_LEDGERS, ManifestError, run_path
from ledger.storage.git import MODE_TREE, CodeSnapshot, Repo, entry_kind, is_commit, is_file_mode
from ledger.storage.gitcmd import REF_LOCK_WAIT_S, GitError, RefLocked, RefMoved

SHARD_RE = re.compile(r"^[0-9a-f]{2}$")
TRAILER_RE = re.compile(r"^Run-Id: (\S+)$", re.M)
CODE_TRAILER_RE = re.compile(r"^Code-Commit: ([0-9a-f]{40})$", re.M)
META_TRAILER = "Ledger-Meta"  # a commit that changes only one run's meta.json (storage/runmeta.py)
META_TRAILER_RE = re.compile(rf"^{META_TRAILER}: (\S+)$", re.M)
MAX_CAS_ATTEMPTS = 200
# what ledger reads of a run folder (docs/ARCHITECTURE.md, "Run records"): the first four are the
# record (`RunEntry`'s blobs), the rest its logs; each must be a file, never a folder, a link or a
# gitlink (a pulled folder can hold anything: a gitlink's commit is in no repository)
RECORD_FILES = ("manifest.yaml", "summary.json", "settings.json", "meta.json")
RUN_FILES = (*RECORD_FILES, "trainer.log", "engine.log", "metrics.jsonl", "heat.log")


class NotALedgerBranch(LedgerError):
    """The configured branch exists but was not made by ledger."""


class RunEntry(msgspec.Struct, frozen=True):
    """Where a run lives at the tip: its id, folder path, folder tree and manifest blob."""

    id: str
    path: str
    tree: str
    manifest_blob: str | None
    summary_blob: str | None = None
    settings_blob: str | None = None
    meta_blob: str | None = None  # meta.json: tags, note, archived (storage/runmeta.py)


def branch_ref(branch: str) -> str:
    return f"refs/heads/{branch}"


def run_id_of_commit(repo: Repo, commit: str) -> str | None:
    message = repo.commit_info(commit)[0]
    m = TRAILER_RE.search(message)
    return m.group(1) if m else None


def meta_run_of_commit(repo: Repo, commit: str) -> str | None:
    """The run a metadata commit (`Ledger-Meta:` trailer) changed, or None for any other commit."""
    m = META_TRAILER_RE.search(repo.commit_info(commit)[0])
    return m.group(1) if m else None


def is_ledger_commit(repo: Repo, commit: str) -> bool:
    """A commit ledger writes on its branch: a run (`Run-Id:`) or a run's metadata (`Ledger-Meta:`)."""
    message = repo.commit_info(commit)[0]
    return bool(TRAILER_RE.search(message) or META_TRAILER_RE.search(message))


def check_ledger_branch(repo: Repo, branch: str) -> str | None:
    """The branch tip, or None when absent; refuse a branch ledger did not make."""
    tip = repo.branch_tip(branch)
    if tip is not None and not is_ledger_commit(repo, tip):
        raise NotALedgerBranch(
            f"branch '{branch}' exists but is not a ledger branch (its tip has no Run-Id trailer)",
            f"set another `branch:` in .ledger.yaml, or rename the branch (`git branch -m {branch} {branch}-old`)",
        )
    return tip


def _ref_lock(repo: Repo, branch: str) -> Path:
    ref = repo.common_dir / branch_ref(branch)
    return ref.with_name(ref.name + ".lock")


def check_branch_writable(repo: Repo, branch: str) -> str | None:
    """Everything that would stop a run commit at the end, checked before the job starts.

    The branch must be ledger's (or absent), checked out in no worktree (the user's next commit
    there would drop the run records), and its ref must not be locked by another git process.
    """
    tip = check_ledger_branch(repo, branch)
    where = repo.checked_out_branches().get(branch)
    if where is not None:
        raise LedgerError(
            f"branch '{branch}' is checked out in the worktree {where}; recording there would move it under your feet",
            f"switch that worktree to another branch (`git -C {where} switch -`)",
        )
    lock = _ref_lock(repo, branch)
    if not wait_for_lock(lock, REF_LOCK_WAIT_S):
        raise LedgerError(
            f"branch '{branch}' is locked by another git process ({lock} exists)",
            f"wait for that git command to end; if none is running, remove {lock}",
        )
    return tip


def wait_for_lock(lock: Path, bound_s: float) -> bool:
    """Whether `lock` is gone, or goes within `bound_s` of staying the same file (polled with
    growing, randomised pauses). A lock that another writer takes and drops again and again is
    contention, not a stuck lock: the bound restarts for each new lock file."""
    seen: tuple[int, int] | None = None
    since = time.monotonic()
    pause = 0.002
    while True:
        try:
            st = lock.stat()
        except FileNotFoundError:
            return True
        if (st.st_ino, st.st_mtime_ns) != seen:
            seen, since = (st.st_ino, st.st_mtime_ns), time.monotonic()
        elif time.monotonic() - since >= bound_s:
            return False
        time.sleep(random.uniform(pause / 2, pause))
        pause = min(pause * 2, 0.2)


def _runs_tree(repo: Repo, commit_or_tree: str) -> str | None:
    entry = repo.tree_entry(commit_or_tree, "runs")
    return entry[0] if entry and entry[1] == MODE_TREE else None


def build_run_tree(repo: Repo, code_tree: str, tip: str | None, run_id: str, run_tree: str) -> str:
    """The run commit's tree: code tree + earlier runs' shards + the new run folder."""
    edits: dict[str, tuple[str, int] | None] = {}
    if tip is not None:
        tip_runs = _runs_tree(repo, tip)
        if tip_runs:
            for name, oid, mode in repo.list_tree(tip_runs):
                if mode == MODE_TREE and SHARD_RE.match(name):
                    edits[f"runs/{name}"] = (oid, MODE_TREE)
    edits[run_path(run_id)] = (run_tree, MODE_TREE)
    return repo.tree_with_edits(code_tree, edits)


def code_commit_of(repo: Repo, message: str, parents: list[str]) -> str | None:
    """The code commit a run commit was recorded from: its last parent (`[previous tip, code]`,
    or `[code]` for a branch's first run). A first run rebuilt on push by an earlier ledger lost it
    from its parents (`[previous tip]`): then its `Code-Commit:` trailer, when this clone has that
    commit. None: not to be found here."""
    if len(parents) == 2 or (len(parents) == 1 and not is_ledger_commit(repo, parents[0])):
        return parents[-1]
    named = CODE_TRAILER_RE.search(message)
    if len(parents) == 1 and named and is_commit(repo, named.group(1)):
        return named.group(1)
    return None


def commit_message(run_id: str, name: str | None, exit_text: str, duration: str, code_commit: str) -> str:
    return f"run {run_id} ({name or '-'}): {exit_text}, {duration}\n\nRun-Id: {run_id}\nCode-Commit: {code_commit}\n"


def write_run(repo: Repo, branch: str, code: CodeSnapshot, run_id: str, run_tree: str, message: str) -> str:
    """Commit a run folder onto the branch with compare-and-swap, rebuilding on a moved tip."""
    ref = branch_ref(branch)
    for attempt in range(MAX_CAS_ATTEMPTS):
        try:
            tip = check_ledger_branch(repo, branch)
        except NotALedgerBranch as exc:  # moved to a foreign commit while the job ran
            raise LedgerError(
                f"could not record run {run_id}: {exc.message}",
                f"the run is still staged; once '{branch}' points at its last run again "
                f"(`git reflog {branch}` shows it), `ledger recover` commits it",
            ) from exc
        if tip is not None and find_run(repo, tip, run_id) is not None:
            return tip  # already landed (a retry after a crash between update and cleanup)
        tree = build_run_tree(repo, code.tree, tip, run_id, run_tree)
        parents = [tip, code.commit] if tip else [code.commit]
        commit = repo.commit(tree, parents, message)
        try:
            repo.update_ref(ref, commit, tip, f"ledger: record run {run_id}")
            return commit
        except RefLocked as exc:  # git waited REF_LOCK_WAIT_S for the lock: not a passing writer
            raise LedgerError(
                f"could not record run {run_id}: branch '{branch}' is locked ({exc})",
                "the run is still staged; when the other git command ended (or the stale "
                f"{_ref_lock(repo, branch).name} is removed), `ledger recover` commits it",
            ) from exc
        except RefMoved:  # another run landed first: rebuild on its tip
            time.sleep(random.uniform(0.001, 0.02) * min(attempt + 1, 10))
        except GitError as exc:  # git said no (a hook, a repository it will not work in): no retry helps
            raise LedgerError(
                f"could not record run {run_id}: {exc.message}",
                f"{exc.hint + '; ' if exc.hint else ''}the run is still staged: then `ledger recover` commits it",
            ) from exc
    raise LedgerError(
        f"could not record run {run_id}: branch '{branch}' kept moving",
        "the run is still staged under .ledger/staging; `ledger recover` commits it",
    )


def find_run(repo: Repo, tip: str, run_id: str) -> RunEntry | None:
    """Look a run up by its full id at `tip` (no listing needed); ManifestError when a file of
    its folder is not a file (`run_entry`)."""
    path = run_path(run_id)
    entry = repo.tree_entry(tip, path)
    if entry is None or entry[1] != MODE_TREE:
        return None
    return run_entry(repo, run_id, path, entry[0])


def run_entry(repo: Repo, run_id: str, path: str, tree: str) -> RunEntry:
    """A run folder's entry, its files checked at the door: ManifestError naming the run and the
    file when one that ledger reads (`RUN_FILES`) is a folder, a link or a gitlink."""
    found = repo.entries_named(tree, RUN_FILES)
    for name, item in zip(RUN_FILES, found):
        if item is not None:
            file_oid(path, name, item)
    manifest, summary, settings, meta = (item[0] if item else None for item in found[: len(RECORD_FILES)])
    return RunEntry(run_id, path, tree, manifest, summary, settings, meta)


def file_oid(where: str, name: str, item: tuple[str, int] | None, error: type[LedgerError] = ManifestError) -> str | None:
    """The blob id of the file `name` of a run folder (None: absent); `error` naming it when the
    entry is not a file."""
    if item is None:
        return None
    if not is_file_mode(item[1]):
        raise error(f"{where}: {name} is a {entry_kind(item[1])}, not a file", NOT_LEDGERS)
    return item[0]


def run_commits(repo: Repo, tip: str, limit: int | None = None) -> list[tuple[str, str]]:
    """(run id, commit) along the first-parent history, newest first."""
    out: list[tuple[str, str]] = []
    for commit in repo.first_parent_walk(tip):  # `limit` counts runs: metadata commits sit between them
        if limit is not None and len(out) >= limit:
            break
        rid = run_id_of_commit(repo, commit)
        if rid is not None:
            out.append((rid, commit))
    return out


def commit_of_run(repo: Repo, tip: str, run_id: str) -> str | None:
    """The newest first-parent commit that recorded `run_id`: the walk stops there, so a run near
    the tip (what a diff usually names) costs a few commits, not the branch's history."""
    for commit in repo.first_parent_walk(tip):
        if run_id_of_commit(repo, commit) == run_id:
            return commit
    return None


def read_file_at(repo: Repo, entry: RunEntry, name: str, error: type[LedgerError] = ManifestError) -> bytes | None:
    """The bytes of a run folder's file `name` (a path below it), None when absent; `error`
    naming the run and the file when it is a folder, a link or a gitlink."""
    oid = file_oid(entry.path, name, repo.tree_entry(entry.tree, name), error)
    return repo.read_blob(oid) if oid is not None else None


def dvc_texts(repo: Repo, entry: RunEntry) -> list[str]:
    """The .dvc files of a run folder (data/<role>.dvc), as text; DataError naming the run when
    `data` is not a folder or one of them is not a UTF-8 file."""
    where = f"{entry.path}/data"
    found = repo.tree_entry(entry.tree, "data")
    if found is None:
        return []
    if found[1] != MODE_TREE:
        raise DataError(f"{where} is a {entry_kind(found[1])}, not a folder", NOT_LEDGERS)
    texts = []
    for name, oid, mode in repo.list_tree(found[0]):
        if name.endswith(".dvc"):
            file_oid(entry.path, f"data/{name}", (oid, mode), DataError)
            texts.append(dvc_text(repo.read_blob(oid), f"{where}/{name}"))
    return texts


def dvc_text(raw: bytes, where: str) -> str:
    """A .dvc file's text; DataError when it is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{where} is not UTF-8 text", NOT_LEDGERS) from exc
