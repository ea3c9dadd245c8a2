"""The commits a remote's branch tip adds, checked before the local branch moves (docs/trust.md).

Every first-parent commit the tip adds must be one ledger itself would have written:

- a metadata commit (`ledger tag/note/archive`): its parent's tree with one run's meta.json set;
- a run commit: one `Run-Id:` trailer, parents `[previous tip, code commit]` (`[code commit]` for
  the branch's first run), and a tree that is exactly `build_run_tree` of the code commit's tree,
  the previous tip and the commit's own run folder (ledger/storage/store.py), but for the run's
  uncommitted changes to tracked files. Those may not touch configuration (runtree.as_committed:
  `.dvc/`, `.ledger.yaml`, `.gitattributes`, `.gitmodules`, `.lfsconfig`, `runs/`), and the run's
  manifest must record them: `code.dirty` true and `code.patch` the id of exactly those changes.

Anything else is refused with one line naming the commit and the path (exit 5).
"""

from __future__ import annotations

from ledger.errors import EXIT_DATA, LedgerError
from ledger.manifest import RUN_ID_RE, run_path
from ledger.storage.git import MODE_TREE, Repo, entry_kind, is_file_mode, merge_base
from ledger.storage.listing import parse_record
from ledger.storage.runtree import Edit, as_committed, patch_id
from ledger.storage.store import (
    META_TRAILER_RE,
    TRAILER_RE,
    build_run_tree,
    code_commit_of,
    is_ledger_commit,
    meta_run_of_commit,
)


class ForeignCommit(LedgerError):
    """The remote's branch holds a commit that is not a ledger run commit: the branch stays put."""

    exit_code = EXIT_DATA


def refuse(commit: str, why: str) -> ForeignCommit:
    """The refusal of one incoming commit, naming it and why."""
    return ForeignCommit(
        f"the remote's branch holds commit {commit[:10]}, which is not a ledger run commit ({why}); the local branch was not moved",
        f"inspect it with `git show {commit[:10]}`; whoever pushed it can remove it from the remote",
    )


def check_incoming(repo: Repo, local: str | None, remote_tip: str) -> int:
    """Refuse (ForeignCommit, naming the commit) unless every first-parent commit the remote tip
    adds to `local` is a commit ledger writes (module docstring). Returns how many were checked."""
    base = merge_base(repo, local, remote_tip) if local is not None else None
    checked = 0
    for commit in repo.first_parent_walk(remote_tip):
        if base is not None and (commit == base or repo.is_ancestor(commit, base)):
            return checked
        message, parents, _tree = repo.commit_info(commit)
        ids = TRAILER_RE.findall(message)
        if not ids and meta_run_of_commit(repo, commit) is not None:
            _check_meta_commit(repo, commit)  # a tag/note/archive of one run (storage/runmeta.py)
            checked += 1
            continue
        if not ids:
            if base is None and checked:  # below the branch's first run: the code it was made from
                return checked
            raise refuse(commit, "no Run-Id trailer")
        _check_run_commit(repo, commit, ids, message, parents)
        checked += 1
    return checked


def _check_meta_commit(repo: Repo, commit: str) -> None:
    """A metadata commit as `ledger tag/note/archive` writes it: one parent, one `Ledger-Meta:` run
    id whose folder the parent has, and a tree equal to the parent's but for that run's meta.json
    (a small file: read as data, leniently, never run)."""
    from ledger.storage.runmeta import MAX_META_BYTES, META_FILE

    message, parents, tree = repo.commit_info(commit)
    rid = meta_run_of_commit(repo, commit)
    if rid is None or not RUN_ID_RE.match(rid) or len(META_TRAILER_RE.findall(message)) != 1:
        raise refuse(commit, "its Ledger-Meta trailer is not one run id")
    if len(parents) != 1:
        raise refuse(commit, f"a metadata commit with {len(parents)} parents")
    meta = repo.tree_entry(commit, f"{run_path(rid)}/{META_FILE}")
    if meta is None or repo.tree_entry(parents[0], run_path(rid)) is None:
        raise refuse(commit, f"it changes no meta.json of a run its parent has ({run_path(rid)})")
    if not is_file_mode(meta[1]):
        raise refuse(commit, f"its {META_FILE} is a {entry_kind(meta[1])}, not a file")
    if len(repo.read_blob(meta[0])) > MAX_META_BYTES:
        raise refuse(commit, f"its {META_FILE} is over {MAX_META_BYTES} bytes")
    parent_tree = repo.commit_info(parents[0])[2]
    if repo.tree_with_edits(parent_tree, {f"{run_path(rid)}/{META_FILE}": (meta[0], meta[1])}) != tree:
        raise refuse(commit, f"it changes more than {run_path(rid)}/{META_FILE}")


