"""`ledger run [OPTIONS] -- COMMAND`: run the job under ledger and record it as one commit."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ledger.record.run import RunRequest, Say, record_run


def run_job(
    cwd: Path,
    command: Sequence[str],
    *,
    name: str | None,
    note: str | None,
    image: str | None,
    heat_guard: bool,
    data_paths: Sequence[str],
    debug_data: bool | None,
    say: Say,
    terminal_fd: int | None,
) -> int:
    """Record COMMAND (a leading ``--`` dropped) as a run; returns the job's exit code."""
    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    req = RunRequest(
        argv=argv, cwd=cwd, name=name, note=note, image=image, heat_guard=heat_guard, data_paths=list(data_paths), debug_data=debug_data
    )
    return record_run(req, say, terminal_fd).exit_code
