"""`ledger replay RUN`: re-run one side of a recorded run on exactly its recorded samples.

Security: the command comes from the repository, so it is shown before it runs, it is built as
an argv list (never a shell string), and run ids and data paths that escape the repository
(`..`, absolute paths, links out of the run folder) are refused. Nothing is written before the
user said yes: the plan only reads, its `prepare` step checks the data out afterwards. A run
recorded in another clone needs `--yes` without a terminal, and its recorded environment is
filtered (`trust.py`).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.errors import DataError, LedgerError, RunNotFound, StartError, UsageError
from ledger.replay import raylaunch, trust
from ledger.replay.command import build_replay_argv, parse_set
from ledger.replay.steps import file_name_template, link_steps, parse_steps
from ledger.runrecord import UNSET, DataEntry, Image, RunRecord
from ledger.runref import check_run_name, own_runs, resolve, shared_name_note
from ledger.storage import staging
from ledger.storage.git import Repo
from ledger.storage.listing import load_listing, parse_record
from ledger.storage.store import RunEntry, check_ledger_branch, dvc_text, read_file_at
from ledger.understand.settings import flag_groups, parse_settings, split_training_command

if TYPE_CHECKING:
    from ledger.record.run import RunRequest

Say = Callable[[str], None]
Confirm = Callable[[str, bool], bool]  # (question, the answer Enter gives) -> yes
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
    yes: bool = False  # --yes: replay without asking, also a run recorded in another clone
    trust_env: bool = False  # --trust-env: take recorded variables that load code too
    address: str | None = None  # a ray-submitted run: the Ray Job API to replay on (raylaunch)
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
    image: Image = field(default_factory=Image)
    # the recorded Ray runtime env's variables: a `ray job submit` run's trainer had them, and a
    # replay runs the trainer directly, so they are set for it (PYTHONPATH, NCCL_*, ...)
    env: dict[str, str] = field(default_factory=dict)
    env_dropped: dict[str, str] = field(default_factory=dict)  # recorded variables left out, and why
    prepare: Callable[[], None] | None = None  # writes the data the argv names (after the yes)
    foreign: str | None = None  # who made the run commit, when this clone did not record the run
    record: RunRecord = field(default_factory=RunRecord)  # the source run's record (where it ran)
    script: Path | None = None  # the training script the replay runs, resolved in this checkout
    module: str | None = None  # or the `-m` module, imported from `cwd` first


def _inside(root: Path, path: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def _rollout_record(record: RunRecord) -> DataEntry | None:
    return next((d for d in record.data if d.role == "rollout"), None)


def _dvc_text(repo: Repo, entry: RunEntry, rec: DataEntry) -> str:
    rel = rec.dvc_file or "data/rollout.dvc"
    if rel.startswith("/") or ".." in Path(rel).parts:
        raise DataError(f"run {entry.id}: data file path {rel!r} escapes the run folder", "the record is not trusted")
    raw = read_file_at(repo, entry, rel, DataError)
    if raw is None:
        raise DataError(f"run {entry.id} lists rollout data but has no {rel}", "the record is damaged")
    return dvc_text(raw, f"{entry.path}/{rel}")


REPLAY_DATA = ("replay-data",)


def _replay_data(repo: Repo, *parts: str) -> Path:
    return repo.root / staging.LEDGER_DIR / REPLAY_DATA[0] / Path(*parts)


def locate_data(repo: Repo, entry: RunEntry, rec: DataEntry, remote_hint: str, dry_run: bool = False) -> Path:
    """A verified local copy of the run's rollout data: in this checkout, or from the DVC cache.

    With `dry_run` nothing is written: data that is only in the DVC cache is not checked out (and
    so not verified, but its listing's paths and hash are checked); the folder it would go to is
    returned.
    """
    from ledger.data.dvcops import checkout_data, status_data, verify_data

    text = _dvc_text(repo, entry, rec)
    in_tree = repo.root / entry.path / (rec.path or "data/rollout")
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
        where = _replay_data(repo, entry.id, "rollout")
        if not where.exists():
            if dry_run:  # status_data has checked the listing's paths and hash already
                return where
            _nofollow_dirs(repo, entry.id)
            checkout_data(repo.root, text, where, root=repo.root)
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


def _nofollow_dirs(repo: Repo, *parts: str) -> None:
    """Create `.ledger/replay-data/<parts>` without following a link a pulled tree could plant."""
    from ledger.data.dirpaths import open_dir

    os.close(open_dir(repo.root, [staging.LEDGER_DIR, *REPLAY_DATA, *parts], create=True))
    staging.ledger_dir(repo.root)  # its .gitignore


def _environment_warnings(repo: Repo, record: RunRecord, opts: ReplayOptions) -> list[str]:
    """The recorded image / Miles / SGLang against what this replay will run on.

    Warnings by default; with `--strict` a different image digest or Miles commit is an error.
    """
    image = record.image
    hard: list[str] = []
    soft: list[str] = []
    if image.source == "image":
        if not opts.in_image:
            hard.append(
                f"the run used image {image.ref} ({image.digest or image.id}); "
                "this replay runs on the host (add --in-image to use that exact image)"
            )
    else:
        from ledger.capture.hostfacts import cached_host_facts, host_facts

        # a dry run writes nothing, not even the cache of this host's package versions
        now = (host_facts() if opts.dry_run else cached_host_facts(repo.common_dir / "ledger" / "host")).packages
        was = image.packages
        for pkg in ("sglang", "torch", "megatron-core", "miles"):
            if was.get(pkg) != now.get(pkg) and (was.get(pkg) or now.get(pkg)):
                (hard if pkg == "miles" else soft).append(
                    f"{pkg} was {was.get(pkg) or 'absent'} when recorded, is {now.get(pkg) or 'absent'} here"
                )
    head = repo.head_commit()
    recorded = record.code.commit
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


@dataclass(frozen=True)
class _Checked:
    """A run to replay, checked: its record, its command (rebased onto this checkout), where it
    runs, the replay's settings and steps, and the environment the replay sets."""

    entry: RunEntry
    record: RunRecord
    training: list[str]
    code: trust.CodePaths
    sets: list[tuple[str, str]]
    chosen: list[int] | None
    warnings: list[str]
    env: trust.EnvChoice
    foreign: str | None

    def plan(
        self,
        argv: list[str],
        mode: str,
        mapping: dict[int, int] | None = None,
        data_dir: Path | None = None,
        prepare: Callable[[], None] | None = None,
    ) -> ReplayPlan:
        return ReplayPlan(
            self.entry.id,
            argv,
            self.code.cwd,
            mode,
            self.chosen,
            mapping,
            data_dir,
            warnings=self.warnings,
            image=self.record.image,
            env=self.env.taken,
            env_dropped=self.env.dropped,
            foreign=self.foreign,
            record=self.record,
            prepare=prepare,
            script=self.code.script,
            module=self.code.module,
        )


def plan_replay(repo: Repo, tip: str, opts: ReplayOptions, remote_hint: str = "origin") -> ReplayPlan:
    """Resolve the run, check its data, and build the replay command (changes nothing)."""
    run = _check_run(repo, tip, opts)
    if opts.rollout_only:
        argv = build_replay_argv(
            run.training,
            mode="rollout",
            save_template=f"{PLACEHOLDER}/rollout/{{rollout_id}}.pt",
            num_rollout=(max(run.chosen) + 1) if run.chosen else None,
            sets=run.sets,
            extra=opts.extra,
        )
        return run.plan(argv, "rollout")
    return _train_side(repo, run, opts, remote_hint)


def _check_run(repo: Repo, tip: str, opts: ReplayOptions) -> _Checked:
    """Everything a replay of either side needs, checked in this order: the run and its command,
    `--set`/`--step(s)`, the environment, code that came with pulled data, the working directory,
    the settings `--set` names."""
    listing = load_listing(repo, tip)
    entry = resolve(repo, tip, opts.run, listing)
    raw = read_file_at(repo, entry, "manifest.yaml")
    if raw is None:
        raise LedgerError(f"run {entry.id} has no manifest", "the record is damaged")
    record = parse_record(raw, entry.path)[0]
    command = record.command
    training = command.training_argv
    if not training:
        raise UsageError(f"run {entry.id} has no recorded training command", "replay needs a run of `python3 train.py ...`")
    sets = [parse_set(s) for s in opts.sets]
    chosen = parse_steps(opts.step, opts.steps)
    warnings = _environment_warnings(repo, record, opts)
    training = [_rebase_path(a, command.repo_root, repo.root) for a in training]
    recorded_env, hidden = _runtime_env(record)
    choice = trust.choose_env(repo, recorded_env, opts.trust_env)
    foreign = None if trust.own_run(repo, entry.id) else trust.identity(repo, tip, entry)

    shared = shared_name_note(repo, tip, listing, entry, own_runs(repo, trust.branch_of(repo)))
    if shared:
        warnings.append(shared)
    code = trust.check_code_paths(repo, training, str(command.cwd_in_repo or "."), entry.id, opts.in_image)
    if hidden:
        warnings.append(
            f"run {entry.id}'s Ray runtime env had {', '.join(hidden)} redacted in the record; the replay takes them from your environment"
        )

    training = _only_framework_flags(training, record)
    recorded = parse_settings(split_training_command(training)[2])
    warnings += _unknown_sets(entry.id, [s for s in sets if s[0].lstrip("-") not in opts.new_settings], recorded, opts.force)
    sets += _own_outputs(recorded, [k for k, _ in sets])
    return _Checked(entry, record, training, code, sets, chosen, warnings, choice, foreign)


def _own_outputs(recorded: dict[str, Any], own: list[str]) -> list[tuple[str, str]]:
    """The replay's own debug outputs go to its own run folder, never into the original run's."""
    out = []
    if "save-debug-event-data" in recorded and "save-debug-event-data" not in own:
        out.append(("save-debug-event-data", f"{PLACEHOLDER}/events"))
    if "dump-details" in recorded and "dump-details" not in own:
        out.append(("dump-details", f"{PLACEHOLDER}/details"))
    return out


def _train_side(repo: Repo, run: _Checked, opts: ReplayOptions, remote_hint: str) -> ReplayPlan:
    """The training side on the recorded samples: the data must have been tracked; the chosen
    steps are linked as 0..N-1 in a folder of the replay's own, after the user said yes."""
    entry, chosen = run.entry, run.chosen
    rec = _rollout_record(run.record)
    # a record from before `tracked` existed says it by its hash
    if rec is not None and not (rec.hash is not None if rec.tracked is UNSET else rec.tracked):
        raise DataError(
            f"the rollout data of run {entry.id} was never tracked: {rec.error or 'unknown reason'}",
            "run `ledger init` (it sets up DVC) before recording runs you want to replay",
        )
    if rec is None:
        raise DataError(
            f"run {entry.id} has no recorded rollout data to replay",
            "record runs with --save-debug-rollout-data (ledger adds it unless --no-debug-data)",
        )
    # only reads: the data is checked out by `prepare`, once the user said yes
    data_dir = locate_data(repo, entry, rec, remote_hint, dry_run=True)
    name_template = file_name_template(rec.template or "{rollout_id}.pt")
    mapping = None
    steps_name = f"{entry.id}-steps-{'-'.join(map(str, chosen))}" if chosen is not None else ""
    if chosen is not None:
        links = _replay_data(repo, steps_name)
        if opts.dry_run:
            _check_steps_recorded(entry.id, rec, data_dir, name_template, chosen)
        mapping = dict(enumerate(chosen))
        load_dir, num = links, len(chosen)
    else:
        load_dir, num = data_dir, None

    def prepare() -> None:
        where = locate_data(repo, entry, rec, remote_hint)
        if chosen is not None:
            _nofollow_dirs(repo, steps_name)
            link_steps(where, name_template, chosen, links)

    argv = build_replay_argv(
        run.training, mode="train", load_template=str(load_dir / name_template), num_rollout=num, sets=run.sets, extra=opts.extra
    )
    return run.plan(argv, "train", mapping=mapping, data_dir=data_dir, prepare=prepare)


def _check_steps_recorded(run_id: str, rec: DataEntry, data_dir: Path, name_template: str, chosen: list[int]) -> None:
    """A dry run refuses steps that are not in the recorded data, as the replay itself would."""
    ids = rec.rollout_ids
    if ids is not UNSET:
        have = {str(i) for i in ids}
        recorded = ", ".join(str(i) for i in ids[:20]) + (" ..." if len(ids) > 20 else "")
    elif data_dir.is_dir():
        have = {str(i) for i in chosen if (data_dir / name_template.format(rollout_id=i)).is_file()}
        recorded = "see `ledger show " + run_id + "`"
    else:
        return  # only in the DVC cache, not checked out by a dry run: the replay checks
    missing = [i for i in chosen if str(i) not in have]
    if missing:
        raise DataError(f"rollout {missing[0]} is not in the recorded data of run {run_id} (recorded: {recorded})", "pick steps that exist")


def _only_framework_flags(training: list[str], record: RunRecord) -> list[str]:
    """The recorded command without debug flags its trainer's framework does not have (a slime
    run recorded by an older ledger carries `--save-debug-event-data`, which slime lacks)."""
    from ledger.understand.framework import FLAGS

    name = (record.command.debug_data or {}).get("framework")
    if name not in FLAGS:
        return training
    lacking = {f[2:] for f in FLAGS["miles"] if f not in FLAGS[name]}
    prefix, script, args = split_training_command(training)
    if script is None:
        return training
    kept = [t for g in flag_groups(args) if g.name not in lacking for t in g.tokens]
    return [*prefix, script, *kept]


def _runtime_env(record: RunRecord) -> tuple[dict[str, str], list[str]]:
    """The recorded runtime env's variables, and the names whose values were redacted."""
    from ledger.redact.names import MASK

    env_vars = (record.command.runtime_env or {}).get("env_vars") or {}
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
    confirm: Confirm | None = None,
) -> int:
    """Plan the replay, show it, and record it as a run with `replay_of`.

    `confirm` (given on a terminal without `--yes`) is asked before the command runs; a no
    changes nothing and returns 0. Its default (Enter) is yes for this clone's own runs, no for a
    run recorded elsewhere. A dry run prints the command and writes nothing at all.
    """
    from ledger.configload import load_config
    from ledger.record.run import record_run

    if opts.name is not None:  # at the door: before the plan reads, checks out or asks anything
        try:
            check_run_name(opts.name)
        except UsageError as exc:
            raise StartError(exc.message, exc.hint) from exc
    repo = Repo(start)
    cfg = load_config(repo.root, repo.common_dir)
    tip = check_ledger_branch(repo, cfg.branch)
    if tip is None:
        raise RunNotFound(f"no run named '{opts.run}': no runs recorded yet", "record one with `ledger run -- CMD`")
    plan = plan_replay(repo, tip, opts)

    target = _ray_target(repo, plan, opts, say) if raylaunch.was_submitted(plan.record) and not opts.in_image else None
    shown = _shown(plan, target)
    _say_warnings(plan, say)
    say(f"ledger: the replay runs in {plan.cwd}; {_code_line(plan)}")
    if opts.dry_run:
        stdout(shown)
        return 0
    if plan.foreign and confirm is None and not opts.yes:
        raise UsageError(
            f"run {plan.source} was recorded in another clone (by {plan.foreign}); without a terminal to ask, replaying it needs --yes",
            "read its command with --dry-run, then add --yes",
        )
    say(
        f"ledger: replaying {plan.source} ({plan.mode} side"
        + (f", rollouts {plan.steps} as 0..{len(plan.steps) - 1}" if plan.steps else "")
        + f"): {shown}"
    )
    if confirm is not None and not confirm("run this command?", plan.foreign is None):
        say("ledger: not replayed")
        return 0
    if plan.prepare is not None:
        plan.prepare()
    argv = list(plan.argv)
    if opts.in_image:
        argv = _in_image(repo.root, plan, argv)
    info = _replay_section(plan, opts)
    env = {**os.environ, **plan.env} if plan.env and not opts.in_image else None
    if target is not None:
        return _replay_on_ray(plan, opts, target, info, say, terminal_fd)
    return record_run(_request(plan, opts, info, argv, env), say, terminal_fd).exit_code


