"""Recording a run: prepare the staged record, run the job, turn the record into a commit.

`record_run` is what `ledger run` (and `ledger replay`) call. Everything after the job starts is
written so that a failure in one fact (metrics, data tracking, image probe) lands in the
manifest's `warnings` instead of losing the run; a crash of ledger itself leaves the staged
folder for `ledger recover`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.capture.hostfacts import basic_host
from ledger.capture.runner import Job, JobResult, SignalGuard
from ledger.capture.stream import OutputCapture
from ledger.config import Config
from ledger.configload import load_config
from ledger.errors import LedgerError, NotRecorded, StartError
from ledger.fsutil import inode_clock, write_atomic
from ledger.manifest import duration_text, new_manifest, new_run_id, run_path, status_line, storable
from ledger.record import jobsetup
from ledger.redact import apply as redact
from ledger.redact.names import Redactions
from ledger.redact.runscrub import LEFT_OUT, add_redacted, as_texts, save_secrets, scrub_code_file, scrub_logs, scrub_manifest
from ledger.redact.scanner import Redactor, secret_kinds_in_name
from ledger.redact.values import known_secrets
from ledger.runref import check_run_name
from ledger.storage import staging
from ledger.storage.git import CodeSnapshot, Repo, UntrackedCount
from ledger.storage.store import check_branch_writable, commit_message, write_run
from ledger.timefmt import iso, utc_now
from ledger.understand import launcher

if TYPE_CHECKING:
    from ledger.record.streamed import Follower, StreamResult

Say = Callable[[str], None]
# Modules only the end of a run needs: imported on a thread while the job runs, not before it starts.
END_MODULES = ("ledger.record.facts", "ledger.yamlio", "ledger.storage.listing", "ledger.compare.logparse")


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


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    exit_code: int
    state: str
    commit: str | None


def _image_facts(req: RunRequest, cfg: Config, repo: Repo, say: Say) -> tuple[dict[str, Any], threading.Thread | None, dict[str, Any]]:
    """The `image` section: probed in the image when one is named, else read from the host."""
    from ledger.capture.image import detect_image_in_argv

    ref = req.image or detect_image_in_argv(req.argv) or cfg.image
    holder: dict[str, Any] = {}
    if ref:
        from ledger.capture.image import probe_image

        facts = probe_image(ref, cfg.image_probes or None, repo.common_dir / "ledger" / "images")
        section = facts.to_manifest()
        section["source"] = "image"
        if section.get("errors"):
            say(f"ledger: image facts incomplete for {ref}: {'; '.join(section['errors'])}")
        return section, None, holder

    def host() -> None:
        from ledger.capture.hostfacts import cached_host_facts

        try:
            facts = cached_host_facts(repo.common_dir / "ledger" / "host", "python3", cfg.host_checkouts).to_manifest()
            checkouts = facts.get("checkouts") or {}
            packages = facts.get("packages") or {}
            holder["facts"] = {
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
            holder["error"] = f"host facts: {exc}"

    thread = threading.Thread(target=host, name="ledger-hostfacts", daemon=True)
    thread.start()
    return {}, thread, holder


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


def prepare(req: RunRequest, say: Say) -> tuple[Repo, Config, staging.Staged, dict[str, Any], CodeSnapshot, list[str], dict[str, Any]]:
    """Everything before the job starts. Any failure here is exit 125 and leaves nothing behind."""
    if not req.argv:
        raise StartError("no command to run", "put the command after `--`: ledger run -- bash run.sh")
    try:
        if req.name is not None:
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
    started = utc_now()
    run_id = new_run_id(started)
    staged = staging.create(repo.root, run_id)
    try:
        staged.set_owner(None)
        req_argv = list(req.argv)
        if req.data_placeholder:
            req_argv = [a.replace(req.data_placeholder, str(staged.data_dir)) for a in req_argv]
        launcher_path = launcher.is_launcher(req_argv, req.cwd, list(cfg.training_patterns))
        launcher_text = launcher_path.read_text(errors="surrogateescape") if launcher_path is not None else None
        extra = frozenset(n.upper() for n in cfg.secret_names)
        secrets = known_secrets(
            req_argv, req.env if req.env is not None else os.environ, [t for t in (launcher_text, req.name, req.note) if t], extra
        )
        redactor = Redactor(secrets, cfg.secret_names)
        code_places: list[list[str]] = []
        code = repo.code_snapshot(scrub=_code_scrubber(redactor, code_places))
        # a value hidden in a dirty tracked file (`api_key: ...` in config.yaml) is a known value
        # from now on: the job may print it in any form
        secrets |= as_texts(redactor.found_values())
        redactor = Redactor(secrets, cfg.secret_names)
        save_secrets(staged.dir, secrets)  # before any output exists, so `recover` scrubs the same
        staged.save_code(code)
        m = new_manifest(run_id, started)
        redacted: set[str] = set()
        m["name"] = _redacted_words(redactor, req.name, "name", redacted)
        m["note"] = _redacted_words(redactor, req.note, "note", redacted)
        m["host"] = basic_host()
        argv, argv_names = redact.redact_argv(req_argv, extra)
        argv = [redactor.redact_text(a) for a in argv]
        m["command"].update(
            argv=argv, cwd=str(req.cwd), repo_root=str(repo.root), cwd_in_repo=os.path.relpath(req.cwd.resolve(), repo.root)
        )
        m["code"].update(
            commit=code.commit, branch=code.branch, dirty=code.dirty, patch=code.patch_sha256, untracked_left_out=code.untracked
        )
        if code.submodules:
            m["code"]["submodules"] = code.submodules
        m["replay_of"], m["replay"] = req.replay_of, req.replay
        redacted.update(f"argv: {n}" for n in argv_names)
        redacted.update(f"code/{p}: {kind}" for p, kinds in zip(code.scrubbed, code_places) for kind in kinds)
        for p, kinds in zip(code.scrubbed, code_places):
            if "pattern:" + LEFT_OUT in kinds:
                say(f"ledger: warning: {p} is a changed binary file holding secret-shaped bytes; it is left out of the run's code tree")
        if launcher_path is not None:
            name, digest, names = _copy_launcher(launcher_path, staged.run_dir, redactor)
            m["command"].update(launcher=name, launcher_sha256=digest)
            redacted.update(names)
        from ledger.record.codeset import record_code

        record_code(repo, code, m, cfg.code_ignore, launcher_path, launcher_text, req.cwd, cfg.training_patterns)
        job_argv = req_argv
        want_debug = cfg.debug_data if req.debug_data is None else req.debug_data
        wrapper_flags: list[tuple[str, str]] = []
        if want_debug and req.replay is None:
            job_argv, wrapper_flags = jobsetup.debug_data_route(req_argv, launcher_text, cfg, staged, m, say)
        image, host_thread, host_holder = _image_facts(req, cfg, repo, say)
        if image:
            m["image"].update(image)
        m["redacted"] = sorted(redacted)
        staged.write_json(
            "request.json",
            {"job_argv": [redactor.redact_text(a) for a in redact.redact_argv(job_argv, extra)[0]], "data_paths": req.data_paths},
        )
        staged.write_json("manifest.json", m)  # JSON while staged: cheap, and enough for `recover`
    except BaseException:
        staged.remove()
        raise
    context = {
        "host_thread": host_thread,
        "host_holder": host_holder,
        "job_argv": job_argv,
        "secrets": secrets,
        "wrapper_flags": wrapper_flags,
        "launcher_text": launcher_text,
    }
    return repo, cfg, staged, m, code, job_argv, context


def record_run(req: RunRequest, say: Say, terminal_fd: int | None) -> RunOutcome:
    """Run the job under ledger and record it as one commit. Returns how it ended."""
    with SignalGuard(say) as guard:
        repo, cfg, staged, m, code, job_argv, ctx = prepare(req, say)
        ctx["environ"] = dict(req.env if req.env is not None else os.environ)
        ctx["terminal_fd"] = terminal_fd
        env = dict(req.env if req.env is not None else os.environ)
        env.update(jobsetup.job_env(cfg, env, staged, m, ctx["wrapper_flags"]))
        job_start = inode_clock(staged.dir)  # the untracked count's rule compares ctimes with it
        try:
            job = Job(job_argv, req.cwd, env, cfg.stop_grace_s)
        except BaseException:
            staged.remove()
            raise
        ctx["untracked"] = UntrackedCount(repo.root, job_start)  # while the job runs, not before it
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
            job_argv=job_argv,
            env=env,
            launcher_text=ctx.get("launcher_text"),
            pgid=job.pgid,
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
        try:
            return _after_job(repo, cfg, staged, m, code, ctx, result, capture, follower, monitor, say)
        except BaseException as exc:
            follower.abandon()  # `ledger recover` redoes the log work from the raw file
            if isinstance(exc, Exception) and not os.environ.get("LEDGER_DEBUG"):
                raise not_recorded(m["id"], exc) from exc
            raise


def not_recorded(run_id: str, exc: Exception) -> NotRecorded:
    """Any failure after the job ended: exit 75, never the job's own 1 (the run stays staged)."""
    if isinstance(exc, LedgerError):
        return NotRecorded(exc.message, exc.hint)
    return NotRecorded(
        f"could not record run {run_id}: internal error: {type(exc).__name__}: {exc}",
        "the run is still staged; `ledger recover` commits it (LEDGER_DEBUG=1 shows the traceback)",
    )


