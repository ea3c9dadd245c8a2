"""`ledger recover` of a run that submitted Ray jobs: Ray says how they ended.

ledger's `ray` wrapper writes every submission it makes (its id, `ledger-<run id>-<n>` or the
launcher's own `--submission-id`, and the address) to the staged shim log before `ray job submit`
runs, so a ledger that died (SIGKILL, OOM, reboot) left them in the staging folder. `recover`
asks the Job API at that address about each:

- a job still PENDING or RUNNING: the run stays staged (the job may still write rollout files
  into its data folder), marked in `ray.json` so `ledger list` shows it running on Ray;
  `ledger recover --follow` waits for its end instead;
- every job ended: the run is recorded with the last job's state, its driver's exit code, a
  duration until Ray's end time, and what the job printed after ledger died (from the Job API);
- Ray cannot be asked: said in one line, the run stays staged (`ledger recover --no-ray`
  records it as lost without asking).

A job Ray does not know (the launcher died before it submitted, a restarted cluster) is left out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from ledger.runrecord import Status, replace
from ledger.storage import staging
from ledger.timefmt import iso, utc_now
from ledger.understand import shim

if TYPE_CHECKING:
    from ledger.capture.rayjob import JobState

Say = Callable[[str], None]
RAY_MARK = "ray.json"  # the jobs a staged run still has running on Ray, as `recover` last saw them


class RayAnswer(msgspec.Struct, frozen=True):
    """What Ray said of a staged run's jobs: the last one's end once every job ended, or that
    the run stays staged (a job runs on, or Ray could not be asked)."""

    ended: JobState | None
    stays: bool
    record: shim.ShimRecord | None = None  # the submission of `ended`


def submitted(staged: staging.Staged) -> list[shim.ShimRecord]:
    """The `ray job submit` calls the run's wrappers made, in order (each with its id)."""
    return [r for r in shim.read_log(staged.dir / shim.LOG_NAME) if r.via == "ray" and r.submission_id]


def ask_ray(staged: staging.Staged, follow: bool, say: Say) -> RayAnswer:
    """How the jobs a staged run submitted stand (module doc); with `follow`, a job still
    running is waited for (Ctrl-C stops the wait, never the job)."""
    records = submitted(staged)
    if not records:
        return RayAnswer(None, False)
    from ledger.capture.rayjob import Missing, job_state, wait_ended  # only for a run that submitted to Ray

    known: list[tuple[shim.ShimRecord, JobState]] = []
    for record in records:
        state = job_state(record.address, str(record.submission_id))
        if follow and not isinstance(state, Missing) and state.error is None and not state.ended:
            say(
                f"ledger: run {staged.id}: following Ray job {state.submission_id} at {state.address} to its end "
                "(Ctrl-C stops following; the job runs on)"
            )
            state = wait_ended(record.address, str(record.submission_id))
        if isinstance(state, Missing):
            continue
        if state.error is not None:
            say(
                f"ledger: run {staged.id}: {state.error}; the run stays staged (`ledger recover` again once Ray answers, "
                "or `ledger recover --no-ray` records it as lost)"
            )
            return RayAnswer(None, True)
        known.append((record, state))
    return _answer(staged, known, say)


def _answer(staged: staging.Staged, known: list[tuple[shim.ShimRecord, JobState]], say: Say) -> RayAnswer:
    """What Ray's answers for the run's jobs (`known`, in submission order) make of it: staged
    while one runs on (marked, and said), else the last job's end (none: no job Ray knows)."""
    running = [state for _, state in known if not state.ended]
    if running:
        _mark_running(staged, running)
        for state in running:
            say(
                f"ledger: run {staged.id}: Ray job {state.submission_id} is still {state.status} at {state.address}; "
                "the run stays staged (`ledger recover --follow` follows it to its end)"
            )
        return RayAnswer(None, True)
    if not known:
        return RayAnswer(None, False)
    record, state = known[-1]
    return RayAnswer(state, False, record)


def _mark_running(staged: staging.Staged, running: list[JobState]) -> None:
    jobs = [{"submission_id": s.submission_id, "address": s.address, "status": s.status} for s in running]
    staged.write_json(RAY_MARK, {"jobs": jobs, "checked": iso(utc_now())})


def running_on_ray(staged: staging.Staged) -> list[dict[str, object]]:
    """The jobs `recover` last saw running on Ray for this staged run (empty: none, or never asked)."""
    jobs = (staged.read_json(RAY_MARK) or {}).get("jobs")
    return [j for j in jobs if isinstance(j, dict)] if isinstance(jobs, list) else []


def ended_status(state: JobState, started: float, fallback_end: float) -> tuple[Status, str]:
    """(the `status` section, `finished`) of a run whose Ray job ended after its ledger died:
    Ray's state, the driver's exit code, the time from the run's start to the job's end."""
    from ledger.capture.rayjob import RUN_STATE

    end = state.end_s if state.end_s is not None else fallback_end
    ray_job = {"submission_id": state.submission_id, "address": state.address, "status": state.status, "message": state.message}
    status = Status(
        state=RUN_STATE.get(str(state.status), "unknown"), exit_code=state.exit_code, duration_s=round(max(0.0, end - started), 3)
    )
    return replace(status, ray_job=ray_job), str(iso(end))