def _request(plan: ReplayPlan, opts: ReplayOptions, info: dict[str, Any], argv: list[str], env: dict[str, str] | None = None) -> RunRequest:
    """The replay as a run to record: `argv` in the recorded working directory, with its `replay:`
    section (`info`) and no debug-data flags of its own."""
    from ledger.record.run import RunRequest

    return RunRequest(
        argv=argv,
        cwd=plan.cwd,
        name=opts.name,
        replay_of=plan.source,
        replay=info,
        debug_data=False,
        data_placeholder=PLACEHOLDER,
        env=env,
        code_left_out=list(info.get("code_left_out") or []),
    )


def _code_line(plan: ReplayPlan) -> str:
    """What the replay executes, as resolved in this checkout."""
    if plan.script is not None:
        return f"it runs the script {plan.script}"
    if plan.module is not None:
        return f"it runs the module {plan.module} (imported from that folder first)"
    return f"it runs {plan.argv[0] if plan.argv else 'nothing'}"


def _shown(plan: ReplayPlan, target: Any) -> str:
    """The command as the user is shown it: with the variables the replay sets, or as submitted to Ray."""
    if target is not None:
        return shlex.join(a.replace(PLACEHOLDER, "<new run data>") for a in raylaunch.submit_argv(target, plan.argv))
    return shlex.join([*(f"{k}={v}" for k, v in plan.env.items()), *(a.replace(PLACEHOLDER, "<new run data>") for a in plan.argv)])