def _after_job(
    repo: Repo,
    cfg: Config,
    staged: staging.Staged,
    m: dict[str, Any],
    code: CodeSnapshot,
    ctx: dict[str, Any],
    result: JobResult,
    capture: OutputCapture,
    follower: Follower,
    monitor: Any,
    say: Say,
) -> RunOutcome:
    """The job has ended: gather what it left and commit the record."""
    if capture.join(timeout=10):
        ray_end = jobsetup.follow_submitted(staged, m, ctx.get("terminal_fd"), say, result, cfg.stop_grace_s)
    else:  # a child of the job still holds the pipe open: record what arrived so far
        m["warnings"].append("the job's output pipe was still open 10 s after it exited; later output is not recorded")
        ray_end = None
    from ledger.record.streamed import retire_raw
    from ledger.understand import shim

    jobsetup.note_framework(m, shim.read_log(staged.dir / shim.LOG_NAME))
    logs = follower.finish(Redactor(ctx["secrets"], cfg.secret_names))
    retire_raw(staged, ctx["secrets"], logs)
    note_truncation(staged.run_dir, m, capture.truncation_notes() + logs.truncated, say)
    m["gpu"] = monitor.stop_summary()
    host_thread = ctx["host_thread"]
    if host_thread is not None:
        host_thread.join(timeout=10)
        holder = ctx["host_holder"]
        if "facts" in holder:
            m["image"].update(holder["facts"])
        elif "error" in holder:
            m["image"].setdefault("errors", []).append(holder["error"])
    finished = utc_now()
    m["finished"] = iso(finished)
    m["status"] = {
        "state": result.state,
        "exit_code": result.exit_code,
        "signal": result.signal_name,
        "duration_s": round(result.duration_s, 3),
        **({"warnings": m["status"]["warnings"]} if m["status"].get("warnings") else {}),
    }
    if result.escalated:
        m["status"]["escalated"] = result.escalated
        m["warnings"].append(result.escalated)
    if ray_end is not None:
        jobsetup.ray_status(m, ray_end, say)
    if m["status"]["state"] == "failed":
        jobsetup.refused_debug_flags(staged.run_dir, m, say)
    m["code"]["untracked_left_out"] = ctx["untracked"].result()
    staged.write_json("manifest.json", m)  # the true ending, for `recover` if the commit below fails
    commit = finish(repo, cfg, staged, m, code, logs, say, secrets=ctx["secrets"], environ=ctx.get("environ"))
    st = m["status"]
    return RunOutcome(m["id"], st["exit_code"] if st["exit_code"] is not None else result.exit_code, st["state"], commit)


