"""`ledger replay RUN`: re-run one side of a recorded run on exactly its recorded samples.

Security: the command comes from the repository, so it is shown before it runs, it is built as
an argv list (never a shell string), and run ids and data paths that escape the repository
(`..`, absolute paths, links out of the run folder) are refused.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.errors import DataError, LedgerError, RunNotFound, UsageError
from ledger.replay.command import build_replay_argv, parse_set
from ledger.replay.steps import file_name_template, link_steps, parse_steps
from ledger.runref import resolve
from ledger.storage import staging
from ledger.storage.git import Repo
from ledger.storage.listing import load_listing, parse_manifest
from ledger.storage.store import RunEntry, check_ledger_branch, read_file_at

Say = Callable[[str], None]
PLACEHOLDER = "\0LEDGER_RUN_DATA\0"


@dataclass
class ReplayOptions:
    run: str
    rollout_only: bool = False
    step: int | None = None
    steps: str | None = None
    sets: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    name: str | None = None
    dry_run: bool = False
    strict: bool = False
    in_image: bool = False
    force: bool = False  # --set may add a setting the run never had
    new_settings: tuple[str, ...] = ()  # settings --set may add without --force (`--seeds` sets `seed`)


@dataclass
class ReplayPlan:
    """What a replay will run, and where its samples come from."""

    source: str
    argv: list[str]
    cwd: Path
    mode: str
    steps: list[int] | None
    mapping: dict[int, int] | None
    data_dir: Path | None
    warnings: list[str]
    image: dict[str, Any] = field(default_factory=dict)
    # the recorded Ray runtime env's variables: a `ray job submit` run's trainer had them, and a
    # replay runs the trainer directly, so they are set for it (PYTHONPATH, NCCL_*, ...)
    env: dict[str, str] = field(default_factory=dict)


def _inside(root: Path, path: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def _rollout_record(m: dict[str, Any]) -> dict[str, Any] | None:
    for rec in m.get("data") or []:
        if isinstance(rec, dict) and rec.get("role") == "rollout":
            return dict(rec)
    return None


def _dvc_text(repo: Repo, entry: RunEntry, rec: dict[str, Any]) -> str:
    rel = rec.get("dvc_file") or "data/rollout.dvc"
    if rel.startswith("/") or ".." in Path(rel).parts:
        raise DataError(f"run {entry.id}: data file path {rel!r} escapes the run folder", "the record is not trusted")
    raw = read_file_at(repo, entry, rel)
    if raw is None:
        raise DataError(f"run {entry.id} lists rollout data but has no {rel}", "the record is damaged")
    return raw.decode()


def locate_data(repo: Repo, entry: RunEntry, rec: dict[str, Any], remote_hint: str, dry_run: bool = False) -> Path:
    """A verified local copy of the run's rollout data: in this checkout, or from the DVC cache.

    With `dry_run` nothing is written: data that is only in the DVC cache is not checked out (and
    so not verified); the folder it would go to is returned.
    """
    from ledger.data.dvcops import checkout_data, status_data, verify_data

    text = _dvc_text(repo, entry, rec)
    in_tree = repo.root / entry.path / (rec.get("path") or "data/rollout")
    pull = f"`ledger pull {remote_hint} {entry.id}` (or `dvc pull -R {entry.path}` in a checkout of the experiments branch)"
    if in_tree.is_dir() and any(in_tree.iterdir()):
        if not _inside(repo.root / entry.path, in_tree):
            raise DataError(f"run {entry.id}: its data folder links out of the run folder", "refusing to replay it")
        where = in_tree
    else:
        status = status_data(repo.root, text)
        if status != "cached":
            raise DataError(
                f"the rollout data of run {entry.id} is {'incomplete' if status == 'partial' else 'not here'}", f"fetch it with {pull}"
            )
        where = staging.ledger_dir(repo.root) / "replay-data" / entry.id / "rollout"
        if not where.exists():
            if dry_run:
                return where
            checkout_data(repo.root, text, where)
    for f in where.rglob("*"):
        if f.is_symlink() and not _inside(where, f):
            raise DataError(f"run {entry.id}: {f.name} links outside the data folder", "refusing to replay it")
    problems = verify_data(where, text, repo.root)
    if problems:
        raise DataError(
            f"the rollout data of run {entry.id} does not match its record: {problems[0]}"
            + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""),
            f"restore it with {pull}",
        )
    return where


def _environment_warnings(repo: Repo, m: dict[str, Any], opts: ReplayOptions) -> list[str]:
    """The recorded image / Miles / SGLang against what this replay will run on.

    Warnings by default; with `--strict` a different image digest or Miles commit is an error.
    """
    image = m.get("image") or {}
    hard: list[str] = []
    soft: list[str] = []
    if image.get("source") == "image":
        if not opts.in_image:
            hard.append(
                f"the run used image {image.get('ref')} ({image.get('digest') or image.get('id')}); "
                "this replay runs on the host (add --in-image to use that exact image)"
            )
    else:
        from ledger.capture.hostfacts import cached_host_facts, host_facts

        # a dry run writes nothing, not even the cache of this host's package versions
        now = (host_facts() if opts.dry_run else cached_host_facts(repo.common_dir / "ledger" / "host")).packages
        was = image.get("packages") or {}
        for pkg in ("sglang", "torch", "megatron-core", "miles"):
            if was.get(pkg) != now.get(pkg) and (was.get(pkg) or now.get(pkg)):
                (hard if pkg == "miles" else soft).append(
                    f"{pkg} was {was.get(pkg) or 'absent'} when recorded, is {now.get(pkg) or 'absent'} here"
                )
    head = repo.head_commit()
    recorded = (m.get("code") or {}).get("commit")
    if recorded and recorded != head:
        soft.append(f"the code is at {head[:10]}, the run was recorded at {recorded[:10]} (the replay runs this checkout's code)")
    if hard and opts.strict:
        raise LedgerError(hard[0], "drop --strict to replay anyway")
    return hard + soft


def _unknown_sets(run_id: str, sets: list[tuple[str, str]], recorded: dict[str, Any], force: bool) -> list[str]:
    """A `--set` of a setting the run never had is likely a typo: refused unless `force`."""
    import difflib

    warnings = []
    for key, _ in sets:
        name = key.lstrip("-")
        base = name[3:] if name.startswith("no-") else name
        if name in recorded or base in recorded or f"no-{name}" in recorded:
            continue
        close = difflib.get_close_matches(name, list(recorded), n=3)
        guess = f" (did you mean {', '.join(close)}?)" if close else ""
        if not force:
            raise UsageError(
                f"--set {name}: run {run_id} never had the setting '{name}'{guess}",
                "fix the name, or add --force to add a new setting to the replay",
            )
        warnings.append(f"--set {name} adds a setting run {run_id} never had{guess}")
    return warnings


def plan_replay(repo: Repo, tip: str, opts: ReplayOptions, remote_hint: str = "origin") -> ReplayPlan:
    """Resolve the run, check its data, and build the replay command (changes nothing)."""
    entry = resolve(repo, tip, opts.run, load_listing(repo, tip))
    raw = read_file_at(repo, entry, "manifest.yaml")
    if raw is None:
        raise LedgerError(f"run {entry.id} has no manifest", "the record is damaged")
    m = parse_manifest(raw, entry.path)
    training = (m.get("command") or {}).get("training_argv")
    if not training:
        raise UsageError(f"run {entry.id} has no recorded training command", "replay needs a run of `python3 train.py ...`")
    sets = [parse_set(s) for s in opts.sets]
    chosen = parse_steps(opts.step, opts.steps)
    warnings = _environment_warnings(repo, m, opts)
    rec_root = (m.get("command") or {}).get("repo_root")
    training = [_rebase_path(a, rec_root, repo.root) for a in training]
    env, hidden = _runtime_env(m)
    if hidden:
        warnings.append(
            f"run {entry.id}'s Ray runtime env had {', '.join(hidden)} redacted in the record; the replay takes them from your environment"
        )
    cwd_rel = (m.get("command") or {}).get("cwd_in_repo") or "."
    if os.path.isabs(cwd_rel) or ".." in Path(cwd_rel).parts:
        raise UsageError(f"run {entry.id} records a working directory outside the repository", "refusing to replay it")
    cwd = repo.root / cwd_rel
    # the replay's own debug outputs go to its own run folder, never into the original run's
    from ledger.understand.settings import parse_settings, split_training_command

    recorded = parse_settings(split_training_command(training)[2])
    warnings += _unknown_sets(entry.id, [s for s in sets if s[0].lstrip("-") not in opts.new_settings], recorded, opts.force)
    own = [k for k, _ in sets]
    if "save-debug-event-data" in recorded and "save-debug-event-data" not in own:
        sets.append(("save-debug-event-data", f"{PLACEHOLDER}/events"))
    if "dump-details" in recorded and "dump-details" not in own:
        sets.append(("dump-details", f"{PLACEHOLDER}/details"))
    if opts.rollout_only:
        argv = build_replay_argv(
            training,
            mode="rollout",
            save_template=f"{PLACEHOLDER}/rollout/{{rollout_id}}.pt",
            num_rollout=(max(chosen) + 1) if chosen else None,
            sets=sets,
            extra=opts.extra,
        )
        return ReplayPlan(entry.id, argv, cwd, "rollout", chosen, None, None, warnings, m.get("image") or {}, env)
    rec = _rollout_record(m)
    if rec is not None and not rec.get("tracked", rec.get("hash") is not None):
        raise DataError(
            f"the rollout data of run {entry.id} was never tracked: {rec.get('error') or 'unknown reason'}",
            "run `ledger init` (it sets up DVC) before recording runs you want to replay",
        )
    if rec is None:
        raise DataError(
            f"run {entry.id} has no recorded rollout data to replay",
            "record runs with --save-debug-rollout-data (ledger adds it unless --no-debug-data)",
        )
    data_dir = locate_data(repo, entry, rec, remote_hint, opts.dry_run)
    name_template = file_name_template(rec.get("template") or "{rollout_id}.pt")
    mapping = None
    if chosen is not None:
        links = staging.ledger_dir(repo.root) / "replay-data" / f"{entry.id}-steps-{'-'.join(map(str, chosen))}"
        mapping = dict(enumerate(chosen)) if opts.dry_run else link_steps(data_dir, name_template, chosen, links)
        load_dir, num = links, len(chosen)
    else:
        load_dir, num = data_dir, None
    argv = build_replay_argv(
        training, mode="train", load_template=str(load_dir / name_template), num_rollout=num, sets=sets, extra=opts.extra
    )
    return ReplayPlan(entry.id, argv, cwd, "train", chosen, mapping, data_dir, warnings, m.get("image") or {}, env)


def _runtime_env(m: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """The recorded runtime env's variables, and the names whose values were redacted."""
    from ledger.redact.names import MASK

    env_vars = ((m.get("command") or {}).get("runtime_env") or {}).get("env_vars") or {}
    if not isinstance(env_vars, dict):
        return {}, []
    hidden = sorted(str(k) for k, v in env_vars.items() if MASK in str(v))
    return {str(k): str(v) for k, v in env_vars.items() if MASK not in str(v)}, hidden


