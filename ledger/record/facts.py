"""The facts a run's record derives once the job has ended: the settings of the training command
it really ran, its per-step metrics and extra log files (its DVC-tracked data: `datatrack.py`).
Each is called through `ledger.record.derived.guarded`, so one failing never loses the run."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.config import Config
from ledger.redact import apply as redact
from ledger.redact.names import Redactions
from ledger.redact.scanner import Redactor
from ledger.runrecord import Code, Command, RunRecord, Seeds, replace
from ledger.timefmt import parse_iso
from ledger.understand import envvars, framework, launcher, seeddefaults, tracescan
from ledger.understand import settings as settings_mod
from ledger.understand.settings import Value
from ledger.understand.shim import ShimRecord

if TYPE_CHECKING:
    from ledger.record.streamed import StreamResult

Say = Callable[[str], None]


def _training_facts(
    command: Command, cfg: Config, command_lines: list[str], job_argv: list[str], records: list[ShimRecord]
) -> tuple[Command, list[str] | None, dict[str, object] | None]:
    """(the `command` section with `ray_argv` and `training_source`, the training argv, the runtime
    env) from the best source: the wrappers (exact), else the launcher's xtrace/EXEC lines, else the
    job's own argv."""
    patterns = list(cfg.training_patterns)
    found = launcher.find_training_command(command_lines, patterns)
    rays = [r for r in records if r.via == "ray"]
    direct = launcher.training_command_from_argv(job_argv, patterns)
    ray_argv, runtime_env = _ray_side(found, rays, direct)
    if ray_argv is not None:
        command = replace(command, ray_argv=redact.redact_argv(list(ray_argv), cfg.secret_env_names)[0])
    source, training_argv = _training_source(found, records, direct, job_argv)
    return (command if source is None else replace(command, training_source=source)), training_argv, runtime_env


def _ray_side(
    found: launcher.TrainingCommand | None, rays: list[ShimRecord], direct: launcher.TrainingCommand | None
) -> tuple[Sequence[str] | None, dict[str, object] | None]:
    """(the `ray job submit` argv, its runtime env): the ray wrapper's (exact), else the launcher's
    lines', else the job argv's own."""
    ray_argv = found.ray_argv if found is not None else None
    runtime_env = found.runtime_env if found is not None else None
    if rays:
        ray_argv = rays[-1].argv
        runtime_env = envvars.runtime_env_from_ray_argv(ray_argv)
    if direct is not None and ray_argv is None and direct.ray_argv is not None:
        return direct.ray_argv, direct.runtime_env
    return ray_argv, runtime_env


def _training_source(
    found: launcher.TrainingCommand | None, records: list[ShimRecord], direct: launcher.TrainingCommand | None, job_argv: list[str]
) -> tuple[str | None, list[str] | None]:
    """(`command.training_source`, the training argv), in the order of trust: a python wrapper's
    argv, the ray wrapper's entrypoint, the launcher's lines, the job argv."""
    wrapped = _wrapper_argv(records)
    if wrapped is not None:
        return "wrapper", wrapped
    if found is not None:
        return found.source, list(found.argv)
    if direct is not None:
        return "argv", list(direct.argv)
    if settings_mod.locate_training_command(job_argv) is not None:
        return "argv", list(job_argv)
    return None, None


def _wrapper_argv(records: list[ShimRecord]) -> list[str] | None:
    """The training argv the PATH wrappers saw: the last python's, else the last ray submission's entrypoint."""
    pythons = [r for r in records if r.via != "ray"]
    if pythons:
        return list(pythons[-1].argv)
    rays = [r for r in records if r.via == "ray"]
    return list(rays[-1].entrypoint) if rays and rays[-1].entrypoint else None


def _portable(value: str, repo_root: str | None) -> str:
    """A path-list value with this checkout's root written as `<repo>`, so two checkouts of the
    same code (PYTHONPATH=/home/a/x/src vs /home/b/x/src) do not look like a setting change."""
    if not repo_root or repo_root == "/":
        return value
    return re.sub(re.escape(repo_root.rstrip("/")) + r"(?=/|:|$)", "<repo>", value)


