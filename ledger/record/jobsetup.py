"""What `ledger run` sets up around the job: how the debug-data flags reach the trainer, the
variables and PATH wrappers ledger gives the job, and following a job submitted with `ray job submit --no-wait`."""

from __future__ import annotations

import os
import re
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn, TypedDict

import msgspec

from ledger.capture.image import detect_image_in_argv
from ledger.config import Config
from ledger.data.outputs import debug_flag_values, inject_debug_flags
from ledger.errors import LedgerError
from ledger.runrecord import Command, Image, Status, replace
from ledger.storage import staging
from ledger.storage.git import Repo
from ledger.understand import framework, launcher, shim
from ledger.understand.launcher import without_comments

if TYPE_CHECKING:
    from ledger.heat.cluster_target import Submitted

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
        code = without_comments(launcher_text)  # a "$@" in a comment forwards nothing
        return '"$@"' in code or "${@}" in code or "sys.argv" in code
    return False


class DebugData(TypedDict, total=False):
    """`command.debug_data`: how the debug-data flags reach the trainer."""

    via: str | None  # "argv", "wrapper", or None: they cannot
    added: list[str]  # the flags ledger added
    framework: str  # the trainer's framework, on the argv route (`framework.detect`)
    recognised_by: str  # how it was recognised


class DebugRoute(msgspec.Struct, frozen=True):
    """How the debug-data flags reach the trainer (`debug_data_route`)."""

    job_argv: list[str]  # the argv the job runs (the flags appended, on the argv route)
    debug_data: DebugData  # `command.debug_data`
    added_args: list[str] = msgspec.field(default_factory=list)  # `command.added_args` (empty: unchanged)
    wrapper_flags: list[tuple[str, str]] = msgspec.field(default_factory=list)  # for the PATH wrappers to add

    def command(self, command: Command) -> Command:
        """The `command` section with the route recorded."""
        command = replace(command, debug_data=self.debug_data)
        return replace(command, added_args=self.added_args) if self.added_args else command


def debug_data_route(
    argv: list[str], launcher_text: str | None, cfg: Config, staged: staging.Staged, cwd: str, image: Image, say: Say
) -> DebugRoute:
    """How the debug-data flags reach the trainer: appended to the argv when it is the training
    command or a launcher that forwards "$@"; else added by the PATH wrappers (`shim`); said on
    one line, with the fix, when neither can reach it (a trainer inside `docker run`)."""
    script = _entry_script(argv, launcher_text, cfg, Path(cwd))
    if forwards_args(argv, launcher_text, cfg) and script is not None:
        name, how, allowed = framework.detect(script, cwd, cfg.capture.debug_framework, _miles_image(image))
        if not allowed:
            say(
                f"ledger: no debug data added for replay ({how}); if it is Miles or slime, set "
                "`capture.debug_framework: miles` (or slime) in .ledger.yaml"
            )
            return DebugRoute(argv, DebugData(via="argv", added=[], framework=name, recognised_by=how))
        job_argv, added = inject_debug_flags(argv, str(staged.data_dir), launcher_text, allowed)
        if added:
            say(f"ledger: keeping debug data for replay: added {' '.join(added)} ({name}: {how})")
        return DebugRoute(job_argv, DebugData(via="argv", added=added, framework=name, recognised_by=how), list(added))
    if detect_image_in_argv(argv) or (launcher_text and "docker run" in without_comments(launcher_text)):
        say(
            "ledger: debug data cannot reach a trainer inside a container (ledger's wrappers work on this PATH only); "
            "add --save-debug-rollout-data DIR/{rollout_id}.pt --save-debug-event-data DIR to the training command, "
            "or run `ledger run` inside the container"
        )
        return DebugRoute(argv, DebugData(via=None, added=[]))
    return DebugRoute(argv, DebugData(via="wrapper", added=[]), wrapper_flags=debug_flag_values(str(staged.data_dir)))


def _miles_image(image: Image) -> bool:
    return bool(image.miles_commit or (image.get("checkouts") or {}).get("miles"))


def _entry_script(argv: list[str], launcher_text: str | None, cfg: Config, cwd: Path) -> str | None:
    """The training script flags appended to `argv` reach: the command's own, or the one a
    forwarding launcher names (a word of its code that is a file matching the training
    patterns); None when it cannot be told (the PATH wrappers then decide, seeing the real one)."""
    found = launcher.training_command_from_argv(argv, list(cfg.training_patterns))
    if found is not None:
        return found.script
    if launcher_text is None:
        return None

    for word in re.findall(r"[\w./${}-]+\.py\b", without_comments(launcher_text)):
        if "$" in word or not any(re.search(p, word) for p in cfg.training_patterns):
            continue
        if (cwd / word).is_file():
            return str(word)
    return None


