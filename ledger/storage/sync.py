"""Sharing the branch: push with automatic rebuild on rejection, fetch and integrate.

Run folders never collide (each run owns `runs/<shard>/<id>/`), so when another machine pushed
first, our local-only run commits are rebuilt on top of the remote tip mechanically: same run
folder, same code tree, same second parent and message, new first parent. A run id that is
already on the remote is dropped from the rebuild, so no run is ever duplicated.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from ledger.errors import EXIT_DATA, LedgerError
from ledger.manifest import RUN_ID_RE, run_path
from ledger.storage.git import MODE_TREE, CodeSnapshot, RefMoved, Repo, entry_kind, git_remote_cmd, is_file_mode, merge_base
from ledger.storage.store import (
    META_TRAILER_RE,
    SHARD_RE,
    TRAILER_RE,
    branch_ref,
    build_run_tree,
    find_run,
    meta_run_of_commit,
    run_id_of_commit,
)

MAX_PUSH_ATTEMPTS = 30


@dataclass
class SyncResult:
    pushed: bool = False
    rebuilt: list[str] = field(default_factory=list)  # run ids rebuilt on a newer remote tip
    dropped: list[str] = field(default_factory=list)  # local runs already on the remote


def git_error(err: str, code: int) -> str:
    """git's complaint as one whole line: from its first `fatal:`/`error:` line to the end."""
    lines = [line.strip() for line in err.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if line.startswith(("fatal:", "error:"))), 0)
    text = " ".join(lines[start:])
    for prefix in ("fatal: ", "error: "):
        text = text.replace(prefix, "")
    return text or f"git exited with {code}"


def remote_ref(remote: str, branch: str) -> str:
    return f"refs/remotes/{remote}/{branch}"


def fetch(repo: Repo, remote: str, branch: str) -> str | None:
    """Fetch the remote's branch into its remote-tracking ref; its tip, or None if absent there."""
    code, err = git_remote_cmd(repo, "fetch", "--quiet", remote, f"+{branch_ref(branch)}:{remote_ref(remote, branch)}")
    if code != 0:
        if "couldn't find remote ref" in err or "could not find remote ref" in err.lower():
            return None
        raise LedgerError(
            f"cannot fetch '{branch}' from remote '{remote}': {git_error(err, code)}",
            f"check `git remote -v` and that '{remote}' is reachable; your runs are safe locally",
        )
    return repo.ref_tip(remote_ref(remote, branch))


def local_only_runs(repo: Repo, local: str, base: str | None, with_meta: bool = False) -> list[tuple[str, str]]:
    """(run id, commit) of first-parent commits on `local` not reachable from `base`, oldest first;
    `with_meta`: metadata commits too (id of the run they change)."""
    out = []
    for commit in repo.first_parent_walk(local):
        if base is not None and repo.is_ancestor(commit, base):
            break
        rid = run_id_of_commit(repo, commit) or (meta_run_of_commit(repo, commit) if with_meta else None)
        if rid is not None:
            out.append((rid, commit))
    out.reverse()
    return out


def rebuild_on(repo: Repo, base: str, runs: list[tuple[str, str]], result: SyncResult) -> str:
    """Replay run commits onto `base` (see module docstring); returns the new tip.

    Every run in an old commit's `runs/` is either on the remote already or an earlier local run
    rebuilt just before, so overlaying the new tip's shard folders on the old tree loses none.
    """
    tip = base
    for rid, commit in runs:
        if meta_run_of_commit(repo, commit) is not None:  # a tag/note/archive: merged into the remote's file
            from ledger.storage.runmeta import rebuild_meta_commit

            tip = rebuild_meta_commit(repo, tip, rid, commit) or tip
            continue
        message, parents, tree = repo.commit_info(commit)
        own = repo.tree_entry(commit, run_path(rid))
        if own is None:
            raise LedgerError(f"run commit {commit[:10]} has no folder {run_path(rid)}", "the branch is damaged")
        theirs = find_run(repo, base, rid)
        if theirs is not None:
            if theirs.tree != own[0]:  # never drop a local run for someone else's folder of its id
                raise ForeignCommit(
                    f"the remote holds another run with the id {rid} of a run recorded here",
                    f"your run stays on the local branch; inspect the remote's with `git log {base[:10]} -- {run_path(rid)}`",
                )
            result.dropped.append(rid)
            continue
        code = CodeSnapshot(commit=parents[-1], branch=None, tree=tree, dirty=False, patch_sha256=None, untracked=0)
        new_tree = build_run_tree(repo, code, tip, rid, own[0])
        tip = repo.commit(new_tree, [tip, *parents[1:]], message)
        result.rebuilt.append(rid)
    return tip