class TrainingFacts(msgspec.Struct, frozen=True):
    """What the training command the job really ran gives the record (`training_facts`)."""

    command: Command  # `training_argv`, `training_source`, `ray_argv`, `runtime_env`, `debug_data` set
    settings: dict[str, Value]  # `settings`, sorted by name
    seeds: Seeds  # `seeds`
    env_report: list[dict[str, object]]  # `env_report`
    redacted: list[str]  # entries for `redacted`
    warnings: list[str]  # for `warnings`

    def applied(self, record: RunRecord) -> RunRecord:
        """The record with them set (the record's `finish`, `ledger tail`'s and `diff --partial`'s view)."""
        return replace(
            record,
            redacted=sorted({*record.redacted, *self.redacted}),
            command=self.command,
            env_report=self.env_report,
            seeds=self.seeds,
            warnings=[*record.warnings, *self.warnings],
            settings=self.settings,
        )


def training_facts(
    record: RunRecord,
    cfg: Config,
    command_lines: list[str],
    job_argv: list[str],
    records: list[ShimRecord] | None = None,
    environ: Mapping[str, str] | None = None,
) -> TrainingFacts:
    """The training argv, settings, seeds and env from what the job really ran."""
    records = records or []
    redacted: list[str] = []
    command, training_argv, runtime_env = _training_facts(record.command, cfg, command_lines, job_argv, records)
    settings: dict[str, Value] = {}
    if training_argv is not None:
        training_argv, names = redact.redact_argv(training_argv, cfg.secret_env_names)
        redacted.extend(f"training_argv: {n}" for n in names)
        command = replace(command, training_argv=training_argv)
        settings.update(settings_mod.parse_settings(settings_mod.split_training_command(training_argv)[2]))
    if runtime_env is not None:
        env_vars: Any = runtime_env.get("env_vars") or {}
        safe_env, names = redact.redact_env({str(k): str(v) for k, v in dict(env_vars).items()}, cfg.secret_env_names)
        command = replace(command, runtime_env={**runtime_env, "env_vars": safe_env})
        redacted.extend(f"runtime_env: {n}" for n in names)
    env_settings, names = _env_settings(command, cfg, command_lines, records, environ)
    redacted.extend(f"env: {n}" for n in names)
    settings.update(env_settings)
    seeds = _seeds(settings, command, training_argv, record)
    command, warning = _debug_data_reached(command, records, training_argv)
    settings = _with_record_facts(settings, record, command, cfg, records, training_argv is not None)
    return TrainingFacts(command, settings, seeds, launcher.env_report(command_lines), redacted, [warning] if warning else [])


def _seeds(settings: Mapping[str, Value], command: Command, training_argv: list[str] | None, record: RunRecord) -> Seeds:
    """`seeds`: the seed settings the command passed; those it did not pass are the framework's
    defaults (`ledger.understand.seeddefaults`), named in `seeds.defaults`."""
    passed = {key: settings.get(flag[2:]) for key, flag in seeddefaults.SEED_FLAGS.items()}
    missing = [key for key, flag in seeddefaults.SEED_FLAGS.items() if flag[2:] not in settings]
    if training_argv is None or not missing:
        return Seeds.from_dict(passed, "manifest", "seeds")
    framework, script = _trainer(command, training_argv, record)
    found = seeddefaults.seed_defaults(framework, script, missing, str(command.repo_root or ""))
    if not found.values:
        return Seeds.from_dict(passed, "manifest", "seeds")
    return Seeds.from_dict({**passed, **found.values, "defaults": found.sources}, "manifest", "seeds")


def _trainer(command: Command, training_argv: list[str], record: RunRecord) -> tuple[str | None, Path | None]:
    """(the trainer's framework, its script file) of a training argv: as `command.debug_data`
    says, else as `ledger.understand.framework` recognises it; `-m miles.train` names no file."""
    prefix, script, _ = settings_mod.split_training_command(training_argv)
    if script is None:
        return None, None
    if prefix[-1:] == ["-m"]:
        return script.split(".", 1)[0], None
    cwd = str(command.cwd or ".")
    recorded = (command.debug_data or {}).get("framework")
    if isinstance(recorded, str) and recorded in seeddefaults.TABLE:
        return recorded, Path(cwd, script)

    return framework.detect(script, cwd, None, bool(record.image.miles_commit))[0], Path(cwd, script)


