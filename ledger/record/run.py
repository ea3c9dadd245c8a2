"""Recording a run: prepare the staged record, run the job, turn the record into a commit.

`record_run` is what `ledger run` (and `ledger replay`) call. Everything after the job starts is
written so that a failure in one fact (metrics, data tracking, image probe) lands in the
manifest's `warnings` instead of losing the run; a crash of ledger itself leaves the staged
folder for `ledger recover`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger import yamlio
from ledger.capture.hostfacts import basic_host, cached_host_facts
from ledger.capture.runner import Job, JobResult, SignalGuard
from ledger.capture.stream import OutputCapture
from ledger.config import Config
from ledger.configload import load_config
from ledger.errors import LedgerError, NotRecorded, StartError
from ledger.fsutil import inode_clock, write_atomic
from ledger.manifest import duration_text, new_run_id, readable, run_path, status_line, storable
from ledger.record import facts, jobsetup
from ledger.redact import apply as redact
from ledger.redact.names import Redactions
from ledger.redact.runscrub import LEFT_OUT, as_texts, save_secrets, scrub_code_file, scrub_logs, scrub_record
from ledger.redact.scanner import Redactor, secret_kinds_in_name
from ledger.redact.values import known_secrets
from ledger.runrecord import Code, Command, DataEntry, Gpu, Host, Image, Replay, RunRecord, Status, replace, warm
from ledger.storage import staging
from ledger.storage.bigfiles import BlobHashes, describe
from ledger.storage.git import CodeSnapshot, Repo
from ledger.storage.gitcmd import UntrackedCount
from ledger.storage.store import check_branch_writable, commit_message, write_run
from ledger.textfmt import size_text
from ledger.timefmt import iso, utc_now
from ledger.understand import launcher, shim

if TYPE_CHECKING:
    from ledger.heat.setup import RunMonitor
    from ledger.record.streamed import Follower, StreamResult

Say = Callable[[str], None]
# Modules only the end of a run needs: imported on a thread while the job runs, not before it starts.
END_MODULES = ("ledger.record.facts", "ledger.yamlio", "ledger.storage.summary", "ledger.metrics.jsonl")


@dataclass
class RunRequest:
    """What the user asked `ledger run` for."""

    argv: list[str]
    cwd: Path
    name: str | None = None
    note: str | None = None
    image: str | None = None
    heat_guard: bool = True
    data_paths: list[str] = field(default_factory=list)
    debug_data: bool | None = None  # None: as configured
    replay_of: str | None = None
    replay: dict[str, Any] | None = None
    env: dict[str, str] | None = None
    # replaced in argv by the new run's data folder (a replay's own outputs land there)
    data_placeholder: str | None = None
    # a replay's: its source's launcher files, left out of its `code` too (`codeset.record_code`)
    code_left_out: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    exit_code: int
    state: str
    commit: str | None


@dataclass
class HostFacts:
    """The host's packages and checkouts, read on a thread while the job runs (a run with no image)."""

    thread: threading.Thread | None = None
    facts: dict[str, Any] | None = None  # set by the thread
    error: str | None = None  # set by the thread: the facts could not be read

    def image(self, image: Image) -> Image:
        """The `image` section with the host's facts (waited for, at most 10 s)."""
        if self.thread is None:
            return image
        self.thread.join(timeout=10)
        if self.facts is not None:
            return image.merged(self.facts)
        if self.error is not None:
            return replace(image, errors=[*image.errors, self.error])
        return image


