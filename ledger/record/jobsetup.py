"""What `ledger run` sets up around the job: how the debug-data flags reach the trainer, the
variables and PATH wrappers ledger gives the job, and following a job submitted with `ray job submit --no-wait` (issue 9)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from ledger.config import Config
from ledger.errors import LedgerError
from ledger.storage import staging
from ledger.storage.git import Repo
from ledger.understand import launcher

Say = Callable[[str], None]
RAW_OUTPUT = staging.RAW_OUTPUT  # the job's combined output while it runs (split into the logs at the end)


def forwards_args(argv: list[str], launcher_text: str | None, cfg: Config) -> bool:
    """Whether flags appended to `argv` reach the training command.

    True for a direct training command, and for a launcher whose script passes its own
    arguments on (`"$@"` in bash, `sys.argv` in Python); never for other commands.
    """
    if launcher.training_command_from_argv(argv, list(cfg.training_patterns)) is not None:
        return True
    if launcher_text is not None:
        from ledger.understand.launcher import without_comments

        code = without_comments(launcher_text)  # a "$@" in a comment forwards nothing
        return '"$@"' in code or "${@}" in code or "sys.argv" in code
    return False


def debug_data_route(
    argv: list[str], launcher_text: str | None, cfg: Config, staged: staging.Staged, m: dict[str, Any], say: Say
) -> tuple[list[str], list[tuple[str, str]]]:
    """How the debug-data flags reach the trainer: appended to the argv when it is the training
    command or a launcher that forwards "$@"; else added by the PATH wrappers (`shim`); said on
    one line, with the fix, when neither can reach it (a trainer inside `docker run`)."""
    from ledger.capture.image import detect_image_in_argv
    from ledger.data.outputs import debug_flag_values, inject_debug_flags
    from ledger.understand.launcher import without_comments

    if forwards_args(argv, launcher_text, cfg):
        job_argv, added = inject_debug_flags(argv, str(staged.data_dir), launcher_text)
        if added:
            m["command"]["added_args"] = added
            m["command"]["debug_data"] = {"via": "argv", "added": added}
            say(f"ledger: keeping debug data for replay: added {' '.join(added)}")
        return job_argv, []
    if detect_image_in_argv(argv) or (launcher_text and "docker run" in without_comments(launcher_text)):
        m["command"]["debug_data"] = {"via": None, "added": []}
        say(
            "ledger: debug data cannot reach a trainer inside a container (ledger's wrappers work on this PATH only); "
            "add --save-debug-rollout-data DIR/{rollout_id}.pt --save-debug-event-data DIR to the training command, "
            "or run `ledger run` inside the container"
        )
        return argv, []
    m["command"]["debug_data"] = {"via": "wrapper", "added": []}
    return argv, debug_flag_values(str(staged.data_dir))


def job_env(
    cfg: Config, env: dict[str, str], staged: staging.Staged, m: dict[str, Any], wrapper_flags: list[tuple[str, str]]
) -> dict[str, str]:
    """The variables ledger sets for the job, recorded in `command.ledger_env`."""
    from ledger.understand import shim

    ledger_env = {
        "LEDGER_RUN_ID": m["id"],  # so a launcher can name outputs after the run
        "LEDGER_DATA_DIR": str(staged.data_dir),
    }  # bulky outputs here are tracked with DVC
    ledger_env.update({k: v for k, v in cfg.job_env.items() if k not in env})
    job_vars = {k: v for k, v in cfg.job_env.items() if k not in env}
    wrappers = shim.install(
        staged.dir / "bin", staged.dir / shim.LOG_NAME, list(cfg.training_patterns), wrapper_flags, list(cfg.env_patterns), env, job_vars
    )
    recorded = {k: v for k, v in ledger_env.items() if k not in ("LEDGER_DATA_DIR",)}
    recorded["PATH"] = "<run>/bin (ledger's python3/ray wrappers) + the caller's PATH"
    m["command"]["ledger_env"] = recorded
    return {**ledger_env, **wrappers}


def follow_submitted(staged: staging.Staged, m: dict[str, Any], terminal_fd: int | None, say: Say) -> Any:
    """After the launcher ended: follow the last job it submitted with `--no-wait` (issue 9, item 8),
    its logs appended to the run's raw output. None when nothing was submitted that way."""
    from ledger.understand import shim

    pending = [r for r in shim.read_log(staged.dir / shim.LOG_NAME) if r.via == "ray" and r.no_wait and r.submission_id]
    if not pending:
        return None
    record = pending[-1]
    from ledger.capture.rayjob import follow

    say(f"ledger: following Ray job {record.submission_id} to its end (Ctrl-C stops it)")
    with open(staged.dir / RAW_OUTPUT, "ab") as raw:

        def write(data: bytes) -> None:
            raw.write(data)
            if terminal_fd is not None:
                try:
                    os.write(terminal_fd, data)
                except OSError:
                    pass

        return follow(record.address, str(record.submission_id), write, say=say)


def ray_status(m: dict[str, Any], end: Any, say: Say) -> None:
    """The run's status from the followed Ray job's own state."""
    m["status"]["ray_job"] = {"submission_id": end.submission_id, "address": end.address, "status": end.status, "message": end.message}
    if end.status is None:
        m["status"]["state"] = "unknown"
        m["warnings"].append(f"{end.error}; the job's end is unknown (`ray job status {end.submission_id}`)")
        say(f"ledger: {end.error}; recorded what is known")
        return
    m["status"]["exit_code"] = end.exit_code
    m["status"]["state"] = {"SUCCEEDED": "finished", "FAILED": "failed", "STOPPED": "killed"}[end.status]
    m["status"]["duration_s"] = round((m["status"]["duration_s"] or 0.0) + end.followed_s, 3)
    if end.stopped_by_ledger:
        m["status"]["signal"] = "SIGINT"


def check_writable(repo: Repo, branch: str) -> None:
    """Every place the record is written, tried before the job starts (issue 24): the object
    store, the folder of the branch's ref (where git takes its lock) and `.ledger/`. A read-only
    mount, an immutable folder or missing permissions is one line and exit 125, not an error after
    the job ran. Each is tried by creating and removing a file: `os.access` says yes to root."""
    ref_dir = (repo.common_dir / "refs" / "heads" / branch).parent
    while not ref_dir.exists() and ref_dir != repo.common_dir:
        ref_dir = ref_dir.parent  # created by git on the first run: its parent must take it
    try:
        state = staging.ledger_dir(repo.root)
    except OSError as exc:
        state = repo.root / staging.LEDGER_DIR
        _unwritable(".ledger/ (ledger's staging area)", state, exc)
    for what, folder in (
        ("the object store", repo.common_dir / "objects"),
        (f"the folder of branch '{branch}'s ref", ref_dir),
        (".ledger/ (ledger's staging area)", state),
    ):
        try:
            fd, probe = tempfile.mkstemp(prefix=".ledger-probe-", dir=folder)
        except OSError as exc:
            _unwritable(what, folder, exc)
        os.close(fd)
        os.unlink(probe)


def _unwritable(what: str, folder: Path, exc: OSError) -> NoReturn:
    raise LedgerError(
        f"{what} {folder} is not writable ({exc.strerror or exc}): the run could not be recorded",
        "make it writable (a read-only mount, `chattr +i` or permissions); nothing ran",
    )
