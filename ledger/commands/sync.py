"""`ledger push` and `ledger pull`: the branch through git, the bulky data through DVC."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ledger.config import load_config
from ledger.errors import EXIT_DATA, EXIT_OK, LedgerError
from ledger.runref import resolve
from ledger.storage import sync
from ledger.storage.git import Repo
from ledger.storage.listing import load_listing
from ledger.storage.store import RunEntry, check_ledger_branch, find_run
from ledger.termstyle import progress
from ledger.textfmt import plural

Say = Callable[[str], None]


def _dvc_texts(repo: Repo, entry: RunEntry) -> list[str]:
    """The .dvc files of a run folder (data/<role>.dvc)."""
    data = repo.tree_entry(entry.tree, "data")
    if data is None:
        return []
    return [repo.read_blob(oid).decode() for name, oid, _m in repo.list_tree(data[0]) if name.endswith(".dvc")]


def _pending_file(repo: Repo) -> Path:
    return repo.common_dir / "ledger" / "data-pending"


def push_runs(start: Path, remote: str | None, say: Say) -> int:
    """Push runs' data to the DVC remote, then the branch to the git remote (rebuilding on rejection)."""
    repo = Repo(start)
    cfg = load_config(repo.root)
    tip = check_ledger_branch(repo, cfg.branch)
    remote = remote or "origin"
    if tip is None:
        raise LedgerError(f"no runs to push: branch '{cfg.branch}' does not exist yet", "record a run first")
    base = repo.ref_tip(sync.remote_ref(remote, cfg.branch))
    pending_path = _pending_file(repo)
    pending = set(pending_path.read_text().split()) if pending_path.exists() else set()
    local = {rid for rid, _ in sync.local_only_runs(repo, tip, base)} | pending
    texts: list[str] = []
    for rid in sorted(local):
        entry = find_run(repo, tip, rid)
        if entry is not None:
            texts += _dvc_texts(repo, entry)
    code = EXIT_OK
    if texts:
        from ledger.data.dvcremote import push_data

        result = push_data(repo.root, texts, cfg.dvc_remote, progress("pushing data"))
        if result.failed:
            pending_path.parent.mkdir(exist_ok=True)
            pending_path.write_text("\n".join(sorted(local)) + "\n")
            for f in result.failed[:5]:
                say(f"ledger: data not pushed: {f.what}: {f.reason}")
            say("ledger: the branch is pushed anyway; `ledger push` retries the data")
            code = EXIT_DATA
        else:
            pending_path.unlink(missing_ok=True)
            say(f"ledger: pushed data of {plural(len(local), 'run')} ({result.pushed} objects)")
    result_git = sync.push(repo, remote, cfg.branch)
    if result_git.rebuilt:
        say(f"ledger: remote had new runs; rebuilt {plural(len(result_git.rebuilt), 'local run')} on top")
    if result_git.dropped:
        say(f"ledger: {plural(len(result_git.dropped), 'run')} already on the remote")
    say(f"ledger: pushed branch '{cfg.branch}' to '{remote}'")
    return code


def pull_runs(start: Path, remote: str | None, runs: list[str], all_data: bool, say: Say) -> int:
    """Fetch and integrate the branch; fetch the data of the named runs (or all) into the DVC cache."""
    repo = Repo(start)
    cfg = load_config(repo.root)
    check_ledger_branch(repo, cfg.branch)
    remote = remote or "origin"
    remote_tip = sync.fetch(repo, remote, cfg.branch)
    if remote_tip is None:
        raise LedgerError(f"remote '{remote}' has no branch '{cfg.branch}'", "push runs there first (`ledger push`)")
    result = sync.SyncResult()
    tip = sync.integrate(repo, cfg.branch, remote_tip, result)
    say(f"ledger: branch '{cfg.branch}' now at {tip[:10]}"
        + (f" ({plural(len(result.rebuilt), 'local run')} rebuilt on top)" if result.rebuilt else ""))
    listing = load_listing(repo, tip)
    entries = list(listing.entries.values()) if all_data else [resolve(repo, tip, r, listing) for r in runs]
    texts = [t for e in entries for t in _dvc_texts(repo, e)]
    if not texts:
        if runs or all_data:
            say("ledger: the named runs have no DVC-tracked data")
        return EXIT_OK
    from ledger.data.dvcremote import fetch_data

    fetched = fetch_data(repo.root, texts, cfg.dvc_remote, progress("fetching data"))
    for f in fetched.failed[:5]:
        say(f"ledger: data not fetched: {f.what}: {f.reason}")
    say(f"ledger: fetched data of {plural(len(entries), 'run')} ({fetched.fetched} objects)")
    return EXIT_DATA if fetched.failed else EXIT_OK