def _image_facts(req: RunRequest, cfg: Config, repo: Repo, say: Say) -> tuple[dict[str, Any], HostFacts]:
    """The `image` section: probed in the image when one is named, else read from the host."""
    from ledger.capture.image import detect_image_in_argv

    ref = req.image or detect_image_in_argv(req.argv) or cfg.image
    host_facts = HostFacts()
    if ref:
        from ledger.capture.image import probe_image

        facts = probe_image(ref, cfg.image_probes or None, repo.common_dir / "ledger" / "images")
        section = facts.to_manifest()
        section["source"] = "image"
        if section.get("errors"):
            say(f"ledger: image facts incomplete for {ref}: {'; '.join(section['errors'])}")
        return section, host_facts

    def host() -> None:
        try:
            facts = cached_host_facts(repo.common_dir / "ledger" / "host", "python3", cfg.host_checkouts).to_manifest()
            checkouts = facts.get("checkouts") or {}
            packages = facts.get("packages") or {}
            host_facts.facts = {
                "source": "host",
                "sglang_version": packages.get("sglang"),
                "miles_commit": (checkouts.get("miles") or {}).get("commit"),
                "sglang_commit": (checkouts.get("sglang") or {}).get("commit"),
                "megatron_commit": (checkouts.get("megatron") or checkouts.get("Megatron-LM") or {}).get("commit"),
                "packages": packages,
                "host": {k: facts.get(k) for k in ("python", "python_version", "executable", "checkouts")},
                "errors": facts.get("errors") or [],
            }
        except Exception as exc:  # a fact we cannot read never stops a run
            host_facts.error = f"host facts: {exc}"

    host_facts.thread = threading.Thread(target=host, name="ledger-hostfacts", daemon=True)
    host_facts.thread.start()
    return {}, host_facts


def _code_scrubber(redactor: Redactor, places: list[list[str]]) -> Callable[[bytes], bytes | None]:
    """Secrets pasted into uncommitted tracked text files never reach the run commit; what was
    hidden is listed per file (by kind, never the value)."""

    def scrub(data: bytes) -> bytes | None:
        acc = Redactions()
        clean = scrub_code_file(redactor, data, acc)  # None: binary with secret-shaped bytes, left out
        if clean != data:
            places.append(acc.as_list())  # in the order of `CodeSnapshot.scrubbed`
        return clean

    return scrub


def _copy_launcher(path: Path, run_dir: Path, redactor: Redactor) -> tuple[str, str, list[str]]:
    raw = path.read_bytes()
    acc = Redactions()
    text = redactor.redact_text(raw.decode("utf-8", "surrogateescape"), acc)
    dest = run_dir / "launcher"
    dest.mkdir(exist_ok=True)
    (dest / path.name).write_bytes(text.encode("utf-8", "surrogateescape"))
    return path.name, hashlib.sha256(raw).hexdigest(), acc.at(f"launcher/{path.name}")


def _redacted_words(redactor: Redactor, text: str | None, place: str, into: set[str]) -> str | None:
    """`--name` / `--note` with secrets hidden; the kinds hidden go into `into`."""
    if text is None:
        return None
    acc = Redactions()
    clean = redactor.redact_text(text, acc)
    into.update(acc.at(place))
    return clean


@dataclass(frozen=True)
class Prepared:
    """What `prepare` leaves for the job: the staged record and what the job needs to start."""

    repo: Repo
    cfg: Config
    staged: staging.Staged
    record: RunRecord  # the manifest so far (staged as manifest.json)
    code: CodeSnapshot
    job_argv: list[str]  # the argv the job runs (the debug-data flags added, on the argv route)
    secrets: set[str]  # the run's known secret values (saved in the staging folder for `recover`)
    wrapper_flags: list[tuple[str, str]]  # debug-data flags the PATH wrappers add
    launcher_text: str | None
    host_facts: HostFacts


def _command_section(req: RunRequest, repo: Repo, argv: list[str]) -> Command:
    return Command(argv=argv, cwd=str(req.cwd), repo_root=str(repo.root), cwd_in_repo=os.path.relpath(req.cwd.resolve(), repo.root))


def _code_section(code: CodeSnapshot) -> Code:
    section = Code(commit=code.commit, branch=code.branch, dirty=code.dirty, patch=code.patch_sha256, untracked_left_out=code.untracked)
    section = replace(section, submodules=code.submodules) if code.submodules else section
    return replace(section, large_files=describe(code.large)) if code.large else section


