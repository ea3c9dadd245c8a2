"""`ledger recover`: commit every staged run whose ledger process is gone, with state `lost`.

A run that submitted Ray jobs is recorded as Ray says they ended (`rayrecover`): a job still
running leaves it staged (`--follow` waits for its end), Ray unreachable too (`--no-ray`: lost).

Nothing a job wrote is ever deleted here: a staged folder with no record to commit (ledger died
before writing it, or a job that ran on after its run was committed wrote into it again) has
every file under its data folder moved to `.ledger/untracked/<run id>/`, as for a run's
untracked outputs; only ledger's own bookkeeping is removed, and the message says which.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec

from ledger.config import Config
from ledger.configload import load_config
from ledger.errors import LedgerError
from ledger.heat.setup import summary_from_log
from ledger.record.jobsetup import append_missing_logs
from ledger.record.rayrecover import RayAnswer, ask_ray, ended_status
from ledger.record.run import Say, finish, truncation_noted
from ledger.record.streamed import StreamResult, from_split_logs, process_raw, retire_raw, stop_worker, was_punched
from ledger.redact.runscrub import load_secrets
from ledger.redact.scanner import Redactor
from ledger.runrecord import Gpu, RunRecord, Status, replace
from ledger.storage import staging
from ledger.storage.git import Repo
from ledger.timefmt import iso, parse_iso


def recover(start: Path, say: Say, follow: bool = False, ask_ray: bool = True) -> list[str]:
    """Commit every staged run whose ledger process is gone: with state `lost`, or, for a run
    that submitted Ray jobs, as Ray says they ended (`follow`: wait for a job still running;
    not `ask_ray`: never ask, record it as lost)."""
    repo = Repo(start)
    cfg = load_config(repo.root, repo.common_dir)
    done: list[str] = []
    for staged in staging.orphans(repo.root):
        try:
            _recover_one(repo, cfg, staged, say, done, _Asking(follow, ask_ray))
        except OSError as exc:  # a full disk, a read-only folder: the run stays staged, whole
            raise LedgerError(
                f"could not recover run {staged.id}: {exc.strerror or exc}"
                f"{' (' + exc.filename + ')' if isinstance(exc.filename, str) else ''}",
                "the run stays staged; free space (or make the repository writable) and run `ledger recover` again",
            ) from exc
    return done


class _Asking(msgspec.Struct, frozen=True):
    """Whether `recover` asks Ray about a run's jobs, and waits for one still running."""

    follow: bool = False
    ask_ray: bool = True


def _recover_one(repo: Repo, cfg: Config, staged: staging.Staged, say: Say, done: list[str], asking: _Asking) -> None:
    """Commit one staged run whose ledger is gone (appended to `done`), unless another recover
    has it or its Ray job runs on."""
    if not staged.claim():
        return
    if staged.release_job():
        say(f"ledger: run {staged.id}: its job was still there (maybe paused); resumed and sent SIGTERM")
    code = staged.load_code()
    m = staged.read_json("manifest.json")
    if code is None or m is None:
        _drop_unrecorded(repo, staged, say)
        return
    record = RunRecord.partial(m)  # ledger's own staged JSON, of this or an older version
    ray = _ray_answer(staged, record, asking, say)
    if ray.stays:
        return
    # the job's output is the best clock of when it last did anything; read it before the
    # split below rewrites the logs (and their mtimes)
    last = _last_sign_of_life(staged)
    secrets = load_secrets(staged.dir)  # exactly the values a normal finish scrubs
    stop_worker(staged.dir)  # a log worker the dead ledger left; its work is redone from the raw file
    logs = _redone_logs(staged, cfg, secrets)
    record, status, warnings = _recovered_end(record, ray, parse_iso(record.started) or last, last)
    # after the status above: a truncation is said in it too, as for a run
    notes = truncation_noted(staged.run_dir, logs.truncated, say) if logs is not None else []
    if notes:
        warnings.extend(notes)
        status = replace(status, warnings=notes)
    record = _with_heat_summary(replace(record, status=status, warnings=warnings), staged)
    done.append(finish(repo, cfg, staged, record, code, logs, say, secrets=secrets))