class ForeignCommit(LedgerError):
    """The remote's branch holds a commit that is not a ledger run commit: the branch stays put."""

    exit_code = EXIT_DATA


def _shards(repo: Repo, commit: str) -> dict[str, str]:
    """shard name -> tree id under `runs/` of a commit (empty when it has no runs/ folder)."""
    found = repo.tree_entry(commit, "runs")
    if found is None or found[1] != MODE_TREE:
        return {}
    return {name: oid for name, oid, mode in repo.list_tree(found[0]) if mode == MODE_TREE and SHARD_RE.match(name)}


def _changed_runs(repo: Repo, mine: dict[str, str], before: dict[str, str]) -> list[str]:
    """The run folders (runs/<shard>/<name>) that differ between two `_shards` maps."""
    out = []
    for shard in sorted(set(mine) | set(before)):
        if mine.get(shard) == before.get(shard):
            continue
        a = {n: o for n, o, _ in repo.list_tree(mine[shard])} if shard in mine else {}
        b = {n: o for n, o, _ in repo.list_tree(before[shard])} if shard in before else {}
        out += [f"runs/{shard}/{n}" for n in sorted(set(a) | set(b)) if a.get(n) != b.get(n)]
    return out


def _refuse(commit: str, why: str) -> ForeignCommit:
    return ForeignCommit(
        f"the remote's branch holds commit {commit[:10]}, which is not a ledger run commit ({why}); the local branch was not moved",
        f"inspect it with `git show {commit[:10]}`; whoever pushed it can remove it from the remote",
    )


def _check_meta_commit(repo: Repo, commit: str) -> None:
    """A metadata commit as `ledger tag/note/archive` writes it: one parent, one `Ledger-Meta:` run
    id whose folder the parent has, and a tree equal to the parent's but for that run's meta.json
    (a small file: read as data, leniently, never run)."""
    from ledger.storage.runmeta import MAX_META_BYTES, META_FILE

    message, parents, tree = repo.commit_info(commit)
    rid = meta_run_of_commit(repo, commit)
    if rid is None or not RUN_ID_RE.match(rid) or len(META_TRAILER_RE.findall(message)) != 1:
        raise _refuse(commit, "its Ledger-Meta trailer is not one run id")
    if len(parents) != 1:
        raise _refuse(commit, f"a metadata commit with {len(parents)} parents")
    meta = repo.tree_entry(commit, f"{run_path(rid)}/{META_FILE}")
    if meta is None or repo.tree_entry(parents[0], run_path(rid)) is None:
        raise _refuse(commit, f"it changes no meta.json of a run its parent has ({run_path(rid)})")
    if not is_file_mode(meta[1]):
        raise _refuse(commit, f"its {META_FILE} is a {entry_kind(meta[1])}, not a file")
    if len(repo.read_blob(meta[0])) > MAX_META_BYTES:
        raise _refuse(commit, f"its {META_FILE} is over {MAX_META_BYTES} bytes")
    parent_tree = repo.commit_info(parents[0])[2]
    if repo.tree_with_edits(parent_tree, {f"{run_path(rid)}/{META_FILE}": (meta[0], meta[1])}) != tree:
        raise _refuse(commit, f"it changes more than {run_path(rid)}/{META_FILE}")


def check_incoming(repo: Repo, local: str | None, remote_tip: str) -> int:
    """Refuse (ForeignCommit, naming the commit) unless every first-parent commit the remote tip
    adds to `local` is a run commit ledger writes: one `Run-Id:` trailer naming a run id, at most
    two parents, and under `runs/` exactly that run's folder added to its first parent's runs,
    no other run folder changed or removed. Returns how many commits were checked.
    """
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
            raise _refuse(commit, "no Run-Id trailer")
        _check_run_commit(repo, commit, ids, parents)
        checked += 1
    return checked