def _snapshot_notes(code: CodeSnapshot, max_mb: float) -> list[str]:
    """What the code snapshot left out of the run's tree, one line each (said, and in `warnings`)."""
    notes = [
        f"{rel} is {size_text(seen['size'])}, over code.max_file_mb ({max_mb:g}): the run's tree keeps its committed "
        "version; its size, mtime and blob id (computed while the job runs) are recorded instead"
        for rel, seen in code.large.items()
    ]
    if code.kept_committed:
        notes.append(
            f"uncommitted changes to {', '.join(code.kept_committed)} are not recorded: git's, DVC's and ledger's "
            "configuration goes into a run only as committed"
        )
    return notes


def prepare(req: RunRequest, say: Say) -> Prepared:
    """Everything before the job starts, in steps: the repository checked (`_opened`), the known
    secrets and the code snapshot taken with them hidden (`_sealed`), the `command` section
    (`_redacted_command`), the counted code, the debug-data route and the image facts; staged as
    manifest.json. Any failure here is exit 125 and leaves nothing behind."""
    if not req.argv:
        raise StartError("no command to run", "put the command after `--`: ledger run -- bash run.sh")
    repo, cfg = _opened(req)
    started = utc_now()
    run_id = new_run_id(started)
    staged = staging.create(repo.root, run_id)
    try:
        staged.set_owner(None)
        argv = list(req.argv)
        if req.data_placeholder:
            argv = [a.replace(req.data_placeholder, str(staged.data_dir)) for a in argv]
        launcher_path = launcher.is_launcher(argv, req.cwd, list(cfg.training_patterns))
        launcher_text = launcher_path.read_text(errors="surrogateescape") if launcher_path is not None else None
        sealed = _sealed(req, cfg, repo, argv, launcher_text)
        notes = _snapshot_notes(sealed.code, cfg.code_max_file_mb)
        for note_line in notes:
            say(f"ledger: {note_line}")
        save_secrets(staged.dir, sealed.secrets)  # before any output exists, so `recover` scrubs the same
        staged.save_code(sealed.code)
        command, redacted = _redacted_command(req, repo, cfg, argv, sealed, launcher_path, staged.run_dir, say)
        name = _redacted_words(sealed.redactor, req.name, "name", redacted)
        note = _redacted_words(sealed.redactor, req.note, "note", redacted)
        from ledger.record.codeset import record_code

        content = record_code(
            repo, sealed.code, cfg.code_ignore, launcher_path, launcher_text, req.cwd, cfg.training_patterns, req.code_left_out
        )
        command = content.command(command)
        record = RunRecord.new(run_id, iso(started))
        want_debug = cfg.debug_data if req.debug_data is None else req.debug_data
        route = jobsetup.DebugRoute(argv, {})
        if want_debug and req.replay is None:
            route = jobsetup.debug_data_route(argv, launcher_text, cfg, staged, str(req.cwd), record.image, say)
            command = route.command(command)
        image, host_facts = _image_facts(req, cfg, repo, say)
        record = replace(
            record,
            name=name,
            note=note,
            host=_host(),
            command=command,
            code=content.code(_code_section(sealed.code)),
            image=record.image.merged(image),
            replay_of=req.replay_of,
            replay=None if req.replay is None else Replay.from_dict(req.replay),
            redacted=sorted(redacted),
            warnings=[*notes, *([content.warning] if content.warning else [])],
        )
        job_argv = redact.redact_argv(route.job_argv, cfg.secret_env_names)[0]
        staged.write_json("request.json", {"job_argv": [sealed.redactor.redact_text(a) for a in job_argv], "data_paths": req.data_paths})
        staged.write_json("manifest.json", record.to_dict())  # JSON while staged: cheap, and enough for `recover`
    except BaseException:
        staged.remove()
        raise
    return Prepared(repo, cfg, staged, record, sealed.code, route.job_argv, sealed.secrets, route.wrapper_flags, launcher_text, host_facts)


