"""Small `python3` / `python` / `ray` wrappers put first on the job's PATH.

Reading the training command back from a launcher's `set -x` trace or `EXEC:` lines is a guess
(quoting, arrays, sourced files, `$(seq ...)`); the wrappers know it exactly. Each one:

- looks at the argv it received; when it is the training command (`python3 SCRIPT ...` whose
  script matches the training patterns, or `ray job submit ... -- ENTRYPOINT` whose entrypoint
  is one), appends the debug-data flags ledger asked for that are not there yet, and appends one
  JSON line to the run's shim log: the exact argv, the flags added, and (python) the environment
  variables matching the env patterns the trainer process got;
- then `exec`s the real program found on PATH after its own folder (the trainer's `sys.executable`
  is the real interpreter, so venvs and subprocesses are unaffected).

Every `ray job submit` without `--submission-id` gets one (`ledger-<run id>-<n>`), so ledger can
reach the job through Ray's Job API: follow a `--no-wait` job to its end after the launcher
returned, and stop a waiting one when the run is stopped (the Ray CLI's Ctrl-C leaves the job
running on the cluster) or read its driver's exit code (the CLI exits 1 for any failure).

The wrappers run this file with ledger's own interpreter in `-SE` mode (no site, no PYTHONPATH),
importing only the standard library, `ledger.understand.settings`, `ledger.argv` and `ledger.globs`
(each when a call needs it): one short interpreter start per call (`bench/bench_wrappers.py`).
Nothing here may raise into the job: on any internal error the real program runs unchanged.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

NAMES = ("python3", "python", "ray")
LOG_NAME = "shim.jsonl"
ENV_DIR = "LEDGER_SHIM_DIR"
ENV_LOG = "LEDGER_SHIM_LOG"
ENV_PATTERNS = "LEDGER_SHIM_PATTERNS"
ENV_ADD = "LEDGER_SHIM_ADD"
ENV_ENV_PATTERNS = "LEDGER_SHIM_ENV_PATTERNS"
ENV_RUN_ID = "LEDGER_RUN_ID"
ENV_JOB_ENV = "LEDGER_SHIM_JOB_ENV"
ENV_FRAMEWORK = "LEDGER_SHIM_FRAMEWORK"  # `capture.debug_framework`, when .ledger.yaml names one
DETAILS_FLAG = "--dump-details"


@dataclass(frozen=True)
class ShimRecord:
    """One call a wrapper saw that was (or submitted) the training command."""

    via: str  # "python3", "python" or "ray"
    argv: list[str]  # python: the trainer's argv from the interpreter on; ray: the whole ray argv
    entrypoint: list[str] | None = None  # ray: the words after `--`
    added: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    submission_id: str | None = None
    no_wait: bool = False
    address: str | None = None
    job_env_added: list[str] = field(default_factory=list)  # ledger's job variables put in the runtime env
    framework: str | None = None  # the trainer's framework, deciding the debug flags (`framework`)
    framework_how: str | None = None


def install(
    bin_dir: Path,
    log_path: Path,
    patterns: Sequence[str],
    add: Sequence[tuple[str, str]],
    env_patterns: Sequence[str],
    environ: Mapping[str, str],
    job_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Write the wrappers into `bin_dir`; return the environment variables the job needs."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    here = Path(__file__).resolve()
    for name in NAMES:
        path = bin_dir / name
        path.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -SE {shlex.quote(str(here))} {name} "$@"\n')
        path.chmod(0o755)
    return {
        "PATH": f"{bin_dir}{os.pathsep}{environ.get('PATH', os.defpath)}",
        ENV_DIR: str(bin_dir),
        ENV_LOG: str(log_path),
        ENV_PATTERNS: json.dumps(list(patterns)),
        ENV_ADD: json.dumps([list(pair) for pair in add]),
        ENV_ENV_PATTERNS: json.dumps(list(env_patterns)),
        ENV_JOB_ENV: json.dumps(dict(job_env or {})),
    }


def read_log(path: Path) -> list[ShimRecord]:
    """The records a job's wrappers wrote, in order (unreadable lines skipped)."""
    records: list[ShimRecord] = []
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return records
    for line in text.splitlines():
        try:
            data = json.loads(line)
            records.append(ShimRecord(**data))
        except (ValueError, TypeError):
            continue
    return records


