"""The recorded samples a replay loads: the rollout data of a run, found and verified.

In this checkout, or checked out of the DVC cache into `.ledger/replay-data/` (folders made there
without following a link a pulled tree could plant), and always verified against the run's .dvc
file before the replay reads it. Paths of a record that escape its run folder are refused.
"""

from __future__ import annotations

import os
from pathlib import Path

from ledger.data.dirpaths import open_dir
from ledger.errors import DataError
from ledger.runrecord import UNSET, DataEntry, RunRecord
from ledger.storage import staging
from ledger.storage.git import Repo
from ledger.storage.store import RunEntry, dvc_text, read_file_at


def inside(root: Path, path: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def rollout_record(record: RunRecord) -> DataEntry | None:
    return next((d for d in record.data if d.role == "rollout"), None)


def _dvc_text(repo: Repo, entry: RunEntry, rec: DataEntry) -> str:
    rel = rec.dvc_file or "data/rollout.dvc"
    if rel.startswith("/") or ".." in Path(rel).parts:
        raise DataError(f"run {entry.id}: data file path {rel!r} escapes the run folder", "the record is not trusted")
    raw = read_file_at(repo, entry, rel, DataError)
    if raw is None:
        raise DataError(f"run {entry.id} lists rollout data but has no {rel}", "the record is damaged")
    return dvc_text(raw, f"{entry.path}/{rel}")


REPLAY_DATA = ("replay-data",)


def replay_data_dir(repo: Repo, *parts: str) -> Path:
    return repo.root / staging.LEDGER_DIR / REPLAY_DATA[0] / Path(*parts)


def locate_data(repo: Repo, entry: RunEntry, rec: DataEntry, remote_hint: str, dry_run: bool = False) -> Path:
    """A verified local copy of the run's rollout data: in this checkout, or from the DVC cache.

    With `dry_run` nothing is written: data that is only in the DVC cache is not checked out (and
    so not verified, but its listing's paths and hash are checked); the folder it would go to is
    returned.
    """
    from ledger.data.dvcops import checkout_data, status_data, verify_data

    text = _dvc_text(repo, entry, rec)
    pull = f"`ledger pull {remote_hint} {entry.id}` (or `dvc pull -R {entry.path}` in a checkout of the experiments branch)"
    where = _in_checkout(repo, entry, rec)
    if where is None:
        _check_cached(entry, status_data(repo.root, text), pull)
        where = replay_data_dir(repo, entry.id, "rollout")
        if not where.exists():
            if dry_run:  # status_data has checked the listing's paths and hash already
                return where
            nofollow_dirs(repo, entry.id)
            checkout_data(repo.root, text, where, root=repo.root)
    for f in where.rglob("*"):
        if f.is_symlink() and not inside(where, f):
            raise DataError(f"run {entry.id}: {f.name} links outside the data folder", "refusing to replay it")
    problems = verify_data(where, text, repo.root)
    if problems:
        raise DataError(
            f"the rollout data of run {entry.id} does not match its record: {problems[0]}"
            + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""),
            f"restore it with {pull}",
        )
    return where


def _in_checkout(repo: Repo, entry: RunEntry, rec: DataEntry) -> Path | None:
    """The run's rollout data folder in this checkout, if it holds anything (never one that
    links out of the run folder)."""
    in_tree = repo.root / entry.path / (rec.path or "data/rollout")
    if not (in_tree.is_dir() and any(in_tree.iterdir())):
        return None
    if not inside(repo.root / entry.path, in_tree):
        raise DataError(f"run {entry.id}: its data folder links out of the run folder", "refusing to replay it")
    return in_tree


def _check_cached(entry: RunEntry, status: str, pull: str) -> None:
    """Data to check out of the DVC cache must be all there (`status_data` says `cached`)."""
    if status != "cached":
        raise DataError(
            f"the rollout data of run {entry.id} is {'incomplete' if status == 'partial' else 'not here'}", f"fetch it with {pull}"
        )


def nofollow_dirs(repo: Repo, *parts: str) -> None:
    """Create `.ledger/replay-data/<parts>` without following a link a pulled tree could plant."""
    os.close(open_dir(repo.root, [staging.LEDGER_DIR, *REPLAY_DATA, *parts], create=True))
    staging.ledger_dir(repo.root)  # its .gitignore


def check_steps_recorded(run_id: str, rec: DataEntry, data_dir: Path, name_template: str, chosen: list[int]) -> None:
    """A dry run refuses steps that are not in the recorded data, as the replay itself would."""
    known = _recorded_steps(run_id, rec, data_dir, name_template, chosen)
    if known is None:
        return  # only in the DVC cache, not checked out by a dry run: the replay checks
    have, recorded = known
    missing = [i for i in chosen if str(i) not in have]
    if missing:
        raise DataError(f"rollout {missing[0]} is not in the recorded data of run {run_id} (recorded: {recorded})", "pick steps that exist")


def _recorded_steps(run_id: str, rec: DataEntry, data_dir: Path, name_template: str, chosen: list[int]) -> tuple[set[str], str] | None:
    """(the recorded rollout ids among those a dry run can know, how to say them): from the
    record's `rollout_ids`, else from the files of a checked-out data folder; None: neither."""
    ids = rec.rollout_ids
    if ids is not UNSET:
        return {str(i) for i in ids}, ", ".join(str(i) for i in ids[:20]) + (" ..." if len(ids) > 20 else "")
    if data_dir.is_dir():
        return {str(i) for i in chosen if (data_dir / name_template.format(rollout_id=i)).is_file()}, f"see `ledger show {run_id}`"
    return None
