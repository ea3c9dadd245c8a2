"""The job: started with everything that watches it while it runs, and waited for (`run_job`).

Beside the job: the copy of its output (`OutputCapture`), the log worker that splits, redacts and
parses that output (`ledger.record.streamed`), the heat guard, the hasher of its debug data, the
count of untracked files and the hashes of the big ones; and, on a thread, the imports the record
needs after the job (`END_MODULES`), so they are paid while it runs.
"""

from __future__ import annotations

import importlib
import os
import threading
from typing import TYPE_CHECKING

import msgspec

from ledger.capture.runner import Job, JobResult, SignalGuard
from ledger.capture.stream import OutputCapture
from ledger.fsutil import inode_clock
from ledger.record import jobsetup
from ledger.record.jobsetup import Say
from ledger.record.prepare import Prepared, RunRequest, before_the_job
from ledger.runrecord import RunRecord, replace, warm
from ledger.storage.bigfiles import BlobHashes
from ledger.storage.gitcmd import UntrackedCount

if TYPE_CHECKING:
    from ledger.heat.setup import RunMonitor
    from ledger.record.streamed import Follower

# Modules only the end of a run needs: imported on a thread while the job runs, not before it starts.
END_MODULES = ("ledger.record.facts", "ledger.yamlio", "ledger.storage.summary", "ledger.metrics.jsonl")


class JobEnd(msgspec.Struct, frozen=True):
    """What the job stage hands the record: how the job ended and the workers that watched it."""

    record: RunRecord  # the manifest as the job started (`command.ledger_env` set)
    result: JobResult
    capture: OutputCapture
    follower: Follower
    monitor: RunMonitor
    untracked: UntrackedCount  # counted by git while the job ran
    big: BlobHashes  # the blob ids of files too big to read before the job, hashed while it ran
    environ: dict[str, str]  # ledger's environment (the settings' `env.*` when no wrapper saw the trainer's)
    terminal_fd: int | None


def run_job(req: RunRequest, prepared: Prepared, guard: SignalGuard, terminal_fd: int | None, say: Say) -> JobEnd:
    """Start the job with its output copy, log worker, heat guard and data hasher; wait for it."""
    repo, cfg, staged = prepared.repo, prepared.cfg, prepared.staged
    environ = dict(req.env if req.env is not None else os.environ)
    env = dict(environ)
    job_vars, ledger_env = jobsetup.job_env(cfg, env, staged, prepared.record.id, prepared.wrapper_flags)
    env.update(job_vars)
    record = replace(prepared.record, command=replace(prepared.record.command, ledger_env=ledger_env))
    job_start = inode_clock(staged.dir)  # the untracked count's rule compares ctimes with it
    try:
        with before_the_job():
            job = Job(prepared.job_argv, req.cwd, env, cfg.job.stop_grace_s)
    except BaseException:
        staged.remove()
        raise
    untracked = UntrackedCount(repo.root, job_start)  # while the job runs, not before it
    big = BlobHashes(repo.root, prepared.code.large)  # likewise: never read before the job starts
    guard.attach(job, lambda: None)
    threading.Thread(target=_import_end_modules, name="ledger-imports", daemon=True).start()
    staged.set_owner(job.pgid)
    capture = OutputCapture(job.output_fd, terminal_fd, staged.raw_output)
    capture.start()
    from ledger.record.streamed import Follower

    follower = Follower(
        staged,
        list(cfg.engine_patterns),
        list(cfg.secrets.names),
        lambda: capture.bytes_in,
        preload=(repo.root, int(cfg.logs.git_max_mb * (1 << 20))),
    )
    follower.start()  # split, redaction and metrics while the job runs, off the copy's path
    from ledger.heat.setup import start_monitor

    monitor = start_monitor(
        cfg.heat,
        req.heat_guard,
        staged.run_dir / "heat.log",
        job.signal_group,
        say,
        repo.root,
        job_argv=prepared.job_argv,
        env=env,
        launcher_text=prepared.launcher_text,
        pgid=job.pgid,
        submitted=jobsetup.last_submission(staged),
    )
    guard.before_forward = monitor.resume_if_paused
    from ledger.data.prehash import PreHasher

    hasher = PreHasher(repo.root, staged.data_dir)  # debug data is hashed as each file is closed
    hasher.start()
    try:
        result = job.wait()
    finally:
        monitor.resume_if_paused()  # never leave the job stopped, whatever happens to ledger
        hasher.stop()
    return JobEnd(record, result, capture, follower, monitor, untracked, big, environ, terminal_fd)


def _import_end_modules() -> None:
    """Pay the imports the record needs while the job runs (a failure shows up, later, where used)."""
    for name in END_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the import is retried, and reported, where the module is used
            pass

    warm()  # the record's types, resolved once: its first decode after the job is then ~0.1 ms
    try:
        from ledger.yamlio import warm_dumper

        warm_dumper()  # ruamel and its emitter loaded: the manifest's dump after the job is its own cost alone
    except Exception:  # noqa: BLE001 - the dump after the job loads it, and reports any failure, itself
        pass