def _host() -> Host:
    """`host`, built from ledger's own values rather than decoded: a process's first decode
    resolves the record's types (~10 ms), which `ledger run` pays while the job runs, not before."""
    facts = basic_host()
    return Host(hostname=facts["hostname"], user=facts["user"], platform=facts["platform"], python=facts["python"])


def _opened(req: RunRequest) -> tuple[Repo, Config]:
    """The repository and its config, once the run's name is a name and its branch can be written."""
    try:
        if req.name is not None:
            from ledger.runref import check_run_name

            check_run_name(req.name)
        repo = Repo(req.cwd)
        repo.head_commit()
        cfg = load_config(repo.root, repo.common_dir)
        if req.name is not None and (kinds := secret_kinds_in_name(req.name, cfg.secret_names)):
            raise StartError(
                f"--name holds what looks like a secret ({', '.join(kinds)})", "name the run without credentials, e.g. --name lr-3e-6"
            )
        check_branch_writable(repo, cfg.branch)
        jobsetup.check_writable(repo, cfg.branch)
    except LedgerError as exc:
        raise StartError(exc.message, exc.hint) from exc
    return repo, cfg


@dataclass(frozen=True)
class Sealed:
    """The run's known secret values and the code snapshot taken with them hidden (`_sealed`)."""

    secrets: set[str]
    redactor: Redactor  # hides every value of `secrets`, and every secret shape
    code: CodeSnapshot
    code_places: list[list[str]]  # per file of `code.scrubbed`, in order: the kinds hidden in it


def _sealed(req: RunRequest, cfg: Config, repo: Repo, argv: list[str], launcher_text: str | None) -> Sealed:
    """The values to hide (from the argv, the environment, the launcher, the name and note), then
    the code snapshot with them hidden in its uncommitted files."""
    words = [t for t in (launcher_text, req.name, req.note) if t]
    secrets = known_secrets(argv, req.env if req.env is not None else os.environ, words, cfg.secret_env_names)
    redactor = Redactor(secrets, cfg.secret_names)
    places: list[list[str]] = []
    code = repo.code_snapshot(scrub=_code_scrubber(redactor, places), max_file_bytes=int(cfg.code_max_file_mb * (1 << 20)))
    # a value hidden in a dirty tracked file (`api_key: ...` in config.yaml) is a known value
    # from now on: the job may print it in any form
    secrets |= as_texts(redactor.found_values())
    return Sealed(secrets, Redactor(secrets, cfg.secret_names), code, places)


def _redacted_command(
    req: RunRequest, repo: Repo, cfg: Config, argv: list[str], sealed: Sealed, launcher_path: Path | None, run_dir: Path, say: Say
) -> tuple[Command, set[str]]:
    """The `command` section with secrets hidden (the launcher copied, redacted, into the run
    folder), and what was hidden where (`redacted`: kinds, never values)."""
    clean, argv_names = redact.redact_argv(argv, cfg.secret_env_names)
    command = _command_section(req, repo, [sealed.redactor.redact_text(a) for a in clean])
    redacted = {f"argv: {n}" for n in argv_names}
    for path, kinds in zip(sealed.code.scrubbed, sealed.code_places):
        redacted.update(f"code/{path}: {kind}" for kind in kinds)
        if "pattern:" + LEFT_OUT in kinds:
            say(f"ledger: warning: {path} is a changed binary file holding secret-shaped bytes; it is left out of the run's code tree")
    if launcher_path is not None:
        file_name, digest, names = _copy_launcher(launcher_path, run_dir, sealed.redactor)
        command = replace(command, launcher=file_name, launcher_sha256=digest)
        redacted.update(names)
    return command, redacted


@dataclass(frozen=True)
class JobEnd:
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