def _env_settings(
    command: Command, cfg: Config, command_lines: list[str], records: list[ShimRecord], environ: Mapping[str, str] | None
) -> tuple[dict[str, str], list[str]]:
    """The `env.*` settings (redacted) and the names hidden: the trainer's own environment when a
    wrapper saw it, else ledger's plus the launcher's exports; never what ledger itself set."""
    env = envvars.capture_env(_trainer_env(command, command_lines, records, environ), list(cfg.env_patterns))
    env_settings = envvars.env_settings(env, dict(command.runtime_env or {}))
    env_settings = {k: _portable(v, command.repo_root) for k, v in env_settings.items()}
    return redact.redact_env(env_settings, cfg.secret_env_names)


def _trainer_env(
    command: Command, command_lines: list[str], records: list[ShimRecord], environ: Mapping[str, str] | None
) -> dict[str, str]:
    """The trainer's environment: as the last python wrapper saw it, else ledger's own (`environ`)
    with the launcher's exports; less what ledger itself set (recorded apart, not as settings)."""
    pythons = [r for r in records if r.via != "ray"]
    env = dict(pythons[-1].env) if pythons else dict(os.environ if environ is None else environ)
    for name in command.ledger_env or {}:
        env.pop(name, None)  # what ledger itself set is recorded apart, not as a setting
    if not pythons:
        env.update(tracescan.exported_env(command_lines))
    return env


def _with_record_facts(
    settings: dict[str, Value], record: RunRecord, command: Command, cfg: Config, records: list[ShimRecord], command_found: bool
) -> dict[str, Value]:
    """`settings` with the image's and the code's, less what ledger itself set; sorted by name."""
    image = record.image
    out: dict[str, Value] = {
        **settings,
        "image.digest": image.digest,
        "image.miles_commit": image.miles_commit,
        "image.sglang_version": image.sglang_version,
    }
    out.update(code_settings(command, record.code, command_found))
    for name in ledger_set(record.id, command, cfg, out, records):
        out.pop(name, None)
    for path, sub in (record.code.submodules or {}).items():  # its gitlink is in the tree; its edits are not
        if sub.get("dirty"):
            out[f"code.submodule.{path}"] = sub.get("patch")
    from ledger.record.codeset import counts

    for path, big in (record.code.large_files or {}).items():  # HEAD's version is in the tree; its own id is here
        if isinstance(big, Mapping) and counts(path, cfg.code.ignore):
            out[f"code.large.{path}"] = big.get("oid") or f"{big.get('size')} bytes, {big.get('mtime')}"
    return dict(sorted(out.items()))


def code_settings(command: Command, code: Code, command_found: bool) -> dict[str, Value]:
    """`code` (the content of the files that count, `ledger.record.codeset`) and `command.entry`.

    With the training command found, the launcher and its inputs are left out of `code`: their
    effect is in the settings. A staged run from before `code.content` existed keeps the old keys."""
    out: dict[str, Value] = {settings_mod.ENTRY_SETTING: settings_mod.entry_point(command.to_dict())}
    if code.content_without_launcher and command_found:
        out["code"] = code.content_without_launcher
    elif code.content:
        out["code"] = code.content
    else:
        out["code.commit"], out["code.patch"] = code.commit, code.patch
    return out


def ledger_set(
    run_id: str, command: Command, cfg: Config, settings: Mapping[str, Value], records: list[ShimRecord] | None = None
) -> list[str]:
    """The `env.` settings that are variables ledger itself set for the job:
    never settings, on any path (the trainer's env, the launcher's exports, the runtime env the
    ray wrapper extended). A run staged before `command.ledger_env` was written (`ledger
    recover`) falls back to the configured job variables, where the value is ledger's."""
    recorded = command.ledger_env
    ours: dict[str, object] = dict(recorded) if recorded else {"LEDGER_RUN_ID": run_id, **cfg.job_env}
    ours.pop("PATH", None)
    names = [f"{envvars.ENV_PREFIX}{name}" for name in ours]
    found = [n for n in names if n in settings and (recorded or str(settings[n]) == str(ours[n[len(envvars.ENV_PREFIX) :]]))]
    # what the ray wrapper itself put in a runtime env
    found += [f"{envvars.ENV_PREFIX}{name}" for r in records or [] for name in r.job_env_added]
    return found


