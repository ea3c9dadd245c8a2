"""Before the job: the staged record of a run about to start (`prepare`).

The repository and its config checked, the run's known secret values gathered and the code
snapshot taken with them hidden, the `command` section redacted (its launcher copied), the code
that counts, the debug-data route and the image facts; staged as manifest.json. Any failure here
is exit 125 and leaves nothing behind (`before_the_job`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec

from ledger.capture.hostfacts import basic_host, cached_host_facts
from ledger.capture.image import detect_image_in_argv, probe_image
from ledger.config import Config
from ledger.configload import load_config
from ledger.errors import LedgerError, StartError
from ledger.manifest import new_run_id
from ledger.record import jobsetup
from ledger.record.codeset import record_code
from ledger.record.jobsetup import Say
from ledger.redact import apply as redact
from ledger.redact.names import Redactions
from ledger.redact.runscrub import LEFT_OUT, as_texts, save_secrets, scrub_code_file
from ledger.redact.scanner import Redactor, secret_kinds_in_name
from ledger.redact.values import known_secrets
from ledger.runrecord import Code, Command, Host, Image, Replay, RunRecord, replace
from ledger.storage import staging
from ledger.storage.bigfiles import describe
from ledger.storage.git import CodeSnapshot, Repo
from ledger.storage.store import check_branch_writable
from ledger.textfmt import size_text
from ledger.timefmt import iso, utc_now
from ledger.understand import launcher


class RunRequest(msgspec.Struct):
    """What the user asked `ledger run` for."""

    argv: list[str]
    cwd: Path
    name: str | None = None
    note: str | None = None
    image: str | None = None
    heat_guard: bool = True
    data_paths: list[str] = msgspec.field(default_factory=list)
    debug_data: bool | None = None  # None: as configured
    replay_of: str | None = None
    replay: Replay | None = None  # a replay's `replay` section
    env: dict[str, str] | None = None
    # replaced in argv by the new run's data folder (a replay's own outputs land there)
    data_placeholder: str | None = None
    # a replay's: its source's launcher files, left out of its `code` too (`codeset.record_code`)
    code_left_out: list[str] = msgspec.field(default_factory=list)


class HostFacts(msgspec.Struct):
    """The host's packages and checkouts, read on a thread while the job runs (a run with no image)."""

    thread: threading.Thread | None = None
    facts: Image | None = None  # set by the thread: its `HOST_KEYS` are the host's
    error: str | None = None  # set by the thread: the facts could not be read

    def image(self, image: Image) -> Image:
        """The `image` section with the host's facts (waited for, at most 10 s)."""
        if self.thread is None:
            return image
        self.thread.join(timeout=10)
        if self.facts is not None:
            return replace(image, **{key: getattr(self.facts, key) for key in HOST_KEYS})
        if self.error is not None:
            return replace(image, errors=[*image.errors, self.error])
        return image


# the `image` keys a run with no image takes from the host
HOST_KEYS = ("source", "sglang_version", "miles_commit", "sglang_commit", "megatron_commit", "packages", "host", "errors")


def _host_image(facts: Mapping[str, Any]) -> Image:
    """The `HOST_KEYS` of the `image` section, from the host's facts (`HostFacts.to_manifest`)."""
    checkouts = facts.get("checkouts") or {}
    packages = facts.get("packages") or {}
    return Image(
        source="host",
        sglang_version=packages.get("sglang"),
        miles_commit=(checkouts.get("miles") or {}).get("commit"),
        sglang_commit=(checkouts.get("sglang") or {}).get("commit"),
        megatron_commit=(checkouts.get("megatron") or checkouts.get("Megatron-LM") or {}).get("commit"),
        packages=packages,
        host={k: facts.get(k) for k in ("python", "python_version", "executable", "checkouts")},
        errors=facts.get("errors") or [],
    )


def _image_facts(req: RunRequest, cfg: Config, repo: Repo, say: Say) -> tuple[Mapping[str, object], HostFacts]:
    """The `image` section: probed in the image when one is named, else read from the host."""
    ref = req.image or detect_image_in_argv(req.argv) or cfg.image
    host_facts = HostFacts()
    if ref:
        facts = probe_image(ref, cfg.image_probes or None, repo.common_dir / "ledger" / "images")
        section = facts.to_manifest()
        section["source"] = "image"
        if section.get("errors"):
            say(f"ledger: image facts incomplete for {ref}: {'; '.join(section['errors'])}")
        return section, host_facts

    def host() -> None:
        try:
            facts = cached_host_facts(repo.common_dir / "ledger" / "host", "python3", cfg.host_checkouts)
            host_facts.facts = _host_image(facts.to_manifest())
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