def record_run(req: RunRequest, say: Say, terminal_fd: int | None) -> RunOutcome:
    """Run the job under ledger and record it as one commit. Returns how it ended.

    The stages: `prepare` (the facts before the job), the job (`_run_job`), then `_after_job`
    (the log results and how it ended), `finish` (the derived facts, the commit)."""
    with SignalGuard(say) as guard:
        with _before_the_job():
            prepared = prepare(req, say)
        ended = _run_job(req, prepared, guard, terminal_fd, say)
        try:
            return _after_job(prepared, ended, say)
        except BaseException as exc:
            ended.follower.abandon()  # `ledger recover` redoes the log work from the raw file
            if isinstance(exc, Exception) and not os.environ.get("LEDGER_DEBUG"):
                raise not_recorded(prepared.record.id, exc) from exc
            raise


def _run_job(req: RunRequest, prepared: Prepared, guard: SignalGuard, terminal_fd: int | None, say: Say) -> JobEnd:
    """Start the job with its output copy, log worker, heat guard and data hasher; wait for it."""
    repo, cfg, staged = prepared.repo, prepared.cfg, prepared.staged
    environ = dict(req.env if req.env is not None else os.environ)
    env = dict(environ)
    job_vars, ledger_env = jobsetup.job_env(cfg, env, staged, prepared.record.id, prepared.wrapper_flags)
    env.update(job_vars)
    record = replace(prepared.record, command=replace(prepared.record.command, ledger_env=ledger_env))
    job_start = inode_clock(staged.dir)  # the untracked count's rule compares ctimes with it
    try:
        with _before_the_job():
            job = Job(prepared.job_argv, req.cwd, env, cfg.stop_grace_s)
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
        list(cfg.secret_names),
        lambda: capture.bytes_in,
        preload=(repo.root, int(cfg.log_git_max_mb * (1 << 20))),
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


@contextlib.contextmanager
def _before_the_job() -> Iterator[None]:
    """Any failure before the job starts is exit 125 with one line (a LedgerError keeps its own
    documented code: 2 for usage, 127 for a command not found); nothing of the run is left."""
    try:
        yield
    except LedgerError:
        raise
    except Exception as exc:
        if os.environ.get("LEDGER_DEBUG"):
            raise
        raise StartError(
            f"could not start the run: {type(exc).__name__}: {exc}", "nothing was recorded; LEDGER_DEBUG=1 shows the traceback"
        ) from exc


def not_recorded(run_id: str, exc: Exception) -> NotRecorded:
    """Any failure after the job ended: exit 75, never the job's own 1 (the run stays staged)."""
    if isinstance(exc, LedgerError):
        return NotRecorded(exc.message, exc.hint)
    return NotRecorded(
        f"could not record run {run_id}: internal error: {type(exc).__name__}: {exc}",
        "the run is still staged; `ledger recover` commits it (LEDGER_DEBUG=1 shows the traceback)",
    )


def _ended_status(status: Status, result: JobResult) -> Status:
    """The `status` section of the job's end (a capture error's `warnings`, said before, kept)."""
    ended = Status(state=result.state, exit_code=result.exit_code, signal=result.signal_name, duration_s=round(result.duration_s, 3))
    if status.warnings:
        ended = replace(ended, warnings=list(status.warnings))
    return replace(ended, escalated=result.escalated) if result.escalated else ended