def note_truncation(run_dir: Path, m: dict[str, Any], notes: list[str], say: Say) -> None:
    """A capture error never goes unsaid: in the manifest, and as the last line of trainer.log."""
    if not notes:
        return
    m["warnings"].extend(notes)
    m["status"]["warnings"] = list(notes)  # kept when `status` is rewritten below
    for note in notes:
        say(f"ledger: {note}")
    try:
        with open(run_dir / "trainer.log", "ab") as f:
            f.write(("\n[ledger] " + " | ".join(notes) + "\n").encode())
    except OSError:
        pass  # still no space: the manifest says it


def _import_end_modules() -> None:
    """Pay the imports the record needs while the job runs (a failure shows up, later, where used)."""
    import importlib

    for name in END_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the import is retried, and reported, where the module is used
            pass


def _guarded(m: dict[str, Any], what: str, fn: Callable[[], None], say: Say) -> None:
    try:
        fn()
    except Exception as exc:  # one fact failing must never lose the run
        text = f"{what} failed: {type(exc).__name__}: {exc}"
        m["warnings"].append(text)
        say(f"ledger: {text}")


def _keep_untracked_data(root: Path, staged: staging.Staged, m: dict[str, Any], say: Say) -> None:
    """Whatever the job wrote under the run's data folder and no tracked record holds stays on
    disk (never deleted with the staging folder)."""
    tracked = {
        str(rec.get("template") or "").split("/")[1]
        for rec in m.get("data") or []
        if rec.get("tracked") and str(rec.get("template") or "").startswith("data/")
    }
    if not staged.data_dir.is_dir():
        return
    for source in sorted(staged.data_dir.iterdir()):
        if source.name in tracked:
            continue
        dest = staging.ledger_dir(root) / "untracked" / m["id"] / source.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(source), dest)
        say(f"ledger: untracked data of run {m['id']} kept at {dest}")


