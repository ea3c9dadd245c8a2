"""A replay's plan: the run to replay checked, and the command that replays one side of it.

`plan_replay` only reads: the run and its record, its training command rebased onto this checkout
(only the flags its framework has), the `--set`s (a setting the run never had is refused unless
`--force`), the chosen steps, the recorded environment (`trust.py` says which variables are
taken), and the recorded samples' place (`samples.py`). What it writes, it leaves to the plan's
`prepare`, run once the user said yes.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path

import msgspec

from ledger.capture.hostfacts import cached_host_facts, host_facts
from ledger.errors import DataError, LedgerError, UsageError
from ledger.redact.names import MASK
from ledger.replay import trust
from ledger.replay.command import build_replay_argv, parse_set
from ledger.replay.samples import check_steps_recorded, locate_data, nofollow_dirs, replay_data_dir, rollout_record
from ledger.replay.steps import file_name_template, link_steps, parse_steps
from ledger.runrecord import UNSET, Image, RunRecord
from ledger.runref import own_runs, resolve, shared_name_note
from ledger.storage.git import Repo
from ledger.storage.listing import load_listing, parse_record
from ledger.storage.store import RunEntry, read_file_at
from ledger.understand.framework import FLAGS
from ledger.understand.settings import Value, flag_groups, parse_settings, split_training_command

PLACEHOLDER = "\0LEDGER_RUN_DATA\0"


class ReplayOptions(msgspec.Struct):
    run: str
    rollout_only: bool = False
    step: int | None = None
    steps: str | None = None
    sets: list[str] = msgspec.field(default_factory=list)
    extra: list[str] = msgspec.field(default_factory=list)
    name: str | None = None
    dry_run: bool = False
    strict: bool = False
    in_image: bool = False
    force: bool = False  # --set may add a setting the run never had
    yes: bool = False  # --yes: replay without asking, also a run recorded in another clone
    trust_env: bool = False  # --trust-env: take recorded variables that load code too
    address: str | None = None  # a ray-submitted run: the Ray Job API to replay on (raylaunch)
    new_settings: tuple[str, ...] = ()  # settings --set may add without --force (`--seeds` sets `seed`)


class ReplayPlan(msgspec.Struct):
    """What a replay will run, and where its samples come from."""

    source: str
    argv: list[str]
    cwd: Path
    mode: str
    steps: list[int] | None
    mapping: dict[int, int] | None
    data_dir: Path | None
    warnings: list[str]
    image: Image = msgspec.field(default_factory=Image)
    # the recorded Ray runtime env's variables: a `ray job submit` run's trainer had them, and a
    # replay runs the trainer directly, so they are set for it (PYTHONPATH, NCCL_*, ...)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    env_dropped: dict[str, str] = msgspec.field(default_factory=dict)  # recorded variables left out, and why
    prepare: Callable[[], None] | None = None  # writes the data the argv names (after the yes)
    foreign: str | None = None  # who made the run commit, when this clone did not record the run
    record: RunRecord = msgspec.field(default_factory=RunRecord)  # the source run's record (where it ran)
    script: Path | None = None  # the training script the replay runs, resolved in this checkout
    module: str | None = None  # or the `-m` module, imported from `cwd` first


def _environment_warnings(repo: Repo, record: RunRecord, opts: ReplayOptions) -> list[str]:
    """The recorded image / Miles / SGLang against what this replay will run on.

    Warnings by default; with `--strict` a different image digest or Miles commit is an error.
    """
    image = record.image
    hard: list[str] = []
    soft: list[str] = []
    if image.source != "image":
        _package_warnings(repo, image, opts.dry_run, hard, soft)
    elif not opts.in_image:
        hard.append(
            f"the run used image {image.ref} ({image.digest or image.id}); "
            "this replay runs on the host (add --in-image to use that exact image)"
        )
    head = repo.head_commit()
    recorded = record.code.commit
    if recorded and recorded != head:
        soft.append(f"the code is at {head[:10]}, the run was recorded at {recorded[:10]} (the replay runs this checkout's code)")
    if hard and opts.strict:
        raise LedgerError(hard[0], "drop --strict to replay anyway")
    return hard + soft


def _package_warnings(repo: Repo, image: Image, dry_run: bool, hard: list[str], soft: list[str]) -> None:
    """A host run's packages against this host's: a different Miles into `hard`, the rest into `soft`."""
    # a dry run writes nothing, not even the cache of this host's package versions
    now = (host_facts() if dry_run else cached_host_facts(repo.common_dir / "ledger" / "host")).packages
    was = image.packages
    for pkg in ("sglang", "torch", "megatron-core", "miles"):
        if was.get(pkg) != now.get(pkg) and (was.get(pkg) or now.get(pkg)):
            (hard if pkg == "miles" else soft).append(
                f"{pkg} was {was.get(pkg) or 'absent'} when recorded, is {now.get(pkg) or 'absent'} here"
            )


def _unknown_sets(run_id: str, sets: list[tuple[str, str]], recorded: dict[str, Value], force: bool) -> list[str]:
    """A `--set` of a setting the run never had is likely a typo: refused unless `force`."""
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


class _Checked(msgspec.Struct, frozen=True):
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
    record, training = _recorded(repo, entry)
    command = record.command
    sets = [parse_set(s) for s in opts.sets]
    chosen = parse_steps(opts.step, opts.steps)
    warnings = _environment_warnings(repo, record, opts)
    training = [rebase_path(a, command.repo_root, repo.root) for a in training]
    recorded_env, hidden = runtime_env_of(record)
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


def _recorded(repo: Repo, entry: RunEntry) -> tuple[RunRecord, list[str]]:
    """The run's record and its training command, refused when it has none."""
    raw = read_file_at(repo, entry, "manifest.yaml")
    if raw is None:
        raise LedgerError(f"run {entry.id} has no manifest", "the record is damaged")
    record = parse_record(raw, entry.path)[0]
    training = record.command.training_argv
    if not training:
        raise UsageError(f"run {entry.id} has no recorded training command", "replay needs a run of `python3 train.py ...`")
    return record, list(training)