def _say_warnings(plan: ReplayPlan, say: Say) -> None:
    """The plan's warnings, whose run it is, and every variable the replay sets or leaves out."""
    for w in plan.warnings:
        say(f"ledger: warning: {w}")
    if plan.foreign:
        say(f"ledger: run {plan.source} was recorded in another clone (by {plan.foreign}): its command and environment are someone else's")
    for name, value in plan.env.items():
        say(f"ledger: the replay sets {name}={value} (recorded in the run)")
    if plan.foreign or plan.env or plan.env_dropped:
        say(
            "ledger: as for every run, ledger also sets LEDGER_RUN_ID, RAY_DEDUP_LOGS and PATH (its wrappers first) "
            "and the `job_env` of your .ledger.yaml"
        )
    if plan.env_dropped:
        say("ledger: recorded variables not set: " + "; ".join(f"{k} ({why})" for k, why in plan.env_dropped.items()))


def _replay_section(plan: ReplayPlan, opts: ReplayOptions) -> dict[str, Any]:
    """The new run's `replay:` section: what was replayed, and how."""
    info: dict[str, Any] = {
        "mode": plan.mode,
        "steps": plan.steps,
        "mapping": {str(k): v for k, v in plan.mapping.items()} if plan.mapping else None,
        "sets": opts.sets,
        "extra": opts.extra,
        "in_image": opts.in_image,
    }
    left_out = _code_left_out(plan)
    if left_out:
        info["code_left_out"] = left_out
    return info