def note_framework(command: Command, records: list[Any]) -> Command:
    """`command.debug_data.framework` of a wrapper-route run: what the wrapper decided."""
    decided = [r for r in records if getattr(r, "framework", None)]
    debug = command.debug_data
    if decided and isinstance(debug, dict) and debug.get("via") == "wrapper":
        noted = {**debug, "framework": decided[-1].framework, "recognised_by": decided[-1].framework_how}
        return replace(command, debug_data={**noted, "added": list(decided[-1].added)})
    return command


def refused_debug_flags(run_dir: Path, command: Command, status: Status, say: Say) -> str | None:
    """A trainer that exited at once with `unrecognized arguments: --save-debug-...`: one line
    saying how to turn ledger's debug-data flags off; returned for the record's warnings."""
    if not (command.debug_data or {}).get("added") and not command.added_args:
        return None
    if (status.duration_s or 0.0) > 300:
        return None  # it trained for a while: not a refused flag at start
    try:
        with open(run_dir / "trainer.log", "rb") as f:
            f.seek(max(0, (run_dir / "trainer.log").stat().st_size - (1 << 16)))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    hint = framework.off_hint(tail)
    if hint:
        say(f"ledger: {hint}")
    return hint or None


def job_env(
    cfg: Config, env: dict[str, str], staged: staging.Staged, run_id: str, wrapper_flags: list[tuple[str, str]]
) -> tuple[dict[str, str], dict[str, str]]:
    """(the variables ledger sets for the job, what of them `command.ledger_env` records)."""
    ledger_env = {
        "LEDGER_RUN_ID": run_id,  # so a launcher can name outputs after the run
        "LEDGER_DATA_DIR": str(staged.data_dir),
    }  # bulky outputs here are tracked with DVC
    ledger_env.update({k: v for k, v in cfg.job_env.items() if k not in env})
    # a Ray job's driver and actors get the cluster's environment plus the runtime env, never the
    # submitter's: the `ray` wrapper merges all of these into the runtime env's env_vars
    wrappers = shim.install(
        staged.dir / "bin",
        staged.dir / shim.LOG_NAME,
        list(cfg.training_patterns),
        wrapper_flags,
        list(cfg.env_patterns),
        env,
        dict(ledger_env),
    )
    if cfg.capture.debug_framework:
        wrappers[shim.ENV_FRAMEWORK] = cfg.capture.debug_framework
    recorded = {k: v for k, v in ledger_env.items() if k not in ("LEDGER_DATA_DIR",)}
    recorded["PATH"] = "<run>/bin (ledger's python3/ray wrappers) + the caller's PATH"
    return {**ledger_env, **wrappers}, recorded


def last_submission(staged: staging.Staged) -> Callable[[], Submitted | None]:
    """The last `ray job submit` the job made, as ledger's `ray` wrapper recorded it (None until
    it made one): the cluster the heat sensor attaches to when only the launcher's text names one."""
    from ledger.heat.cluster_target import DEFAULT_DASHBOARD, Submitted

    def last() -> Submitted | None:
        records = [r for r in shim.read_log(staged.dir / shim.LOG_NAME) if r.via == "ray"]
        return Submitted(records[-1].address or DEFAULT_DASHBOARD, records[-1].submission_id) if records else None

    return last


def _stop_signal(result: Any) -> int | None:
    """The signal that stopped the run (forwarded, SIGKILL after the grace, or one it died of)."""
    if result.state != "killed":
        return None
    name = result.forwarded or result.signal_name or "SIGTERM"
    try:
        return int(signal.Signals[name])
    except KeyError:
        return int(signal.SIGTERM)


