"""`ledger replay RUN [OPTIONS] [-- EXTRA ARGS]`: re-run one side of a run on its recorded samples."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path

from ledger.record.run import Say
from ledger.replay.replay import ReplayOptions, replay_run
from ledger.replay.seeds import parse_seeds, replay_seeds
from ledger.storage.listing import read_only


def replay(
    start: Path,
    run: str,
    *,
    rollout_only: bool,
    step: int | None,
    steps: str | None,
    sets: Sequence[str],
    extra: Sequence[str],
    name: str | None,
    dry_run: bool,
    strict: bool,
    in_image: bool,
    force: bool,
    say: Say,
    yes: bool = False,
    trust_env: bool = False,
    address: str | None = None,
    terminal_fd: int | None,
    stdout: Callable[[str], None],
    confirm: Callable[[str], bool] | None,
    seeds: str | None = None,
) -> int:
    """Plan and record the replay (``--`` separators in `extra` dropped); returns its exit code.

    With `seeds` (`1,2,3`): one replay per seed, named NAME-s1, ... (`ledger.replay.seeds`).
    """
    opts = ReplayOptions(
        run=run,
        rollout_only=rollout_only,
        step=step,
        steps=steps,
        sets=list(sets),
        extra=[x for x in extra if x != "--"],
        name=name,
        dry_run=dry_run,
        strict=strict,
        in_image=in_image,
        force=force,
        yes=yes,
        trust_env=trust_env,
        address=address,
    )
    # --dry-run writes nothing at all: not even the listing's caches under .git/ledger
    with read_only() if dry_run else contextlib.nullcontext():
        if seeds is not None:
            return replay_seeds(start, opts, parse_seeds(seeds), say, terminal_fd, stdout=stdout, confirm=confirm)
        return replay_run(start, opts, say, terminal_fd, stdout=stdout, confirm=confirm)