def _rebase_path(arg: str, recorded_root: str | None, root: Path) -> str:
    """Paths under the recorded repository root point into this checkout instead."""
    if recorded_root and arg.startswith(recorded_root.rstrip("/") + "/"):
        return str(root) + arg[len(recorded_root.rstrip("/")) :]
    return arg


def replay_run(
    start: Path,
    opts: ReplayOptions,
    say: Say,
    terminal_fd: int | None,
    stdout: Callable[[str], None],
    confirm: Callable[[str], bool] | None = None,
) -> int:
    """Plan the replay, show it, and record it as a run with `replay_of`.

    `confirm` (given on a terminal without `--yes`) is asked before the command runs; a no
    changes nothing and returns 0. A dry run prints the command and writes nothing at all.
    """
    from ledger.configload import load_config
    from ledger.record.run import RunRequest, record_run

    repo = Repo(start)
    cfg = load_config(repo.root, repo.common_dir)
    tip = check_ledger_branch(repo, cfg.branch)
    if tip is None:
        raise RunNotFound(f"no run named '{opts.run}': no runs recorded yet", "record one with `ledger run -- CMD`")
    plan = plan_replay(repo, tip, opts)
    shown = shlex.join([*(f"{k}={v}" for k, v in plan.env.items()), *(a.replace(PLACEHOLDER, "<new run data>") for a in plan.argv)])
    for w in plan.warnings:
        say(f"ledger: warning: {w}")
    if opts.dry_run:
        stdout(shown)
        return 0
    say(
        f"ledger: replaying {plan.source} ({plan.mode} side"
        + (f", rollouts {plan.steps} as 0..{len(plan.steps) - 1}" if plan.steps else "")
        + f"): {shown}"
    )
    if confirm is not None and not confirm("run this command?"):
        say("ledger: not replayed")
        return 0
    argv = list(plan.argv)
    if opts.in_image:
        argv = _in_image(repo.root, plan, argv)
    info = {
        "mode": plan.mode,
        "steps": plan.steps,
        "mapping": {str(k): v for k, v in plan.mapping.items()} if plan.mapping else None,
        "sets": opts.sets,
        "extra": opts.extra,
        "in_image": opts.in_image,
    }
    env = {**os.environ, **plan.env} if plan.env and not opts.in_image else None
    req = RunRequest(
        argv=argv, cwd=plan.cwd, name=opts.name, replay_of=plan.source, replay=info, debug_data=False, data_placeholder=PLACEHOLDER, env=env
    )
    return record_run(req, say, terminal_fd).exit_code


def _in_image(root: Path, plan: ReplayPlan, argv: list[str]) -> list[str]:
    """Wrap the replay in `docker run` of the recorded image, pinned by digest."""
    pinned = plan.image.get("digest") or plan.image.get("id")
    if not pinned:
        raise UsageError(f"run {plan.source} did not record an image", "replay without --in-image")
    ref = pinned if "@" in pinned or pinned.startswith("sha256:") else f"{plan.image.get('ref')}@{pinned}"
    env = [x for k, v in plan.env.items() for x in ("-e", f"{k}={v}")]
    return ["docker", "run", "--rm", "--gpus", "all", "-v", f"{root}:{root}", "-w", str(plan.cwd), *env, ref, *argv]