def _after_job(prepared: Prepared, ended: JobEnd, say: Say) -> RunOutcome:
    """The job has ended: gather what it left (the log results, how it ended) and commit the record."""
    staged, cfg, result, record = prepared.staged, prepared.cfg, ended.result, ended.record
    warnings = list(record.warnings)
    if ended.capture.join(timeout=10):
        ray_end = jobsetup.follow_submitted(staged, ended.terminal_fd, say, result, cfg.stop_grace_s)
    else:  # a child of the job still holds the pipe open: record what arrived so far
        warnings.append("the job's output pipe was still open 10 s after it exited; later output is not recorded")
        ray_end = None
    from ledger.record.streamed import retire_raw

    command = jobsetup.note_framework(record.command, shim.read_log(staged.dir / shim.LOG_NAME))
    logs = ended.follower.finish(Redactor(prepared.secrets, cfg.secret_names))
    retire_raw(staged, prepared.secrets, logs)
    status = record.status
    notes = truncation_noted(staged.run_dir, ended.capture.truncation_notes() + logs.truncated, say)
    if notes:
        warnings.extend(notes)
        status = replace(status, warnings=notes)
    gpu = Gpu.from_dict(ended.monitor.stop_summary())
    image = prepared.host_facts.image(record.image)
    finished = iso(utc_now())
    status = _ended_status(status, result)
    if result.escalated:
        warnings.append(result.escalated)
    if ray_end is not None:
        status, ray_warnings = jobsetup.ray_status(status, ray_end, say)
        warnings.extend(ray_warnings)
    if status.state == "failed" and (hint := jobsetup.refused_debug_flags(staged.run_dir, command, status, say)):
        warnings.append(hint)
    code = replace(record.code, untracked_left_out=ended.untracked.result())
    if prepared.code.large:
        large, unhashed = ended.big.result()
        code = replace(code, large_files=large)
        warnings.extend(unhashed)
    record = replace(
        record,
        command=command,
        code=code,
        image=image,
        gpu=gpu,
        status=status,
        finished=finished,
        warnings=warnings,
    )
    staged.write_json("manifest.json", record.to_dict())  # the true ending, for `recover` if the commit below fails
    commit = finish(prepared.repo, cfg, staged, record, prepared.code, logs, say, secrets=prepared.secrets, environ=ended.environ)
    return RunOutcome(record.id, status.exit_code if status.exit_code is not None else result.exit_code, status.state or "unknown", commit)


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


def _import_end_modules() -> None:
    """Pay the imports the record needs while the job runs (a failure shows up, later, where used)."""
    for name in END_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the import is retried, and reported, where the module is used
            pass

    warm()  # the record's types, resolved once: its first decode after the job is then ~0.1 ms


def _guarded(warnings: list[str], what: str, fn: Callable[[], Any], say: Say) -> Any:
    """`fn()`, or None with a warning appended to `warnings` when it fails: one fact never loses the run."""
    try:
        return fn()
    except Exception as exc:  # one fact failing must never lose the run
        text = f"{what} failed: {type(exc).__name__}: {exc}"
        warnings.append(text)
        say(f"ledger: {text}")
        return None


def _derived_facts(
    repo: Repo,
    cfg: Config,
    staged: staging.Staged,
    record: RunRecord,
    logs: StreamResult,
    say: Say,
    secrets: set[str],
    environ: dict[str, str] | None,
) -> RunRecord:
    """The facts derived once the job has ended, each step returning its part of the record: the
    training command's settings, extra logs, metrics, DVC-tracked data, rollout ids, a replay's
    fidelity. A step that fails is a warning in the record, never a lost run."""
    run_dir = staged.run_dir
    warnings = list(record.warnings)
    redacted = set(record.redacted) | set(logs.redacted)

    def guarded(what: str, fn: Callable[[], Any]) -> Any:
        return _guarded(warnings, what, fn, say)

    job_argv = (staged.read_json("request.json") or {}).get("job_argv") or list(record.command.argv)
    record = replace(record, logs=replace(record.logs, split=logs.where), redacted=sorted(redacted))
    records = shim.read_log(staged.dir / shim.LOG_NAME)
    lines = logs.command_lines
    current = record
    training = guarded("reading the training command", lambda: facts.training_facts(current, cfg, lines, job_argv, records, environ))
    if training is not None:
        redacted.update(training.redacted)
        warnings.extend(training.warnings)
        record = training.applied(record)
    extra = guarded("copying extra logs", lambda: facts.extra_logs(cfg, repo.root, run_dir, secrets))
    if extra is not None:
        redacted.update(extra[1])
        record = replace(record, logs=replace(record.logs, extra=extra[0]), redacted=sorted(redacted))
    ran = record.command
    metrics = guarded("parsing metrics", lambda: facts.metrics(run_dir, staged.data_dir, logs, ran, record.started, environ, say))
    if metrics is not None:
        if metrics[0]:
            record = replace(record, logs=replace(record.logs, metrics=metrics[0]))
        warnings.extend(metrics[1])
    command = record.command
    data = list(record.data)
    # the run's known values, and the values the rules removed from its logs: a data file holding one is held back
    screen = Redactor(secrets | as_texts(logs.found), cfg.secret_names)
    tracked = guarded("tracking data", lambda: facts.track_data(repo, staged, command, say, screen))
    if tracked is not None:
        data = [DataEntry.from_dict(d, "manifest", "data") for d in tracked]
    with_ids = guarded("listing the recorded rollout ids", lambda: _with_rollout_ids(staged, data, str(command.cwd)))
    if with_ids is not None:
        data = with_ids
    record = replace(record, data=data)
    if record.replay_of and record.replay is not None:
        so_far, replay = replace(record, warnings=list(warnings)), record.replay
        fidelity = guarded("comparing the replay with its run", lambda: _replay_fidelity(repo, so_far, run_dir, say))
        if fidelity is not None:
            record = replace(record, replay=replace(replay, fidelity=fidelity))
    for log in ("trainer.log", "engine.log"):
        if not (run_dir / log).exists():  # (never touched: a new mtime would void the worker's md5)
            (run_dir / log).touch()
    if (run_dir / "heat.log").exists():
        record = replace(record, logs=replace(record.logs, heat="heat.log"))
    return replace(record, warnings=warnings)