def _debug_data_reached(command: Command, records: list[ShimRecord], training_argv: list[str] | None) -> tuple[Command, str | None]:
    """How the debug-data flags reached the trainer (`command.debug_data`), and a warning when they did not."""
    debug = command.debug_data
    if not debug or debug.get("via") != "wrapper":
        return command, None
    debug = {**debug, "added": sorted({flag for r in records for flag in r.added})}
    if not _flags_reached(str(debug.get("framework")), training_argv):
        debug["via"] = None
        return replace(command, debug_data=debug), "the debug-data flags did not reach the training command: this run cannot be replayed"
    return replace(command, debug_data=debug), None


def _flags_reached(name: str, training_argv: list[str] | None) -> bool:
    """Whether the training command has the debug-data flags of its framework (`name`): those it
    has (slime: the rollout flag alone), or the rollout flag, which a replay needs, for a
    framework that declares none of its own; `--dump-details` does too."""
    if training_argv is None:
        return False
    from ledger.data.outputs import ROLLOUT_FLAG, find_outputs

    present = {o.flag for o in find_outputs(training_argv)}
    wanted = set(framework.FLAGS.get(name, ())) or {ROLLOUT_FLAG}
    return wanted <= present or "--dump-details" in present


def metrics(
    run_dir: Path, data_dir: Path, logs: StreamResult, command: Command, started: str | None, environ: Mapping[str, str] | None, say: Say
) -> tuple[str | None, list[str]]:
    """`metrics.jsonl` from the log metrics the log work parsed (the log worker writes it itself,
    with the run's own metric events, and carries back only the outcome), merged with the metric
    files the run wrote (`ledger.record.metricsources`). Returns (`logs.metrics`: the file name or
    None, warnings). A run with no per-step metrics says so, naming the formats ledger reads."""
    from ledger.metrics.jsonl import read_metrics_jsonl, write_metrics_jsonl, write_run_metrics
    from ledger.metrics.table import NO_METRICS, MetricsTable
    from ledger.record.metricsources import find_sources, with_metric_files

    extra = find_sources(command, data_dir, os.environ if environ is None else environ, parse_iso(started))
    if logs.metrics is None:
        written, malformed = logs.metrics_written, logs.malformed
    else:
        written, malformed, _ = write_run_metrics(run_dir, data_dir, logs.metrics)
    warnings = [f"{malformed} malformed metric lines in the logs"] if malformed else []
    if extra:
        table = read_metrics_jsonl(run_dir / "metrics.jsonl") if written else MetricsTable()
        table, more = with_metric_files(table, extra)
        for warning in more:
            say(f"ledger: {warning}")
        warnings += more
        if table.has_metrics():
            write_metrics_jsonl(run_dir / "metrics.jsonl", table)
            written = True
    if not written:
        say(f"ledger: {NO_METRICS}")
    return ("metrics.jsonl" if written else None), warnings


def extra_logs(cfg: Config, root: Path, run_dir: Path, secrets: set[str]) -> tuple[list[str], list[str]]:
    """Copy the `logs: extra` files into `extra-logs/`, redacted: (`logs.extra`, what was redacted)."""
    copied, redacted = [], []
    for pattern in cfg.logs.extra:
        base = pattern if os.path.isabs(pattern) else str(root / pattern)
        for path in sorted(glob.glob(base, recursive=True))[:200]:
            p = Path(path)
            if p.is_file():
                dest = run_dir / "extra-logs" / p.name
                dest.parent.mkdir(exist_ok=True)
                acc = Redactions()
                Redactor(secrets, cfg.secrets.names).redact_file(p, dest, acc)
                redacted.extend(acc.at(f"extra-logs/{p.name}"))
                copied.append(f"extra-logs/{p.name}")
    return copied, redacted
