"""Sharing the branch: push with automatic rebuild on rejection, fetch and integrate.

Run folders never collide (each run owns `runs/<shard>/<id>/`), so when another machine pushed
first, our local-only run commits are rebuilt on top of the remote tip mechanically: same run
folder, same code tree, same code commit (the last parent) and message, new first parent. A run id that is
already on the remote is dropped from the rebuild, so no run is ever duplicated.
"""

from __future__ import annotations

import random
import time

import msgspec

from ledger.errors import LedgerError
from ledger.manifest import run_path
from ledger.storage.git import Repo, git_remote_cmd
from ledger.storage.gitcmd import RefMoved
from ledger.storage.incoming import ForeignCommit, check_incoming
from ledger.storage.store import branch_ref, build_run_tree, code_commit_of, find_run, meta_run_of_commit, run_id_of_commit

MAX_PUSH_ATTEMPTS = 30


class SyncResult(msgspec.Struct):
    pushed: bool = False
    rebuilt: list[str] = msgspec.field(default_factory=list)  # run ids rebuilt on a newer remote tip
    dropped: list[str] = msgspec.field(default_factory=list)  # local runs already on the remote


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
        # the code commit stays the last parent, also for a branch's first run (`[code]`): a pull
        # checks the tree against it (storage/incoming.py)
        code = code_commit_of(repo, message, parents)
        new_tree = build_run_tree(repo, tree, tip, rid, own[0])
        tip = repo.commit(new_tree, [tip, code] if code is not None else [tip], message)
        result.rebuilt.append(rid)
    return tip


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