def follow_submitted(staged: staging.Staged, terminal_fd: int | None, say: Say, result: Any = None, stop_wait_s: float = 30.0) -> Any:
    """After the launcher ended: settle every job it submitted through the `ray` wrapper.

    The run was stopped (`result` killed): every job still running on the cluster is stopped
    through the Job API (`rayjob.settle`), whether it was submitted with `--no-wait` or not.
    Otherwise a job submitted without `--no-wait` is read back (the driver's exit code, Ray's
    message), and followed if it still runs; the last `--no-wait` job is followed to its end,
    its logs appended to the run's raw output. Returns the end of the last
    job submitted (None when nothing was submitted, or Ray never saw it)."""
    submitted = [r for r in shim.read_log(staged.dir / shim.LOG_NAME) if r.via == "ray" and r.submission_id]
    if not submitted:
        return None
    from ledger.capture.rayjob import Missing, settle  # only for a run that submitted to Ray (asyncio: ~20 ms)

    stop_signal = _stop_signal(result) if result is not None else None
    ends: list[Any] = []
    for record in submitted:
        if stop_signal is None and record.no_wait:
            continue
        end = settle(record.address, str(record.submission_id), stop_signal, stop_wait_s, say)
        if isinstance(end, Missing):
            continue
        if end.stopped_by_ledger:
            append_missing_logs(staged, record, terminal_fd)
        if stop_signal is None and end.status in ("PENDING", "RUNNING"):
            end = _follow(staged, record, terminal_fd, say)  # the Ray CLI died, the job runs on
        ends.append((record, end))
    pending = [r for r in submitted if r.no_wait]
    if stop_signal is None and pending:
        ends.append((pending[-1], _follow(staged, pending[-1], terminal_fd, say)))
    if not ends:
        return None
    ends.sort(key=lambda pair: submitted.index(pair[0]))
    return ends[-1][1]


def append_missing_logs(staged: staging.Staged, record: Any, terminal_fd: int | None) -> None:
    """What the stopped job printed after the Ray CLI stopped tailing it, into the run's output."""
    from ledger.capture.rayjob import missing_logs

    raw_path = staged.dir / RAW_OUTPUT
    try:
        with open(raw_path, "rb") as f:
            f.seek(max(0, raw_path.stat().st_size - (1 << 16)))
            seen = f.read()
    except OSError:
        seen = b""
    rest = missing_logs(record.address, str(record.submission_id), seen)
    if not rest:
        return
    with open(raw_path, "ab") as raw:
        _echoed(raw, terminal_fd, rest)


def _echoed(raw: BinaryIO, terminal_fd: int | None, data: bytes) -> None:
    """Output of the job into the run's raw output, and onto the terminal when there is one."""
    raw.write(data)
    if terminal_fd is not None:
        try:
            os.write(terminal_fd, data)
        except OSError:
            pass  # the terminal went away: the run's copy is what counts


def _follow(staged: staging.Staged, record: Any, terminal_fd: int | None, say: Say) -> Any:
    from ledger.capture.rayjob import follow

    say(f"ledger: following Ray job {record.submission_id} to its end (Ctrl-C stops it)")
    with open(staged.dir / RAW_OUTPUT, "ab") as raw:
        return follow(record.address, str(record.submission_id), lambda data: _echoed(raw, terminal_fd, data), say=say)


def ray_status(status: Status, end: Any, say: Say) -> tuple[Status, list[str]]:
    """(the run's status from the submitted Ray job's own state, warnings for the record).

    A job followed after `--no-wait` gives the whole status. A job the Ray CLI waited for gives
    its failure (the driver's exit code, not the CLI's 1) and a stop by ledger; its success
    leaves the launcher's own exit code (a launcher may fail after its job); a Ray that cannot
    be reached leaves the launcher's status, with a warning."""
    ray_job: dict[str, object] = {"submission_id": end.submission_id, "address": end.address, "status": end.status, "message": end.message}
    if end.stopped_by_ledger:
        ray_job["stopped_by_ledger"] = True
    status = replace(status, ray_job=ray_job)
    followed = round((status.duration_s or 0.0) + end.followed_s, 3)
    from ledger.capture.rayjob import RUN_STATE  # loaded already: `end` came from it

    if end.status not in RUN_STATE:
        if end.waiting:
            say(f"ledger: {end.error or 'the Ray job did not end'}; recorded what is known")
            warning = f"{end.error or 'the Ray job did not end'}; the job's end is unknown (`ray job status {end.submission_id}`)"
            return replace(status, duration_s=followed), [warning]
        say(f"ledger: {end.error}; recorded what is known")
        return replace(status, state="unknown"), [f"{end.error}; the job's end is unknown (`ray job status {end.submission_id}`)"]
    status = replace(status, duration_s=followed)
    if end.waiting and end.status == "SUCCEEDED":
        return status, []
    if end.waiting and end.status == "STOPPED" and not end.stopped_by_ledger and status.state == "killed":
        return status, []  # stopped before ledger asked: the run's own signal is the story
    status = replace(status, exit_code=end.exit_code, state=RUN_STATE[end.status])
    if end.stopped_by_ledger:
        status = replace(status, signal=end.stop_signal or "SIGINT")
    return status, []


def check_writable(repo: Repo, branch: str) -> None:
    """Every place the record is written, tried before the job starts: the object
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
