"""`ledger replay RUN [OPTIONS] [-- EXTRA ARGS]`: re-run one side of a run on its recorded samples."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from ledger.record.run import Say
from ledger.replay.replay import Confirm, ReplayOptions, replay_run
from ledger.replay.seeds import parse_seeds, replay_seeds
from ledger.storage.listing import read_only

__all__ = ["ReplayOptions", "replay"]


def replay(
    start: Path,
    opts: ReplayOptions,
    seeds: str | None,
    *,
    say: Say,
    terminal_fd: int | None,
    stdout: Callable[[str], None],
    confirm: Confirm | None,
) -> int:
    """Plan and record the replay `opts` asks for; returns its exit code.

    With `seeds` (`1,2,3`): one replay per seed, named NAME-s1, ... (`ledger.replay.seeds`).
    """
    # --dry-run writes nothing at all: not even the listing's caches under .git/ledger
    with read_only() if opts.dry_run else contextlib.nullcontext():
        if seeds is not None:
            return replay_seeds(start, opts, parse_seeds(seeds), say, terminal_fd, stdout=stdout, confirm=confirm)
        return replay_run(start, opts, say, terminal_fd, stdout=stdout, confirm=confirm)