def _check_run_commit(repo: Repo, commit: str, ids: list[str], message: str, parents: list[str]) -> None:
    """One run commit exactly as ledger writes it (module docstring)."""
    rid = ids[0]
    if len(ids) > 1 or not RUN_ID_RE.match(rid):
        raise refuse(commit, "its Run-Id trailer is not one run id")
    code, previous = _run_commit_parents(repo, commit, message, parents)
    found = repo.tree_entry(commit, run_path(rid))
    if found is None or found[1] != MODE_TREE:
        raise refuse(commit, f"it lacks the folder {run_path(rid)}")
    if previous is not None and repo.tree_entry(previous, run_path(rid)) is not None:
        raise refuse(commit, f"run {rid} was there already")
    expected = build_run_tree(repo, repo.commit_info(code)[2], previous, rid, found[0])
    tree = repo.commit_info(commit)[2]
    if tree != expected:
        _check_uncommitted(repo, commit, rid, found[0], repo.tree_changes(expected, tree))


def _run_commit_parents(repo: Repo, commit: str, message: str, parents: list[str]) -> tuple[str, str | None]:
    """A run commit's code commit and its previous tip (None: the branch's first run), refused
    unless they are what ledger writes: one or two parents, the code commit among them or in
    this clone, the first parent a run commit unless it is the code commit."""
    if not 1 <= len(parents) <= 2:
        raise refuse(commit, f"{len(parents)} parents, where a run commit has its previous tip and its code commit")
    code = code_commit_of(repo, message, parents)
    if code is None:
        raise refuse(commit, "its code commit is not among its parents, nor in this clone")
    previous = parents[0] if parents[0] != code else None
    if previous is not None and not is_ledger_commit(repo, previous):
        raise refuse(commit, "its first parent is no run commit")
    return code, previous


def _check_uncommitted(repo: Repo, commit: str, rid: str, folder: str, changes: dict[str, Edit]) -> None:
    """Where a run commit's tree differs from what ledger writes for a clean run (`changes`, from
    that tree): only code its manifest records as the run's uncommitted change may."""
    for path in sorted(changes):
        if path.startswith("runs/"):
            where = "/".join(path.split("/")[:3])
            raise refuse(commit, f"it changes {where}, another run's folder" if len(path.split("/")) > 3 else f"it changes {path}")
        if as_committed(path):
            raise refuse(commit, f"it changes {path} outside its run folder (ledger records it only as committed)")
    patch = _recorded_patch(repo, rid, folder)
    if patch != patch_id(changes):
        raise refuse(commit, f"it changes {min(changes)} outside its run folder, which its manifest does not record as uncommitted")


def _recorded_patch(repo: Repo, rid: str, folder: str) -> str | None:
    """`code.patch` of a dirty run's manifest (None: not dirty, or no manifest ledger could read)."""
    found = repo.tree_entry(folder, "manifest.yaml")
    if found is None:
        return None
    try:
        record = parse_record(repo.read_blob(found[0]), run_path(rid))[0]
    except LedgerError:
        return None
    return record.code.patch if record.code.dirty is True else None