def _real_program(name: str, shim_dir: str, path: str) -> str | None:
    for folder in path.split(os.pathsep):
        if not folder or os.path.realpath(folder) == os.path.realpath(shim_dir):
            continue
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _is_training(argv: Sequence[str], patterns: Sequence[str]) -> bool:
    from ledger.understand.settings import locate_training_command, split_training_command

    located = locate_training_command(argv)
    if located is None:
        return False
    script = split_training_command(argv[located[0] :])[1]
    return script is not None and any(re.search(p, script) for p in patterns)


def _submitted_scripts(environ: Mapping[str, str]) -> list[str]:
    """Patterns for the scripts this run submitted through `ray job submit` (any name counts)."""
    from ledger.understand.settings import locate_training_command, split_training_command

    scripts = []
    for record in read_log(Path(environ.get(ENV_LOG, "/nonexistent"))):
        if record.via == "ray" and record.entrypoint:
            located = locate_training_command(record.entrypoint)
            script = split_training_command(record.entrypoint[located[0] :])[1] if located else None
            if script:
                scripts.append("(^|/)" + re.escape(os.path.basename(script)) + "$")
    return scripts


def _has(flag: str, argv: Sequence[str]) -> bool:
    return any(token == flag or token.startswith(flag + "=") for token in argv)


def _for_framework(
    argv: Sequence[str], add: Sequence[Sequence[str]], environ: Mapping[str, str]
) -> tuple[list[list[str]], str | None, str | None]:
    """The flags of `add` the trainer of `argv` has (`ledger.understand.framework`), its framework, how known."""
    if not add:
        return [], None, None
    from ledger.understand import framework
    from ledger.understand.settings import locate_training_command, split_training_command

    located = locate_training_command(argv)
    script = split_training_command(list(argv[located[0] :]))[1] if located else None
    name, how, allowed = framework.detect(script, os.getcwd(), environ.get(ENV_FRAMEWORK) or None)
    return framework.keep_flags(add, allowed), name, how


def missing_flags(argv: Sequence[str], add: Sequence[Sequence[str]]) -> list[str]:
    """The `[flag, value, ...]` words of `add` whose flag `argv` does not set (none if it dumps details)."""
    if _has(DETAILS_FLAG, argv):
        return []
    words: list[str] = []
    for flag, value in add:
        if not _has(flag, argv):
            words += [flag, value]
    return words


def _env_of_interest(environ: Mapping[str, str], patterns: Sequence[str]) -> dict[str, str]:
    import fnmatch

    return {k: v for k, v in sorted(environ.items()) if any(fnmatch.fnmatchcase(k, p) for p in patterns)}


def _with_job_env(opts: list[str], job_env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """`opts` with ledger's job variables added to `--runtime-env-json`'s env_vars where the
    launcher does not set them: a job on a cluster started elsewhere gets the cluster's
    environment, not the submitter's, so LEDGER_RUN_ID, LEDGER_DATA_DIR and RAY_DEDUP_LOGS=0
    must travel in the runtime env (the driver and every actor get it)."""
    if not job_env or any(t == "--runtime-env" or t.startswith("--runtime-env=") for t in opts):
        return opts, []  # a runtime-env YAML file: left as the user wrote it
    index = next((i for i, t in enumerate(opts) if t == "--runtime-env-json" or t.startswith("--runtime-env-json=")), None)
    runtime: dict[str, object] = {}
    if index is not None:
        token = opts[index]
        text = token.split("=", 1)[1] if "=" in token else (opts[index + 1] if index + 1 < len(opts) else "")
        try:
            runtime = json.loads(text)
        except ValueError:
            return opts, []
        if not isinstance(runtime, dict):
            return opts, []
        opts = opts[:index] + opts[index + (1 if "=" in token else 2) :]
    env_vars = runtime.get("env_vars")
    env_vars = dict(env_vars) if isinstance(env_vars, dict) else {}
    added = [k for k in job_env if k not in env_vars]
    env_vars.update({k: job_env[k] for k in added})
    runtime["env_vars"] = env_vars
    return [*opts, "--runtime-env-json", json.dumps(runtime)], added


def _append(log: str, record: ShimRecord) -> None:
    line = json.dumps(record.__dict__, separators=(",", ":")) + "\n"
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode("utf-8", "surrogateescape"))  # one write: whole lines under O_APPEND
    finally:
        os.close(fd)


