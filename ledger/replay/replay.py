"""`ledger replay RUN`: re-run one side of a recorded run on exactly its recorded samples.

Security: the command comes from the repository, so it is shown before it runs, it is built as
an argv list (never a shell string), and run ids and data paths that escape the repository
(`..`, absolute paths, links out of the run folder) are refused. Nothing is written before the
user said yes: the plan only reads (`plan.py`), its `prepare` step checks the data out afterwards.
A run recorded in another clone needs `--yes` without a terminal, and its recorded environment is
filtered (`trust.py`).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path

from ledger.configload import load_config
from ledger.errors import RunNotFound, StartError, UsageError
from ledger.record.codeset import left_out_of_run
from ledger.record.run import RunRequest, record_run
from ledger.replay import raylaunch, trust
from ledger.replay.plan import PLACEHOLDER, ReplayOptions, ReplayPlan, plan_replay, rebase_path, runtime_env_of
from ledger.runrecord import UNSET, Replay, replace
from ledger.runref import check_run_name
from ledger.storage.git import Repo
from ledger.storage.store import check_ledger_branch

__all__ = ["Confirm", "ReplayOptions", "Say", "replay_run"]

Say = Callable[[str], None]
Confirm = Callable[[str, bool], bool]  # (question, the answer Enter gives) -> yes


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
    repo, plan = _planned(start, opts)
    target = _ray_target(repo, plan, opts, say) if raylaunch.was_submitted(plan.record) and not opts.in_image else None
    shown = _shown(plan, target)
    _say_warnings(plan, say)
    say(f"ledger: the replay runs in {plan.cwd}; {_code_line(plan)}")
    if opts.dry_run:
        stdout(shown)
        return 0
    if not _agreed(plan, opts, shown, confirm, say):
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


def _planned(start: Path, opts: ReplayOptions) -> tuple[Repo, ReplayPlan]:
    """The repository and the replay's plan; `--name` checked at the door, before the plan reads,
    checks out or asks anything."""
    if opts.name is not None:
        try:
            check_run_name(opts.name)
        except UsageError as exc:
            raise StartError(exc.message, exc.hint) from exc
    repo = Repo(start)
    cfg = load_config(repo.root, repo.common_dir)
    tip = check_ledger_branch(repo, cfg.branch)
    if tip is None:
        raise RunNotFound(f"no run named '{opts.run}': no runs recorded yet", "record one with `ledger run -- CMD`")
    return repo, plan_replay(repo, tip, opts)


def _agreed(plan: ReplayPlan, opts: ReplayOptions, shown: str, confirm: Confirm | None, say: Say) -> bool:
    """The replay is said, then asked (`confirm`: on a terminal without `--yes`); a run recorded
    in another clone needs `--yes` when there is no terminal to ask."""
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
    return confirm is None or confirm("run this command?", plan.foreign is None)


def _request(plan: ReplayPlan, opts: ReplayOptions, info: Replay, argv: list[str], env: dict[str, str] | None = None) -> RunRequest:
    """The replay as a run to record: `argv` in the recorded working directory, with its `replay:`
    section (`info`) and no debug-data flags of its own."""
    return RunRequest(
        argv=argv,
        cwd=plan.cwd,
        name=opts.name,
        replay_of=plan.source,
        replay=info,
        debug_data=False,
        data_placeholder=PLACEHOLDER,
        env=env,
        code_left_out=list(info.code_left_out or []),
    )


def _code_line(plan: ReplayPlan) -> str:
    """What the replay executes, as resolved in this checkout."""
    if plan.script is not None:
        return f"it runs the script {plan.script}"
    if plan.module is not None:
        return f"it runs the module {plan.module} (imported from that folder first)"
    return f"it runs {plan.argv[0] if plan.argv else 'nothing'}"


def _shown(plan: ReplayPlan, target: raylaunch.RayTarget | None) -> str:
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


def _replay_section(plan: ReplayPlan, opts: ReplayOptions) -> Replay:
    """The new run's `replay:` section: what was replayed, and how."""
    return Replay(
        mode=plan.mode,
        steps=plan.steps,
        mapping={str(k): v for k, v in plan.mapping.items()} if plan.mapping else None,
        sets=opts.sets,
        extra=opts.extra,
        in_image=opts.in_image,
        code_left_out=_code_left_out(plan) or UNSET,
    )


def _code_left_out(plan: ReplayPlan) -> list[str]:
    """The files the source run's `code` left out as its launcher's: the replay reruns the
    command they shaped, never them, so they leave the replay's `code` too."""
    return sorted(left_out_of_run(plan.record)[1])


def _ray_target(repo: Repo, plan: ReplayPlan, opts: ReplayOptions, say: Say) -> raylaunch.RayTarget:
    """Where a replay of a ray-submitted run goes, with its runtime env (`raylaunch`); starts nothing."""
    rec_root = plan.record.command.repo_root
    target = raylaunch.choose_target(plan.record, opts.address, plan.cwd, say, dry_run=True)
    excludes = trust.upload_excludes(repo, plan.cwd)
    rebase = lambda p: rebase_path(p, rec_root, repo.root)  # noqa: E731
    target.runtime_env, target.code_from = raylaunch.runtime_env(plan.record, plan.env, rebase, plan.cwd, excludes)
    trust.check_runtime_paths(repo, target.runtime_env, plan.cwd, plan.source)
    return target


def _replay_on_ray(
    plan: ReplayPlan, opts: ReplayOptions, target: raylaunch.RayTarget, info: Replay, say: Say, terminal_fd: int | None
) -> int:
    """Submit the replay to Ray (a local head started for it when none answers), record it, and
    stop that head after it."""
    _, hidden = runtime_env_of(plan.record)  # redacted in the record: taken from this environment
    missing = {k: os.environ[k] for k in hidden if k in os.environ}
    if missing:
        target.runtime_env.setdefault("env_vars", {}).update(missing)
    if target.how == "local head started by ledger":
        target = raylaunch.RayTarget("", target.how, target.runtime_env, raylaunch.LocalHead(plan.cwd, say), target.code_from)
        assert target.head is not None
        target.address = target.head.url
    info = replace(info, ray=target.to_record())
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