def _note_rollout_ids(staged: staging.Staged, m: dict[str, Any]) -> None:
    """`rollout_ids` of the rollout data record: which rollouts a replay can pick (`--step N`)."""
    import re

    for rec in m.get("data") or []:
        if not isinstance(rec, dict) or rec.get("role") != "rollout" or not rec.get("template"):
            continue
        template = str(rec["template"])
        base = Path(template)
        if template.startswith("data/"):
            base = staged.dir / template
        elif not base.is_absolute():
            base = Path(m["command"]["cwd"]) / template
        pattern = re.compile(re.escape(base.name).replace(re.escape("{rollout_id}"), "(.+)") + "$")
        if "{rollout_id}" not in base.name or not base.parent.is_dir():
            continue
        found = [match.group(1) for p in base.parent.iterdir() if (match := pattern.match(p.name))]
        numbers = sorted(int(x) for x in found if x.isdigit())
        rec["rollout_ids"] = [*numbers, *sorted(x for x in found if not x.isdigit())]


def _replay_fidelity(repo: Repo, m: dict[str, Any], run_dir: Path, say: Say) -> None:
    """`replay.fidelity`: the replay's learning metrics against its source run's (issue 21)."""
    from ledger.compare.fidelity import describe, fidelity_of

    result = fidelity_of(repo, m, run_dir)
    if result is not None:
        m["replay"]["fidelity"] = result
        say(f"ledger: replay fidelity against {m['replay_of']}: {describe(result)}")