def _own_outputs(recorded: dict[str, Value], own: list[str]) -> list[tuple[str, str]]:
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
    rec = rollout_record(run.record)
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
        links = replay_data_dir(repo, steps_name)
        if opts.dry_run:
            check_steps_recorded(entry.id, rec, data_dir, name_template, chosen)
        mapping = dict(enumerate(chosen))
        load_dir, num = links, len(chosen)
    else:
        load_dir, num = data_dir, None

    def prepare() -> None:
        where = locate_data(repo, entry, rec, remote_hint)
        if chosen is not None:
            nofollow_dirs(repo, steps_name)
            link_steps(where, name_template, chosen, links)

    argv = build_replay_argv(
        run.training, mode="train", load_template=str(load_dir / name_template), num_rollout=num, sets=run.sets, extra=opts.extra
    )
    return run.plan(argv, "train", mapping=mapping, data_dir=data_dir, prepare=prepare)


def _only_framework_flags(training: list[str], record: RunRecord) -> list[str]:
    """The recorded command without debug flags its trainer's framework does not have (a slime
    run recorded by an older ledger carries `--save-debug-event-data`, which slime lacks)."""
    name = (record.command.debug_data or {}).get("framework")
    if name not in FLAGS:
        return training
    lacking = {f[2:] for f in FLAGS["miles"] if f not in FLAGS[name]}
    prefix, script, args = split_training_command(training)
    if script is None:
        return training
    kept = [t for g in flag_groups(args) if g.name not in lacking for t in g.tokens]
    return [*prefix, script, *kept]


def runtime_env_of(record: RunRecord) -> tuple[dict[str, str], list[str]]:
    """The recorded runtime env's variables, and the names whose values were redacted."""
    env_vars = (record.command.runtime_env or {}).get("env_vars") or {}
    if not isinstance(env_vars, dict):
        return {}, []
    hidden = sorted(str(k) for k, v in env_vars.items() if MASK in str(v))
    return {str(k): str(v) for k, v in env_vars.items() if MASK not in str(v)}, hidden


def rebase_path(arg: str, recorded_root: str | None, root: Path) -> str:
    """Paths under the recorded repository root point into this checkout instead."""
    if recorded_root and arg.startswith(recorded_root.rstrip("/") + "/"):
        return str(root) + arg[len(recorded_root.rstrip("/")) :]
    return arg