def _last_sign_of_life(staged: staging.Staged) -> float:
    """When the run last did anything: the newest mtime of its staged manifest, raw output and heat log."""
    return max(p.stat().st_mtime for p in (staged.dir / "manifest.json", staged.raw_output, staged.run_dir / "heat.log") if p.exists())


def _with_heat_summary(record: RunRecord, staged: staging.Staged) -> RunRecord:
    """`gpu`, rebuilt from heat.log when the dead ledger never wrote it."""
    if record.gpu is not None or not (staged.run_dir / "heat.log").exists():
        return record

    return replace(record, gpu=Gpu.from_dict(summary_from_log(staged.run_dir / "heat.log")))


def _drop_unrecorded(repo: Repo, staged: staging.Staged, say: Say) -> None:
    """A staged run with no record to commit: the files its job wrote kept, the folder removed."""
    kept = keep_job_files(repo.root, staged)
    if kept is None:
        say(f"ledger: run {staged.id}: staged before its record was written; it held no file of the job; removed ledger's staging folder")
    else:
        count, dest = kept
        say(
            f"ledger: run {staged.id}: no record to commit (staged before its record was written, or written "
            f"to after it was committed); moved the {count} file(s) the job wrote to {dest}; "
            "removed ledger's staging folder"
        )
    staged.remove()


def _ray_answer(staged: staging.Staged, record: RunRecord, asking: _Asking, say: Say) -> RayAnswer:
    """What Ray says of a run still `running` in its record (nothing, not asked); what the job
    printed after ledger died, from the Job API, appended to its output."""
    if not asking.ask_ray or record.status.state not in (None, "running"):
        return RayAnswer(None, False)
    ray = ask_ray(staged, asking.follow, say)
    if not ray.stays and ray.record is not None:
        append_missing_logs(staged, ray.record, None)
    return ray


def _redone_logs(staged: staging.Staged, cfg: Config, secrets: set[str]) -> StreamResult | None:
    """The log work redone from the raw output (None: the logs were split before ledger died)."""
    raw = staged.raw_output
    if not raw.exists():
        return None
    if was_punched(staged.dir):  # a split on a full disk had freed its start
        logs = from_split_logs(staged.run_dir, "by ledger recover, from the logs split so far")
    else:
        logs = process_raw(raw, staged.run_dir, list(cfg.engine_patterns), Redactor(secrets, cfg.secrets.names))
        logs.where = "by ledger recover, from the raw output"
    retire_raw(staged, secrets, logs)
    return logs


def _recovered_end(record: RunRecord, ray: RayAnswer, started: float, last: float) -> tuple[RunRecord, Status, list[str]]:
    """(the record with `finished`, its `status`, its `warnings`): as saved when the job ended
    (only the commit failed), as Ray says the job ended, else `lost` at the job's last sign of life."""
    if record.status.state not in (None, "running"):
        return (
            record,
            record.status,
            [*record.warnings, "ledger could not commit the record when the job ended; committed by `ledger recover`"],
        )
    if ray.ended is not None:
        status, finished = ended_status(ray.ended, started, last)
        warnings = [*record.warnings, "ledger exited before the job ended; `ledger recover` read the Ray job's end from Ray"]
        return replace(record, finished=finished), status, warnings
    status = Status(state="lost", duration_s=round(max(0.0, last - started), 3))
    return (
        replace(record, finished=iso(last)),
        status,
        [*record.warnings, "ledger exited before the job ended; recovered by `ledger recover`"],
    )


def keep_job_files(root: Path, staged: staging.Staged) -> tuple[int, Path] | None:
    """Move everything under the staged data folder to `.ledger/untracked/<id>/` (merged into
    what is there; a name already taken gets a `.N` suffix). None when there was nothing."""
    data = staged.data_dir
    if not data.is_dir():
        return None
    files = [p for p in data.rglob("*") if p.is_file() or p.is_symlink()]
    if not files:
        return None
    dest_root = staging.ledger_dir(root) / "untracked" / staged.id
    for source in files:
        dest = dest_root / source.relative_to(data)
        dest.parent.mkdir(parents=True, exist_ok=True)
        n = 1
        while dest.exists() or dest.is_symlink():
            dest = dest.with_name(f"{source.name}.{n}")
            n += 1
        shutil.move(str(source), dest)
    return len(files), dest_root
