"""The job has ended: what it left, gathered into the record (`ended_record`).

The rest of its output (a submitted Ray job followed to its end), the log worker's results, the
capture's truncation notes, the heat guard's summary, the host's facts read while it ran, how the
job ended (`status`), and the counts and hashes taken while it ran. The record is staged again as
manifest.json, for `ledger recover` should the commit fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from ledger.capture.runner import JobResult
from ledger.record import jobsetup
from ledger.record.job import JobEnd
from ledger.record.jobsetup import Say
from ledger.record.prepare import Prepared
from ledger.redact.scanner import Redactor
from ledger.runrecord import Code, Gpu, RunRecord, Status, replace
from ledger.timefmt import iso, utc_now
from ledger.understand import shim

if TYPE_CHECKING:
    from ledger.record.streamed import StreamResult


class Ended(msgspec.Struct, frozen=True):
    """The record as the job ended, and the log work done on its output."""

    record: RunRecord
    logs: StreamResult


def ended_record(prepared: Prepared, ended: JobEnd, say: Say) -> Ended:
    """The job has ended: gather what it left (the log results, how it ended) into the record."""
    staged, cfg, record = prepared.staged, prepared.cfg, ended.record
    warnings = list(record.warnings)
    if ended.capture.join(timeout=10):
        ray_end = jobsetup.follow_submitted(staged, ended.terminal_fd, say, ended.result, cfg.job.stop_grace_s)
    else:  # a child of the job still holds the pipe open: record what arrived so far
        warnings.append("the job's output pipe was still open 10 s after it exited; later output is not recorded")
        ray_end = None
    from ledger.record.streamed import retire_raw

    command = jobsetup.note_framework(record.command, shim.read_log(staged.dir / shim.LOG_NAME))
    logs = ended.follower.finish(Redactor(prepared.secrets, cfg.secrets.names))
    retire_raw(staged, prepared.secrets, logs)
    notes = truncation_noted(staged.run_dir, ended.capture.truncation_notes() + logs.truncated, say)
    warnings.extend(notes)
    gpu = Gpu.from_dict(ended.monitor.stop_summary())
    image = prepared.host_facts.image(record.image)
    finished = iso(utc_now())
    status = _ended_status(record.status, notes, ended.result, ray_end, warnings, say)
    if status.state == "failed" and (hint := jobsetup.refused_debug_flags(staged.run_dir, command, status, say)):
        warnings.append(hint)
    code = _code_at_end(prepared, ended, record.code, warnings)
    record = replace(record, command=command, code=code, image=image, gpu=gpu, status=status, finished=finished, warnings=warnings)
    staged.write_json("manifest.json", record.to_dict())  # the true ending, for `recover` if the commit fails
    return Ended(record, logs)


def _ended_status(status: Status, notes: list[str], result: JobResult, ray_end: object | None, warnings: list[str], say: Say) -> Status:
    """The `status` section of the job's end: the capture errors (`notes`, said before) kept, a
    stop that went on to SIGKILL, a followed Ray job's end; what they add to `warnings` added."""
    if notes:
        status = replace(status, warnings=notes)
    ended = Status(state=result.state, exit_code=result.exit_code, signal=result.signal_name, duration_s=round(result.duration_s, 3))
    if status.warnings:
        ended = replace(ended, warnings=list(status.warnings))
    if result.escalated:
        ended = replace(ended, escalated=result.escalated)
        warnings.append(result.escalated)
    if ray_end is None:
        return ended
    ended, ray_warnings = jobsetup.ray_status(ended, ray_end, say)
    warnings.extend(ray_warnings)
    return ended


def _code_at_end(prepared: Prepared, ended: JobEnd, code: Code, warnings: list[str]) -> Code:
    """`code` with what was counted and hashed while the job ran: the untracked files, the big
    files' blob ids (a big file that could not be hashed is a warning)."""
    code = replace(code, untracked_left_out=ended.untracked.result())
    if not prepared.code.large:
        return code
    large, unhashed = ended.big.result()
    warnings.extend(unhashed)
    return replace(code, large_files=large)


def exit_code(record: RunRecord, result: JobResult) -> int:
    """The exit code `ledger run` ends with: the recorded one (a Ray job's), else the job's."""
    return record.status.exit_code if record.status.exit_code is not None else result.exit_code


def truncation_noted(run_dir: Path, notes: list[str], say: Say) -> list[str]:
    """A capture error never goes unsaid: said, and the last line of trainer.log; returned for the
    manifest's `warnings` and `status.warnings`."""
    if not notes:
        return []
    for note in notes:
        say(f"ledger: {note}")
    try:
        with open(run_dir / "trainer.log", "ab") as f:
            f.write(("\n[ledger] " + " | ".join(notes) + "\n").encode())
    except OSError:
        pass  # still no space: the manifest says it
    return list(notes)
