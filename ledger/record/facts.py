"""The facts a run's record derives once the job has ended: the settings of the training command
it really ran, its per-step metrics, extra log files, and its DVC-tracked data. Each is called
through `recording._guarded`, so one failing never loses the run."""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger.capture import envvars, launcher, redact
from ledger.capture import settings as settings_mod
from ledger.capture.redact import Redactions
from ledger.capture.runscrub import add_redacted
from ledger.capture.scanner import Redactor
from ledger.config import Config
from ledger.fsutil import write_atomic
from ledger.manifest import run_path
from ledger.storage import staging
from ledger.storage.git import Repo

Say = Callable[[str], None]


def settings_section(m: dict[str, Any], cfg: Config, command_lines: list[str], job_argv: list[str]) -> None:
    """Fill command.training_argv, settings, seeds and env from what the job really ran."""
    found = launcher.find_training_command(command_lines, list(cfg.training_patterns))
    if found is not None:
        training_argv = list(found.argv)
        m["command"]["training_source"] = found.source
        m["command"]["ray_argv"] = redact.redact_argv(list(found.ray_argv), _extra(cfg))[0] if found.ray_argv else None
        runtime_env = found.runtime_env
    elif settings_mod.locate_training_command(job_argv) is not None:
        training_argv, runtime_env = list(job_argv), None
        m["command"]["training_source"] = "argv"
    else:
        training_argv, runtime_env = None, None
    settings: dict[str, Any] = {}
    if training_argv is not None:
        training_argv, names = redact.redact_argv(training_argv, _extra(cfg))
        add_redacted(m, (f"training_argv: {n}" for n in names))
        m["command"]["training_argv"] = training_argv
        settings.update(settings_mod.parse_settings(settings_mod.split_training_command(training_argv)[2]))
    if runtime_env is not None:
        env_vars: Any = runtime_env.get("env_vars") or {}
        safe_env, names = redact.redact_env({str(k): str(v) for k, v in dict(env_vars).items()}, _extra(cfg))
        m["command"]["runtime_env"] = {**runtime_env, "env_vars": safe_env}
        add_redacted(m, (f"runtime_env: {n}" for n in names))
    env = envvars.capture_env(os.environ, list(cfg.env_patterns))
    env_settings = envvars.env_settings(env, (m["command"]["runtime_env"] or {}))
    env_settings, names = redact.redact_env(env_settings, _extra(cfg))
    add_redacted(m, (f"env: {n}" for n in names))
    settings.update(env_settings)
    m["env_report"] = launcher.env_report(command_lines)
    m["seeds"] = {"seed": settings.get("seed"), "rollout_seed": settings.get("rollout-seed")}
    image = m["image"]
    settings["image.digest"] = image.get("digest")
    settings["image.miles_commit"] = image.get("miles_commit")
    settings["image.sglang_version"] = image.get("sglang_version")
    settings["code.commit"] = m["code"]["commit"]
    settings["code.patch"] = m["code"]["patch"]
    m["settings"] = dict(sorted(settings.items()))


def metrics(run_dir: Path, data_dir: Path, m: dict[str, Any]) -> None:
    from ledger.compare.logparse import merge, parse_events, parse_logs, write_metrics_jsonl

    table = parse_logs([run_dir / "trainer.log", run_dir / "engine.log"])
    events = data_dir / "events"
    if events.is_dir():
        table = merge(table, parse_events(events))
    if table.rows or table.train_steps:
        write_metrics_jsonl(run_dir / "metrics.jsonl", table)
        m["logs"]["metrics"] = "metrics.jsonl"
    if table.malformed:
        m["warnings"].append(f"{table.malformed} malformed metric lines in the logs")


def _extra(cfg: Config) -> frozenset[str]:
    return frozenset(n.upper() for n in cfg.secret_names)


def extra_logs(cfg: Config, root: Path, run_dir: Path, m: dict[str, Any], secrets: set[str]) -> None:
    copied = []
    for pattern in cfg.extra_logs:
        base = pattern if os.path.isabs(pattern) else str(root / pattern)
        for path in sorted(glob.glob(base, recursive=True))[:200]:
            p = Path(path)
            if p.is_file():
                dest = run_dir / "extra-logs" / p.name
                dest.parent.mkdir(exist_ok=True)
                acc = Redactions()
                Redactor(secrets, cfg.secret_names).redact_file(p, dest, acc)
                add_redacted(m, acc.at(f"extra-logs/{p.name}"))
                copied.append(f"extra-logs/{p.name}")
    m["logs"]["extra"] = copied