def _keep_untracked_data(root: Path, staged: staging.Staged, record: RunRecord, say: Say) -> None:
    """Whatever the job wrote under the run's data folder and no tracked record holds stays on
    disk (never deleted with the staging folder)."""
    tracked = {str(d.template).split("/")[1] for d in record.data if d.tracked and str(d.template or "").startswith("data/")}
    if not staged.data_dir.is_dir():
        return
    for source in sorted(staged.data_dir.iterdir()):
        if source.name in tracked:
            continue
        dest = staging.ledger_dir(root) / "untracked" / record.id / source.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(source), dest)
        say(f"ledger: untracked data of run {record.id} kept at {dest}")


def _with_rollout_ids(staged: staging.Staged, data: list[DataEntry], cwd: str) -> list[DataEntry]:
    """The `data` section with `rollout_ids` on the rollout data record: which rollouts a replay
    can pick (`--step N`)."""
    out = []
    for rec in data:
        out.append(rec)
        if rec.role != "rollout" or not rec.template:
            continue
        template = rec.template
        base = Path(template)
        if template.startswith("data/"):
            base = staged.dir / template
        elif not base.is_absolute():
            base = Path(cwd) / template
        pattern = re.compile(re.escape(base.name).replace(re.escape("{rollout_id}"), "(.+)") + "$")
        if "{rollout_id}" not in base.name or not base.parent.is_dir():
            continue
        found = [match.group(1) for p in base.parent.iterdir() if (match := pattern.match(p.name))]
        numbers = sorted(int(x) for x in found if x.isdigit())
        out[-1] = replace(rec, rollout_ids=[*numbers, *sorted(x for x in found if not x.isdigit())])
    return out