def finish(
    repo: Repo,
    cfg: Config,
    staged: staging.Staged,
    m: dict[str, Any],
    code: CodeSnapshot,
    logs: StreamResult | None,
    say: Say,
    secrets: set[str] | None = None,
    environ: dict[str, str] | None = None,
) -> str:
    """Derive the remaining facts, write manifest and status, commit, drop the staging folder.

    `logs` is the log work done on the job's output (`ledger.record.streamed`); None reads it
    back from the split logs already in the run folder."""
    from ledger import yamlio
    from ledger.record import facts
    from ledger.storage.listing import summary_of

    run_dir = staged.run_dir
    job_argv = (staged.read_json("request.json") or {}).get("job_argv") or m["command"]["argv"]
    if logs is None:
        from ledger.record.streamed import logs_result

        logs = logs_result(run_dir)
    m["logs"]["split"] = logs.where
    add_redacted(m, logs.redacted)
    from ledger.understand import shim

    records = shim.read_log(staged.dir / shim.LOG_NAME)
    lines = logs.command_lines
    _guarded(m, "reading the training command", lambda: facts.settings_section(m, cfg, lines, job_argv, records, environ), say)
    _guarded(m, "copying extra logs", lambda: facts.extra_logs(cfg, repo.root, run_dir, m, set(secrets or ())), say)
    _guarded(m, "parsing metrics", lambda: facts.metrics(run_dir, staged.data_dir, m, logs), say)
    _guarded(m, "tracking data", lambda: facts.track_data(repo, staged, m, say), say)
    _guarded(m, "listing the recorded rollout ids", lambda: _note_rollout_ids(staged, m), say)
    if m.get("replay_of") and isinstance(m.get("replay"), dict):
        _guarded(m, "comparing the replay with its run", lambda: _replay_fidelity(repo, m, run_dir, say), say)
    for log in ("trainer.log", "engine.log"):
        if not (run_dir / log).exists():  # (never touched: a new mtime would void the worker's md5)
            (run_dir / log).touch()
    if (run_dir / "heat.log").exists():
        m["logs"]["heat"] = "heat.log"
    # the same scrub for `ledger run` and `ledger recover`, before anything reaches git or DVC
    scrub_logs(run_dir, m, secrets or set(), logs.found, cfg.secret_names)
    _guarded(m, "tracking big logs", lambda: facts.offload_big_logs(repo, cfg, staged, m, say, logs.md5), say)
    from ledger.compare.trackers import find_trackers

    m["trackers"] = find_trackers(run_dir / "trainer.log", m.get("settings"))  # the W&B/MLflow run it printed
    scrub_manifest(m, secrets or set(), logs.found, cfg.secret_names)
    st = m["status"]
    write_atomic(run_dir / "status", status_line(st["exit_code"], st["signal"], st["duration_s"] or 0.0, m["finished"]))
    text = storable(m)  # valid UTF-8; bytes that were not are kept exactly in `raw_bytes`
    yamlio.dump_file(run_dir / "manifest.yaml", text)
    from ledger.compare.summarymetrics import summarize_file

    summary = summary_of(text, summarize_file(run_dir / "metrics.jsonl"))  # list filters read these, not the table
    write_atomic(run_dir / "summary.json", json.dumps(summary, default=str, separators=(",", ":")) + "\n")
    write_atomic(run_dir / "settings.json", json.dumps(text["settings"], default=str, indent=0) + "\n")
    exit_text = f"exit {st['exit_code'] if st['exit_code'] is not None else '-'}"
    if st["state"] in ("killed", "lost"):
        exit_text += f" ({st['state']}{', ' + st['signal'] if st['signal'] else ''})"
    message = commit_message(m["id"], text["name"], exit_text, duration_text(st["duration_s"] or 0.0), code.commit)
    tree = repo.tree_from_dir(run_dir)
    commit = write_run(repo, cfg.branch, code, m["id"], tree, message)
    _keep_untracked_data(repo.root, staged, m, say)
    staged.remove()
    repo.gc_auto()
    say(
        f"ledger: recorded run {m['id']}{' (' + text['name'] + ')' if text['name'] else ''}: {st['state']}, "
        f"exit {st['exit_code']}, {duration_text(st['duration_s'] or 0.0)} -> {cfg.branch} {commit[:10]} "
        f"({run_path(m['id'])})"
    )
    return commit
