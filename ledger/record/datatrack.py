"""The run's data tracked with DVC once the job has ended: its outputs (`track_data`, the
`data` section) and logs too big for git (`offload_big_logs`). Each is called through
`ledger.record.derived.guarded`, so one failing never loses the run."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.config import Config
from ledger.data.outputs import find_outputs
from ledger.fsutil import write_atomic
from ledger.manifest import run_path
from ledger.record.jobsetup import Say
from ledger.redact.scanner import Redactor
from ledger.runrecord import UNSET, Command, DataEntry, replace
from ledger.storage import staging
from ledger.storage.git import Repo

if TYPE_CHECKING:
    from ledger.data.dvcops import DataRecord
    from ledger.record.heldback import Screened


def data_entry(record: DataRecord, template: str) -> DataEntry:
    """A tracked output as the manifest lists it, from `template`: not its machine-local source
    path, not the .dvc text (that file sits beside the manifest)."""
    return DataEntry(
        role=record.role,
        path=record.path,
        dvc_file=record.dvc_file,
        hash=record.hash,
        nfiles=record.nfiles,
        size=record.size,
        tracked=record.tracked,
        error=record.error,
        template=template,
    )


def track_data(repo: Repo, staged: staging.Staged, command: Command, say: Say, redactor: Redactor) -> list[DataEntry] | None:
    """The run's outputs tracked with DVC: the `data` section (None: no output exists). Each file
    is scanned first with `redactor` (the run's known values): one holding secret text is held
    back (`ledger.record.heldback`) and never reaches the DVC cache."""
    from ledger.record.heldback import screen_outputs

    present = [(role, path, tmpl) for role, path, tmpl in _outputs(staged, command) if path.exists()]
    if not present:
        return None
    screened = screen_outputs(redactor, staged, present, say)
    kept = [s for s in screened if s.track]
    from ledger.data.dvcops import track_outputs

    records = iter(track_outputs(repo.root, staged.run_dir, [(s.role, s.path) for s in kept], [staged.dir]) if kept else [])
    return _data_entries(staged, screened, records, say)


def _data_entries(staged: staging.Staged, screened: list[Screened], records: Iterator[DataRecord], say: Say) -> list[DataEntry]:
    """The `data` entries of the screened outputs, in order: a tracked one's from its DVC record
    (`records`, in the order of the tracked ones), the others untracked; a tracking error said."""
    data = []
    for s in screened:
        # a template inside the run's own data folder is recorded relative to the run folder
        tmpl = s.template.replace(str(staged.data_dir), "data", 1) if s.template.startswith(str(staged.data_dir)) else s.template
        entry = data_entry(next(records), tmpl) if s.track else _untracked_entry(s.role, s.error, tmpl)
        data.append(replace(entry, held_back=s.held or UNSET))
        if entry.error and not s.held:
            say(f"ledger: data '{entry.role}' not tracked: {entry.error} (`ledger push` retries)")
    return data


def _outputs(staged: staging.Staged, command: Command) -> list[tuple[str, Path, str]]:
    """(role, path, template) of every output the run may have written: the training command's
    output flags, then the `--data` paths; relative paths from the command's working directory."""
    req = staged.read_json("request.json") or {}
    cwd = Path(str(command.cwd))
    # the whole job argv when no training command was found: find_outputs looks past `ray ... --`
    training_argv = list(command.training_argv or req.get("job_argv") or [])
    outputs = [(out.role, _under(cwd, out.path), out.template) for out in find_outputs(training_argv)]
    return outputs + [("other", _under(cwd, extra), extra) for extra in req.get("data_paths") or []]


def _under(cwd: Path, path: str) -> Path:
    """`path`, from `cwd` when relative."""
    return Path(path) if Path(path).is_absolute() else cwd / path


def _untracked_entry(role: str, error: str | None, template: str) -> DataEntry:
    """The `data` entry of an output nothing of which is tracked (its files held back)."""
    return DataEntry(role=role, path=f"data/{role}", dvc_file=f"data/{role}.dvc", tracked=False, error=error, template=template)


EXCERPT = 1 << 20  # bytes of head and of tail a big log keeps in git


def offload_big_logs(
    repo: Repo,
    cfg: Config,
    staged: staging.Staged,
    run_id: str,
    say: Say,
    known_md5: Mapping[str, tuple[str, tuple[int, int, int]]] | None = None,
) -> tuple[DataEntry, list[str]] | None:
    """Track a trainer/engine log bigger than `logs: git_max_mb` with DVC, like bulky data.

    A 1 GiB log costs git ~9 s to store and every clone carries it forever; DVC hashes it in ~2 s
    and `dvc pull` brings it back on demand. The run folder keeps the log's first and last MiB in
    its place, so `git show`, `ledger diff`'s git diff and a quick look still work. Returns (the
    `data` entry of the logs, `logs.in_dvc`), None when the logs stay in git whole.
    """
    big = _too_big_for_git(repo, cfg, staged, say)
    if not big:
        return None
    from ledger.data.dvcops import track_outputs

    dest = staged.data_dir / "logs"
    dest.mkdir(exist_ok=True)
    for name in big:
        os.replace(staged.run_dir / name, dest / name)
        _leave_excerpt(dest / name, staged.run_dir / name, run_id)
    # hashed by the log worker as it read them back (the same inode: moved, not copied)
    known = {dest / n: known_md5[n] for n in big if known_md5 and n in known_md5}
    [record] = track_outputs(repo.root, staged.run_dir, [("logs", dest)], [staged.dir], known=known)
    if record.error:  # keep the whole logs in git rather than lose them
        for name in big:
            os.replace(dest / name, staged.run_dir / name)
        say(f"ledger: big logs not tracked with DVC ({record.error}); they stay in git whole")
        return None
    return data_entry(record, "data/logs"), big


def _too_big_for_git(repo: Repo, cfg: Config, staged: staging.Staged, say: Say) -> list[str]:
    """The run's logs over `logs: git_max_mb`, when DVC is there to track them (said when it is not)."""
    limit = cfg.logs.git_max_mb * (1 << 20)
    big = [n for n in ("trainer.log", "engine.log") if (staged.run_dir / n).stat().st_size > limit]
    if big and not (repo.root / ".dvc").is_dir():
        say(f"ledger: {', '.join(big)} over {cfg.logs.git_max_mb:g} MB stay in git whole: no DVC here (`ledger init`)")
        return []
    return big


def _leave_excerpt(full: Path, place: Path, run_id: str) -> None:
    """The first and last `EXCERPT` bytes of the log at `full` written at `place`, with a line
    between them saying how to get the whole log back."""
    size = full.stat().st_size
    with open(full, "rb") as f:
        head = f.read(EXCERPT)
        f.seek(max(size - EXCERPT, EXCERPT))
        tail = f.read()
    note = (
        f"\n[ledger: {size - len(head) - len(tail)} bytes elided; the whole log is tracked with DVC as "
        f"data/logs/{full.name}: `ledger pull REMOTE {run_id}` or `dvc pull -R {run_path(run_id)}`]\n"
    )
    write_atomic(place, head + note.encode() + tail)