def _replay_fidelity(repo: Repo, record: RunRecord, run_dir: Path, say: Say) -> dict[str, Any] | None:
    """`replay.fidelity`: the replay's learning metrics against its source run's."""
    from ledger.compare.fidelity import describe, fidelity_of

    result = fidelity_of(repo, record, run_dir)
    if result is not None:
        say(f"ledger: replay fidelity against {record.replay_of}: {describe(result)}")
    return result


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
    return it: the derived facts (`_derived_facts`), the logs' last scrub (`_scrubbed_logs`),
    big logs to DVC (`_big_logs`), the tracker links (`_with_trackers`), the manifest's scrub
    (`scrub_record`), then the commit (`_committed`). Returns the commit id.

    `logs` is the log work done on the job's output (`ledger.record.streamed`); None reads it
    back from the split logs already in the run folder."""
    run_dir = staged.run_dir
    if logs is None:
        from ledger.record.streamed import logs_result

        logs = logs_result(run_dir)
    known = set(secrets or ())
    record = _derived_facts(repo, cfg, staged, record, logs, say, known, environ)
    # the same scrub for `ledger run` and `ledger recover`, before anything reaches git or DVC
    record = _scrubbed_logs(record, run_dir, known, logs, cfg)
    record = _big_logs(record, repo, cfg, staged, logs, say)
    record = _with_trackers(record, run_dir)
    record = scrub_record(record, known, logs.found, cfg.secret_names)
    return _committed(record, repo, cfg, staged, code, logs, say)


def _scrubbed_logs(record: RunRecord, run_dir: Path, secrets: set[str], logs: StreamResult, cfg: Config) -> RunRecord:
    """The run folder's logs scrubbed a last time; what was hidden, in `redacted`."""
    hidden = scrub_logs(run_dir, secrets, logs.found, cfg.secret_names)
    return replace(record, redacted=sorted({*record.redacted, *hidden})) if hidden else record


def _big_logs(record: RunRecord, repo: Repo, cfg: Config, staged: staging.Staged, logs: StreamResult, say: Say) -> RunRecord:
    """A trainer/engine log over `logs: git_max_mb` tracked with DVC (`facts.offload_big_logs`)."""
    warnings = list(record.warnings)
    offloaded = _guarded(warnings, "tracking big logs", lambda: facts.offload_big_logs(repo, cfg, staged, record.id, say, logs.md5), say)
    if offloaded is None:
        return replace(record, warnings=warnings)
    entry = DataEntry.from_dict(offloaded[0], "manifest", "data")
    return replace(record, data=[*record.data, entry], logs=replace(record.logs, in_dvc=offloaded[1]), warnings=warnings)


def _with_trackers(record: RunRecord, run_dir: Path) -> RunRecord:
    """`trackers`: the W&B/MLflow run the job printed."""
    from ledger.metrics.trackers import find_trackers

    return replace(record, trackers=find_trackers(run_dir / "trainer.log", dict(record.settings)))


def _committed(record: RunRecord, repo: Repo, cfg: Config, staged: staging.Staged, code: CodeSnapshot, logs: StreamResult, say: Say) -> str:
    """The run folder's record files (manifest.yaml, summary.json, settings.json, status) written
    from the record, the folder committed, the staging folder dropped."""
    from ledger.storage.summary import summary_of

    run_dir, status = staged.run_dir, record.status
    duration = duration_text(status.duration_s or 0.0)
    write_atomic(run_dir / "status", status_line(status.exit_code, status.signal, status.duration_s or 0.0, record.finished))
    text = storable(record.to_dict())  # valid UTF-8; bytes that were not are kept exactly in `raw_bytes`
    yamlio.dump_file(run_dir / "manifest.yaml", text)
    summary = summary_of(text, logs.summary_for(run_dir / "metrics.jsonl"))  # list filters read these, not the table
    write_atomic(run_dir / "summary.json", json.dumps(summary, default=str, separators=(",", ":")) + "\n")
    write_atomic(run_dir / "settings.json", json.dumps(readable(dict(record.settings)), default=str, indent=0) + "\n")
    exit_text = f"exit {status.exit_code if status.exit_code is not None else '-'}"
    if status.state in ("killed", "lost"):
        exit_text += f" ({status.state}{', ' + status.signal if status.signal else ''})"
    name = readable(record.name)
    message = commit_message(record.id, name, exit_text, duration, code.commit)
    tree = repo.tree_from_dir(run_dir)
    commit = write_run(repo, cfg.branch, code, record.id, tree, message)
    _keep_untracked_data(repo.root, staged, record, say)
    staged.remove()
    repo.gc_auto()
    say(
        f"ledger: recorded run {record.id}{' (' + name + ')' if name else ''}: {status.state}, "
        f"exit {status.exit_code}, {duration} -> {cfg.branch} {commit[:10]} ({run_path(record.id)})"
    )
    return commit