def _check_run_commit(repo: Repo, commit: str, ids: list[str], parents: list[str]) -> None:
    """One run commit as ledger writes it: one run id, at most two parents, that run's folder
    added to its first parent's runs and no other run folder changed."""
    rid = ids[0]
    if len(ids) > 1 or not RUN_ID_RE.match(rid):
        raise _refuse(commit, "its Run-Id trailer is not one run id")
    if len(parents) > 2:
        raise _refuse(commit, f"{len(parents)} parents")
    found = repo.tree_entry(commit, run_path(rid))
    if found is None or found[1] != MODE_TREE:
        raise _refuse(commit, f"it lacks the folder {run_path(rid)}")
    first = parents[0] if parents else None
    if first is not None and (run_id_of_commit(repo, first) or meta_run_of_commit(repo, first)) is not None:
        if repo.tree_entry(first, run_path(rid)) is not None:
            raise _refuse(commit, f"run {rid} was there already")
        changed = _changed_runs(repo, _shards(repo, commit), _shards(repo, first))
        if changed != [run_path(rid)]:
            other = next((c for c in changed if c != run_path(rid)), run_path(rid))
            raise _refuse(commit, f"it changes {other}, another run's folder")
    elif first is not None and len(parents) != 1:
        raise _refuse(commit, "its first parent is no run commit")


def integrate(repo: Repo, branch: str, remote_tip: str, result: SyncResult) -> str:
    """Make the local branch contain the remote tip (fast-forward or rebuild). Returns the new tip.

    The remote's commits are checked first (`check_incoming`): a tip that is not ledger's is
    refused before the local branch moves."""
    ref = branch_ref(branch)
    check_incoming(repo, repo.branch_tip(branch), remote_tip)
    for _ in range(MAX_PUSH_ATTEMPTS):
        local = repo.branch_tip(branch)
        if local is None:
            new = remote_tip
        elif repo.is_ancestor(remote_tip, local):
            return local
        elif repo.is_ancestor(local, remote_tip):
            new = remote_tip
        else:
            runs = local_only_runs(repo, local, remote_tip, with_meta=True)
            new = rebuild_on(repo, remote_tip, runs, result)
        try:
            repo.update_ref(ref, new, local, f"ledger: integrate {remote_tip[:10]}")
            return new
        except RefMoved:
            time.sleep(random.uniform(0.005, 0.05))  # a run landed meanwhile: redo with it
    raise LedgerError(f"branch '{branch}' kept moving while integrating the remote", "try `ledger pull` again")


def push(repo: Repo, remote: str, branch: str) -> SyncResult:
    """Push the branch; on rejection fetch, rebuild local-only runs on the remote tip, retry."""
    result = SyncResult()
    local = repo.branch_tip(branch)
    if local is None:
        raise LedgerError(f"no runs to push: branch '{branch}' does not exist yet", "record a run with `ledger run -- CMD`")
    for attempt in range(1, MAX_PUSH_ATTEMPTS + 1):
        local = repo.branch_tip(branch)
        assert local is not None
        code, err = git_remote_cmd(repo, "push", "--quiet", remote, f"{branch_ref(branch)}:{branch_ref(branch)}")
        if code == 0:
            result.pushed = True
            git_remote_cmd(repo, "update-ref", remote_ref(remote, branch), local)
            return result
        rejected = any(
            s in err
            for s in ("rejected", "non-fast-forward", "fetch first", "cannot lock ref", "failed to update ref", "incorrect old value")
        )
        if not rejected:
            raise LedgerError(
                f"cannot push '{branch}' to '{remote}': {git_error(err, code)}",
                "your runs stay recorded locally; fix the remote and run `ledger push` again",
            )
        remote_tip = fetch(repo, remote, branch)
        if remote_tip is not None:
            integrate(repo, branch, remote_tip, result)
        time.sleep(random.uniform(0.0, 0.05 * attempt))
    raise LedgerError(f"gave up pushing '{branch}' after {MAX_PUSH_ATTEMPTS} rejections", "others keep pushing; run `ledger push` again")
