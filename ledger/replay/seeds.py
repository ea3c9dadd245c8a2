"""`ledger replay RUN --seeds 1,2,3`: one replay per seed, replicas of one another.

Recording three full runs per setting is expensive on GPUs; replaying the training side on the
same recorded samples takes minutes. Each replay gets `--set seed=S` and the name `NAME-sS`
(`--name NAME`; without it `<run name>-replay`, or `replay-<id tail>` for an unnamed run), so the
replays differ only in their seed: `ledger diff` finds them as replicas of one another, and the diff
of two such sets (one with `--set lr=2e-6`) judges the change against the training-side noise.

The command is shown and confirmed once for all seeds; a replay that fails stops the rest.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import msgspec
from msgspec.structs import replace

from ledger.errors import UsageError
from ledger.opening import open_branch
from ledger.replay.replay import Confirm, ReplayOptions, Say, replay_run
from ledger.runref import resolve
from ledger.storage.listing import load_listing

SEED_KEY = "seed"
_SEEDS_RE = re.compile(r"\s*\d+\s*(,\s*\d+\s*)*")


def parse_seeds(text: str) -> list[int]:
    """`1,2,3` as [1, 2, 3]: whole numbers, no repeats, at least one."""
    if not _SEEDS_RE.fullmatch(text):
        raise UsageError(f"--seeds {text!r} is not a comma-separated list of whole numbers", "e.g. --seeds 1,2,3")
    seeds = [int(s) for s in text.split(",")]
    if len(set(seeds)) != len(seeds):
        raise UsageError(f"--seeds {text!r} repeats a seed", "give each seed once: the replays would be repeats")
    return seeds


def _base_name(start: Path, opts: ReplayOptions) -> str:
    if opts.name:
        return opts.name
    if opts.sets:
        raise UsageError(
            "--seeds with --set needs --name (the replays are named NAME-s1, NAME-s2, ...)",
            "add e.g. --name lr-2e-6, so this set of replicas is told from the one without --set",
        )

    repo, _cfg, tip = open_branch(start)
    listing = load_listing(repo, tip)
    entry = resolve(repo, tip, opts.run, listing)
    name = (listing.manifests.get(entry.id) or {}).get("name")
    return f"{name}-replay" if name else f"replay-{entry.id[-4:]}"


def replay_seeds(
    start: Path,
    opts: ReplayOptions,
    seeds: list[int],
    say: Say,
    terminal_fd: int | None,
    stdout: Callable[[str], None],
    confirm: Confirm | None = None,
) -> int:
    """Record one replay of `opts.run` per seed, named NAME-s<seed>; the first failing exit code, else 0."""
    _check_seed_unset(opts)
    base = _base_name(start, opts)
    asked = _AskedOnce(confirm, f"for seeds {', '.join(map(str, seeds))}: {len(seeds)} replays named {base}-s{seeds[0]} ...")
    done: list[str] = []
    for seed in seeds:
        if asked.declined:
            break
        one = replace(opts, sets=[*opts.sets, f"{SEED_KEY}={seed}"], name=f"{base}-s{seed}", new_settings=(*opts.new_settings, SEED_KEY))
        code = replay_run(start, one, say, terminal_fd, stdout, None if confirm is None else asked)
        if code != 0:
            say(
                f"ledger: the replay with seed {seed} exited {code}; "
                f"{'no replica' if not done else 'replicas ' + ', '.join(done)} recorded, the other seeds not run"
            )
            return code
        if not opts.dry_run and not asked.declined:
            done.append(f"{base}-s{seed}")
    if done:
        say(f"ledger: recorded {len(done)} replicas: {', '.join(done)} (`ledger diff` uses them as replicas)")
    return 0


def _check_seed_unset(opts: ReplayOptions) -> None:
    """`--seeds` sets the seed: a `--set seed=...` beside it is refused."""
    if any(s.split("=", 1)[0].lstrip("-") == SEED_KEY for s in opts.sets):
        raise UsageError("--seeds and --set seed=... both set the seed", "drop one of them")


class _AskedOnce(msgspec.Struct):
    """One question for all the seeds: the first replay asks it (`note` says what the yes
    covers), the others take its answer."""

    confirm: Confirm | None  # None: nothing is asked (no terminal, or --yes)
    note: str
    answer: bool | None = None  # None: not asked yet

    @property
    def declined(self) -> bool:
        """The question was asked, and the answer was no."""
        return self.answer is False

    def __call__(self, question: str, default: bool) -> bool:
        if self.answer is None:
            assert self.confirm is not None
            self.answer = self.confirm(f"{question} ({self.note})", default)
        return self.answer