class Prepared(msgspec.Struct, frozen=True):
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
    manifest.json (`_staged_record`). Any failure here is exit 125 and leaves nothing behind."""
    if not req.argv:
        raise StartError("no command to run", "put the command after `--`: ledger run -- bash run.sh")
    repo, cfg = _opened(req)
    started = utc_now()
    staged = staging.create(repo.root, new_run_id(started))
    try:
        staged.set_owner(None)
        return _staged_record(req, repo, cfg, staged, RunRecord.new(staged.id, iso(started)), say)
    except BaseException:
        staged.remove()
        raise


def _staged_record(req: RunRequest, repo: Repo, cfg: Config, staged: staging.Staged, record: RunRecord, say: Say) -> Prepared:
    """`prepare`'s steps, in the staging folder just made for the run (`record`: the new record)."""
    argv = _run_argv(req, staged)
    launcher_path = launcher.is_launcher(argv, req.cwd, list(cfg.training_patterns))
    launcher_text = launcher_path.read_text(errors="surrogateescape") if launcher_path is not None else None
    sealed = _sealed(req, cfg, repo, argv, launcher_text)
    notes = _snapshot_notes(sealed.code, cfg.code.max_file_mb)
    for note_line in notes:
        say(f"ledger: {note_line}")
    save_secrets(staged.dir, sealed.secrets)  # before any output exists, so `recover` scrubs the same
    staged.save_code(sealed.code)
    command, redacted = _redacted_command(req, repo, cfg, argv, sealed, launcher_path, staged.run_dir, say)
    name = _redacted_words(sealed.redactor, req.name, "name", redacted)
    note = _redacted_words(sealed.redactor, req.note, "note", redacted)

    content = record_code(
        repo, sealed.code, cfg.code.ignore, launcher_path, launcher_text, req.cwd, cfg.training_patterns, req.code_left_out
    )
    route, command = _debug_route(req, cfg, staged, argv, launcher_text, content.command(command), record.image, say)
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
        replay=req.replay,
        redacted=sorted(redacted),
        warnings=[*notes, *([content.warning] if content.warning else [])],
    )
    job_argv = redact.redact_argv(route.job_argv, cfg.secret_env_names)[0]
    staged.write_json("request.json", {"job_argv": [sealed.redactor.redact_text(a) for a in job_argv], "data_paths": req.data_paths})
    staged.write_json("manifest.json", record.to_dict())  # JSON while staged: cheap, and enough for `recover`
    return Prepared(repo, cfg, staged, record, sealed.code, route.job_argv, sealed.secrets, route.wrapper_flags, launcher_text, host_facts)


def _run_argv(req: RunRequest, staged: staging.Staged) -> list[str]:
    """The argv asked for, with a replay's placeholder replaced by the new run's data folder."""
    if not req.data_placeholder:
        return list(req.argv)
    return [a.replace(req.data_placeholder, str(staged.data_dir)) for a in req.argv]


def _debug_route(
    req: RunRequest,
    cfg: Config,
    staged: staging.Staged,
    argv: list[str],
    launcher_text: str | None,
    command: Command,
    image: Image,
    say: Say,
) -> tuple[jobsetup.DebugRoute, Command]:
    """How the debug-data flags reach the trainer, and `command` with the route recorded; no
    route for a replay (it loads the data) or when not wanted (`--no-debug-data`, `debug_data: false`)."""
    want_debug = cfg.capture.debug_data if req.debug_data is None else req.debug_data
    if not want_debug or req.replay is not None:
        return jobsetup.DebugRoute(argv, jobsetup.DebugData()), command
    route = jobsetup.debug_data_route(argv, launcher_text, cfg, staged, str(req.cwd), image, say)
    return route, route.command(command)


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
        if req.name is not None and (kinds := secret_kinds_in_name(req.name, cfg.secrets.names)):
            raise StartError(
                f"--name holds what looks like a secret ({', '.join(kinds)})", "name the run without credentials, e.g. --name lr-3e-6"
            )
        check_branch_writable(repo, cfg.branch)
        jobsetup.check_writable(repo, cfg.branch)
    except LedgerError as exc:
        raise StartError(exc.message, exc.hint) from exc
    return repo, cfg


class Sealed(msgspec.Struct, frozen=True):
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
    redactor = Redactor(secrets, cfg.secrets.names)
    places: list[list[str]] = []
    code = repo.code_snapshot(scrub=_code_scrubber(redactor, places), max_file_bytes=int(cfg.code.max_file_mb * (1 << 20)))
    # a value hidden in a dirty tracked file (`api_key: ...` in config.yaml) is a known value
    # from now on: the job may print it in any form
    secrets |= as_texts(redactor.found_values())
    return Sealed(secrets, Redactor(secrets, cfg.secrets.names), code, places)


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


@contextlib.contextmanager
def before_the_job() -> Iterator[None]:
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
