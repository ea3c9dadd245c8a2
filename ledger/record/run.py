"""Recording a run, as a pipeline of stages: the job's record from before it starts to its commit.

`record_run` is what `ledger run` (and `ledger replay`) call. Its stages, a module each:

1. before the job (`ledger.record.prepare`): the repository checked, the secrets known, the code
   snapshot, the `command`, `code` and `image` sections; staged as manifest.json;
2. the job (`ledger.record.job`), with the copy of its output, the log worker, the heat guard and
   the data hasher beside it;
3. the logs and how the job ended (`ledger.record.jobend`);
4. `finish`: the derived facts (`ledger.record.derived`), then the scrub and the commit
   (`ledger.record.commit`); `ledger recover` runs `finish` on a staged run too.

Everything after the job starts is written so that a failure in one fact (metrics, data tracking,
image probe) lands in the manifest's `warnings` instead of losing the run; a crash of ledger
itself leaves the staged folder for `ledger recover`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import msgspec

from ledger.capture.runner import SignalGuard
from ledger.config import Config
from ledger.errors import LedgerError, NotRecorded
from ledger.record.commit import big_logs, committed, scrubbed_logs, with_trackers
from ledger.record.derived import derived_facts
from ledger.record.job import run_job
from ledger.record.jobend import ended_record, exit_code, truncation_noted
from ledger.record.jobsetup import Say
from ledger.record.prepare import RunRequest, before_the_job, prepare
from ledger.redact.runscrub import scrub_record
from ledger.runrecord import RunRecord
from ledger.storage import staging
from ledger.storage.git import CodeSnapshot, Repo

if TYPE_CHECKING:
    from ledger.record.streamed import StreamResult

__all__ = ["RunOutcome", "RunRequest", "Say", "finish", "not_recorded", "record_run", "truncation_noted"]


class RunOutcome(msgspec.Struct, frozen=True):
    run_id: str
    exit_code: int
    state: str
    commit: str | None


def record_run(req: RunRequest, say: Say, terminal_fd: int | None) -> RunOutcome:
    """Run the job under ledger and record it as one commit. Returns how it ended.

    The stages: `prepare` (the facts before the job), the job (`run_job`), `ended_record` (the
    log results and how it ended), then `finish` (the derived facts, the scrub, the commit)."""
    with SignalGuard(say) as guard:
        with before_the_job():
            prepared = prepare(req, say)
        ended = run_job(req, prepared, guard, terminal_fd, say)
        try:
            end = ended_record(prepared, ended, say)
            record = end.record
            commit = finish(
                prepared.repo, prepared.cfg, prepared.staged, record, prepared.code, end.logs, say, prepared.secrets, ended.environ
            )
            return RunOutcome(record.id, exit_code(record, ended.result), record.status.state or "unknown", commit)
        except BaseException as exc:
            ended.follower.abandon()  # `ledger recover` redoes the log work from the raw file
            if isinstance(exc, Exception) and not os.environ.get("LEDGER_DEBUG"):
                raise not_recorded(prepared.record.id, exc) from exc
            raise


def not_recorded(run_id: str, exc: Exception) -> NotRecorded:
    """Any failure after the job ended: exit 75, never the job's own 1 (the run stays staged)."""
    if isinstance(exc, LedgerError):
        return NotRecorded(exc.message, exc.hint)
    return NotRecorded(
        f"could not record run {run_id}: internal error: {type(exc).__name__}: {exc}",
        "the run is still staged; `ledger recover` commits it (LEDGER_DEBUG=1 shows the traceback)",
    )


def finish(
    repo: Repo,
    cfg: Config,
    staged: staging.Staged,
    record: RunRecord,
    code: CodeSnapshot,
    logs: StreamResult | None,
    say: Say,
    secrets: set[str] | None = None,
    environ: dict[str, str] | None = None,
) -> str:
    """The record from the job's end to its commit, in stages that each take the record and
    return it: the derived facts (`derived_facts`), the logs' last scrub (`scrubbed_logs`), big
    logs to DVC (`big_logs`), the tracker links (`with_trackers`), the manifest's scrub
    (`scrub_record`), then the commit (`committed`). Returns the commit id.

    `logs` is the log work done on the job's output (`ledger.record.streamed`); None reads it
    back from the split logs already in the run folder."""
    run_dir = staged.run_dir
    if logs is None:
        from ledger.record.streamed import logs_result

        logs = logs_result(run_dir)
    known = set(secrets or ())
    record = derived_facts(repo, cfg, staged, record, logs, say, known, environ)
    # the same scrub for `ledger run` and `ledger recover`, before anything reaches git or DVC
    record = scrubbed_logs(record, run_dir, known, logs, cfg)
    record = big_logs(record, repo, cfg, staged, logs, say)
    record = with_trackers(record, run_dir)
    record = scrub_record(record, known, logs.found, cfg.secrets.names)
    return committed(record, repo, cfg, staged, code, logs, say)