def _code_left_out(plan: ReplayPlan) -> list[str]:
    """The files the source run's `code` left out as its launcher's: the replay reruns the
    command they shaped, never them, so they leave the replay's `code` too."""
    from ledger.record.codeset import left_out_of_run

    return sorted(left_out_of_run(plan.record)[1])


def _ray_target(repo: Repo, plan: ReplayPlan, opts: ReplayOptions, say: Say) -> Any:
    """Where a replay of a ray-submitted run goes, with its runtime env (`raylaunch`); starts nothing."""
    rec_root = plan.record.command.repo_root
    target = raylaunch.choose_target(plan.record, opts.address, plan.cwd, say, dry_run=True)
    excludes = trust.upload_excludes(repo, plan.cwd)
    rebase = lambda p: _rebase_path(p, rec_root, repo.root)  # noqa: E731
    target.runtime_env, target.code_from = raylaunch.runtime_env(plan.record, plan.env, rebase, plan.cwd, excludes)
    trust.check_runtime_paths(repo, target.runtime_env, plan.cwd, plan.source)
    return target


def _replay_on_ray(plan: ReplayPlan, opts: ReplayOptions, target: Any, info: dict[str, Any], say: Say, terminal_fd: int | None) -> int:
    """Submit the replay to Ray (a local head started for it when none answers), record it, and
    stop that head after it."""
    from ledger.record.run import record_run

    _, hidden = _runtime_env(plan.record)  # redacted in the record: taken from this environment
    missing = {k: os.environ[k] for k in hidden if k in os.environ}
    if missing:
        target.runtime_env.setdefault("env_vars", {}).update(missing)
    if target.how == "local head started by ledger":
        target = raylaunch.RayTarget("", target.how, target.runtime_env, raylaunch.LocalHead(plan.cwd, say), target.code_from)
        assert target.head is not None
        target.address = target.head.url
    info["ray"] = target.to_record()
    try:
        return record_run(_request(plan, opts, info, raylaunch.submit_argv(target, plan.argv)), say, terminal_fd).exit_code
    finally:
        if target.head is not None:
            say(f"ledger: stopping the local Ray head ledger started for the replay ({target.address})")
            target.head.stop()


def _in_image(root: Path, plan: ReplayPlan, argv: list[str]) -> list[str]:
    """Wrap the replay in `docker run` of the recorded image, pinned by digest."""
    pinned = plan.image.digest or plan.image.id
    if not pinned:
        raise UsageError(f"run {plan.source} did not record an image", "replay without --in-image")
    ref = pinned if "@" in pinned or pinned.startswith("sha256:") else f"{plan.image.ref}@{pinned}"
    env = [x for k, v in plan.env.items() for x in ("-e", f"{k}={v}")]
    return ["docker", "run", "--rm", "--gpus", "all", "-v", f"{root}:{root}", "-w", str(plan.cwd), *env, ref, *argv]