def rewrite(name: str, args: list[str], environ: Mapping[str, str]) -> tuple[list[str], ShimRecord | None]:
    """The args to run the real program with, and the record to log (None: not the training command)."""
    patterns = json.loads(environ.get(ENV_PATTERNS, "[]"))
    add = json.loads(environ.get(ENV_ADD, "[]"))
    if name == "ray":
        if args[:2] != ["job", "submit"] or "--" not in args:
            return args, None
        from ledger.argv import option_value

        cut = args.index("--")
        opts, entry = args[:cut], args[cut + 1 :]
        if not _is_training(entry, [""]):  # any python entrypoint of a submitted job
            return args, None
        add, framework_name, how = _for_framework(entry, add, environ)
        added = missing_flags(entry, add)
        no_wait = "--no-wait" in opts
        submission = option_value(opts, "--submission-id") or option_value(opts, "--job-id")
        own_opts = list(opts)
        if submission is None:
            count = len(read_log(Path(environ.get(ENV_LOG, "/nonexistent"))))
            submission = f"ledger-{environ.get(ENV_RUN_ID, 'run')}-{count}"
            opts = [*opts, "--submission-id", submission]
        new_entry = [*entry, *added]
        address = option_value(opts, "--address") or environ.get("RAY_ADDRESS")
        run_opts, env_added = _with_job_env(opts, json.loads(environ.get(ENV_JOB_ENV, "{}")))
        # the record keeps the launcher's own options: ledger's id and variables are not its settings
        record = ShimRecord(
            "ray",
            ["ray", *own_opts],
            new_entry,
            [w for w in added if w.startswith("--")],
            submission_id=submission,
            no_wait=no_wait,
            address=address,
            job_env_added=env_added,
            framework=framework_name,
            framework_how=how,
        )
        return [*run_opts, "--", *new_entry], record
    argv = [name, *args]
    if not _is_training(argv, patterns + _submitted_scripts(environ)):
        return args, None
    add, framework_name, how = _for_framework(argv, add, environ)
    added = missing_flags(argv, add)
    env = _env_of_interest(environ, json.loads(environ.get(ENV_ENV_PATTERNS, "[]")))
    return [*args, *added], ShimRecord(
        name, [*argv, *added], None, [w for w in added if w.startswith("--")], env, framework=framework_name, framework_how=how
    )


def main(argv: list[str]) -> None:
    """Entry point of a wrapper: `shim.py NAME ARGS...`."""
    name, args = argv[1], argv[2:]
    environ = os.environ
    real = _real_program(name, environ.get(ENV_DIR, ""), environ.get("PATH", ""))
    if real is None:
        sys.stderr.write(f"{name}: command not found (ledger's wrapper found no real {name} on PATH)\n")
        sys.exit(127)
    new_args = args
    try:
        new_args, record = rewrite(name, args, environ)
        if record is not None and environ.get(ENV_LOG):
            _append(environ[ENV_LOG], record)
    except Exception as exc:  # never break the job over a record
        new_args = args
        sys.stderr.write(f"ledger: wrapper for {name} could not record the command ({exc}); running it unchanged\n")
    os.execv(real, [real, *new_args])


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    main(sys.argv)