def data_entry(record: Any) -> dict[str, Any]:
    """A tracked output as the manifest lists it: not its machine-local source path, not the
    .dvc text (that file sits beside the manifest)."""
    return {k: v for k, v in record.__dict__.items() if k not in ("source", "dvc_text")}


def track_data(repo: Repo, staged: staging.Staged, m: dict[str, Any], say: Say) -> None:
    from ledger.data.outputs import find_outputs

    req = staged.read_json("request.json") or {}
    training_argv = m["command"].get("training_argv") or req.get("job_argv") or []
    outputs: list[tuple[str, Path, str]] = []
    for out in find_outputs(training_argv):
        path = Path(out.path)
        if not path.is_absolute():
            path = Path(m["command"]["cwd"]) / path
        outputs.append((out.role, path, out.template))
    for extra in req.get("data_paths") or []:
        p = Path(extra)
        outputs.append(("other", p if p.is_absolute() else Path(m["command"]["cwd"]) / p, extra))
    present = [(role, path, tmpl) for role, path, tmpl in outputs if path.exists()]
    if not present:
        return
    from ledger.data.dvcops import track_outputs

    records = track_outputs(repo.root, staged.run_dir, [(role, path) for role, path, _ in present], [staged.dir])
    data = []
    for rec, (_, _, tmpl) in zip(records, present):
        entry = data_entry(rec)
        # a template inside the run's own data folder is recorded relative to the run folder
        entry["template"] = tmpl.replace(str(staged.data_dir), "data", 1) if tmpl.startswith(str(staged.data_dir)) else tmpl
        data.append(entry)
        if entry.get("error"):
            say(f"ledger: data '{entry.get('role')}' not tracked: {entry['error']} (`ledger push` retries)")
    m["data"] = data


EXCERPT = 1 << 20  # bytes of head and of tail a big log keeps in git


def offload_big_logs(repo: Repo, cfg: Config, staged: staging.Staged, m: dict[str, Any], say: Say) -> None:
    """Track a trainer/engine log bigger than `logs: git_max_mb` with DVC, like bulky data.

    A 1 GiB log costs git ~9 s to store and every clone carries it forever; DVC hashes it in ~2 s
    and `dvc pull` brings it back on demand. The run folder keeps the log's first and last MiB in
    its place, so `git show`, `ledger diff`'s git diff and a quick look still work.
    """
    limit = cfg.log_git_max_mb * (1 << 20)
    big = [n for n in ("trainer.log", "engine.log") if (staged.run_dir / n).stat().st_size > limit]
    if not big:
        return
    if not (repo.root / ".dvc").is_dir():
        say(f"ledger: {', '.join(big)} over {cfg.log_git_max_mb:g} MB stay in git whole: no DVC here (`ledger init`)")
        return
    from ledger.data.dvcops import track_outputs

    dest = staged.data_dir / "logs"
    dest.mkdir(exist_ok=True)
    for name in big:
        full = dest / name
        os.replace(staged.run_dir / name, full)
        size = full.stat().st_size
        with open(full, "rb") as f:
            head = f.read(EXCERPT)
            f.seek(max(size - EXCERPT, EXCERPT))
            tail = f.read()
        note = (f"\n[ledger: {size - len(head) - len(tail)} bytes elided; the whole log is tracked with DVC as "
                f"data/logs/{name}: `ledger pull REMOTE {m['id']}` or `dvc pull -R {run_path(m['id'])}`]\n")
        write_atomic(staged.run_dir / name, head + note.encode() + tail)
    [record] = track_outputs(repo.root, staged.run_dir, [("logs", dest)], [staged.dir])
    if record.error:  # keep the whole logs in git rather than lose them
        for name in big:
            os.replace(dest / name, staged.run_dir / name)
        say(f"ledger: big logs not tracked with DVC ({record.error}); they stay in git whole")
        return
    entry = data_entry(record)
    entry["template"] = "data/logs"
    m["data"] = [*m["data"], entry]
    m["logs"]["in_dvc"] = big
