"""`ledger push` and `ledger pull`: the branch through git, the bulky data through DVC."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ledger.configload import load_config
from ledger.errors import EXIT_DATA, EXIT_OK, DataError, LedgerError
from ledger.runref import resolve
from ledger.storage import sync
from ledger.storage.git import Repo
from ledger.storage.listing import load_listing
from ledger.storage.store import RunEntry, check_ledger_branch, dvc_texts, find_run
from ledger.termstyle import progress
from ledger.textfmt import plural

Say = Callable[[str], None]


def _all_texts(repo: Repo, entries: list[RunEntry], say: Say) -> tuple[list[str], int]:
    """The .dvc files of every run but those whose data folder is not one ledger wrote (each
    skipped with a warning naming it), and how many were skipped."""
    texts: list[str] = []
    skipped = 0
    for entry in entries:
        try:
            texts += dvc_texts(repo, entry)
        except DataError as exc:
            say(f"ledger: warning: data of run {entry.id} skipped: {exc.one_line()}")
            skipped += 1
    return texts, skipped


def _pending_file(repo: Repo) -> Path:
    return repo.common_dir / "ledger" / "data-pending"


def pick_remote(repo: Repo, remote: str | None) -> str:
    """The git remote to share with: the one named, else `origin`, else the only one."""
    names = repo.remote_names()
    if remote is not None:
        if remote not in names:
            known = f" (remotes here: {', '.join(names)})" if names else ""
            raise LedgerError(f"no git remote named '{remote}'{known}", f"add it: `git remote add {remote} URL`")
        return remote
    if "origin" in names or len(names) != 1:
        if "origin" not in names:
            raise LedgerError(
                "no git remote 'origin' to share runs with" + (f" (remotes here: {', '.join(names)})" if names else ""),
                "name one (`ledger push REMOTE`) or add it: `git remote add origin URL`",
            )
        return "origin"
    return names[0]


def push_runs(start: Path, remote: str | None, say: Say) -> int:
    """Push runs' data to the DVC remote, then the branch to the git remote (rebuilding on rejection)."""
    repo = Repo(start)
    cfg = load_config(repo.root, repo.common_dir)
    tip = check_ledger_branch(repo, cfg.branch)
    remote = pick_remote(repo, remote)  # before any data moves: no "pushed data" before a failure
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
            texts += dvc_texts(repo, entry)
    code = _push_data(repo, cfg.dvc_remote, texts, local, pending_path, say) if texts else EXIT_OK
    result_git = sync.push(repo, remote, cfg.branch)
    if result_git.rebuilt:
        say(f"ledger: remote had new runs; rebuilt {plural(len(result_git.rebuilt), 'local run')} on top")
    if result_git.dropped:
        say(f"ledger: {plural(len(result_git.dropped), 'run')} already on the remote")
    say(f"ledger: pushed branch '{cfg.branch}' to '{remote}'")
    return code


def _push_data(repo: Repo, dvc_remote: str | None, texts: list[str], local: set[str], pending_path: Path, say: Say) -> int:
    """Push the runs' data; what failed leaves the runs pending, for the next `ledger push`."""
    from ledger.data.dvcremote import push_data

    result = push_data(repo.root, texts, dvc_remote, progress("pushing data"))
    if result.failed:
        pending_path.parent.mkdir(exist_ok=True)
        pending_path.write_text("\n".join(sorted(local)) + "\n")
        for f in result.failed[:5]:
            say(f"ledger: data not pushed: {f.what}: {f.reason}")
        say("ledger: the branch is pushed all the same; `ledger push` again retries the data")
        return EXIT_DATA
    pending_path.unlink(missing_ok=True)
    say(f"ledger: pushed data of {plural(len(local), 'run')} ({result.pushed} objects)")
    return EXIT_OK


def pull_runs(start: Path, remote: str | None, runs: list[str], all_data: bool, say: Say) -> int:
    """Fetch and integrate the branch; fetch the data of the named runs (or all) into the DVC cache."""
    repo = Repo(start)
    cfg = load_config(repo.root, repo.common_dir)
    check_ledger_branch(repo, cfg.branch)
    if remote is not None and remote not in repo.remote_names():
        runs = [remote, *runs]  # `ledger pull RUN`: a run from the default remote
        remote = None
    remote = pick_remote(repo, remote)
    remote_tip = sync.fetch(repo, remote, cfg.branch)
    if remote_tip is None:
        raise LedgerError(f"remote '{remote}' has no branch '{cfg.branch}'", "push runs there first (`ledger push`)")
    result = sync.SyncResult()
    tip = sync.integrate(repo, cfg.branch, remote_tip, result)
    say(
        f"ledger: branch '{cfg.branch}' now at {tip[:10]}"
        + (f" ({plural(len(result.rebuilt), 'local run')} rebuilt on top)" if result.rebuilt else "")
    )
    entries, texts, skipped = _pulled_texts(repo, tip, runs, all_data, say)
    if not texts:
        if runs or all_data:
            say("ledger: the named runs have no DVC-tracked data")
        return EXIT_DATA if skipped else EXIT_OK
    return _fetch_data(repo, cfg.dvc_remote, entries, texts, skipped, say)


def _pulled_texts(repo: Repo, tip: str, runs: list[str], all_data: bool, say: Say) -> tuple[list[RunEntry], list[str], int]:
    """The runs whose data to fetch, their .dvc texts, and how many were skipped."""
    listing = load_listing(repo, tip)
    if all_data:  # every readable run; one whose data folder is not ledger's is skipped, not fatal
        entries = [e for rid, e in sorted(listing.entries.items()) if rid not in listing.broken]
        texts, skipped = _all_texts(repo, entries, say)
        return entries, texts, skipped
    # the runs named: one whose data folder is not ledger's is refused (DataError)
    named = [resolve(repo, tip, r, listing) for r in runs]
    for e in named:  # no data of a run the listing skips (over a read limit: docs/trust.md)
        if e.id in listing.broken:
            say(f"ledger: warning: run {e.id} skipped: {listing.broken[e.id]}")
    entries = [e for e in named if e.id not in listing.broken]
    return entries, [t for e in entries for t in dvc_texts(repo, e)], 0


def _fetch_data(repo: Repo, dvc_remote: str | None, entries: list[RunEntry], texts: list[str], skipped: int, say: Say) -> int:
    """Fetch the runs' data into the DVC cache and say how it went; the exit code."""
    from ledger.data.dvcremote import fetch_data

    fetched = fetch_data(repo.root, texts, dvc_remote, progress("fetching data"))
    for f in fetched.failed[:5]:
        say(f"ledger: data not fetched: {f.what}: {f.reason}")
    if fetched.failed:  # never a "fetched" line after a failure
        say(
            f"ledger: data of {plural(len(entries), 'run')} not all fetched ({fetched.fetched} objects came); "
            "the branch is pulled all the same, `ledger pull` again retries the data"
        )
        return EXIT_DATA
    say(f"ledger: fetched data of {plural(len(entries) - skipped, 'run')} ({fetched.fetched} objects)")
    return EXIT_DATA if skipped else EXIT_OK
