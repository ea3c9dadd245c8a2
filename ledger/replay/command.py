"""Build the argv of a replayed training job from a recorded one. Pure: argv lists in and out.

Modes (see miles-facts.md, "Flags"):
- `train`: feed recorded rollouts to the trainer. Drops `--save-debug-rollout-data`,
  `--debug-rollout-only` and any old `--load-debug-rollout-data`, then adds
  `--load-debug-rollout-data <load_template> --debug-train-only`.
- `rollout`: run the engines alone. Drops `--debug-train-only`, `--load-debug-rollout-data` and
  its `-subsample`, sets `--save-debug-rollout-data <save_template>`, adds `--debug-rollout-only`.

`num_rollout` replaces `--num-rollout` and drops `--start-rollout-id` (it is honoured only with a
real checkpoint). Every other recorded setting is kept, in place.

`--set KEY=VALUE` rules, applied in order after the mode:
- when the flag is present with values, its value(s) are replaced in place (`--k v`, `--k=v`);
  VALUE is split on whitespace only when the recorded flag carried several values
  (`--set "offload-rollout-level=kv_cache weight"`); later repeats of the flag are dropped;
- VALUE `true` / `false` on a flag that is absent or a bare switch acts on the switch:
  `true` removes `--no-KEY` and adds `--KEY` if missing; `false` removes `--KEY` and, when KEY
  is negatable, adds `--no-KEY`. KEY is negatable when the recorded argv already holds
  `--no-KEY`, when it is in `negatable` (Miles' `--offload-train`/`--offload-rollout` pairs,
  whose default can be on), or when the user wrote the negated form: `no-KEY=true` is
  `KEY=false` with negation forced, `no-KEY=false` is `KEY=true`;
- otherwise `--KEY VALUE` is appended.
`extra` tokens are appended as given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal

import msgspec

from ledger.errors import UsageError
from ledger.understand.settings import FlagGroup, flag_groups, split_training_command

ReplayMode = Literal["train", "rollout"]

# Miles flags declared as argparse BooleanOptionalAction pairs (`--x` / `--no-x`).
DEFAULT_NEGATABLE: frozenset[str] = frozenset({"offload-train", "offload-rollout"})

_KEY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_SET_HINT = "write --set KEY=VALUE, e.g. --set lr=2e-6"


def parse_set(text: str) -> tuple[str, str]:
    """Split one `--set KEY=VALUE` argument; KEY may carry leading dashes, VALUE may be empty."""
    key, sep, value = text.partition("=")
    key = key.strip().lstrip("-")
    if not sep:
        raise UsageError(f"--set {text!r} has no '='", _SET_HINT)
    if not _KEY_RE.fullmatch(key):
        raise UsageError(f"--set {text!r} has no valid setting name before '='", _SET_HINT)
    return key, value


def _group(name: str, values: Sequence[str], inline: bool = False) -> FlagGroup:
    if inline and len(values) == 1:
        return FlagGroup(name, [f"--{name}={values[0]}"], list(values), inline=True)
    return FlagGroup(name, [f"--{name}", *values], list(values))


def _append(groups: list[FlagGroup], group: FlagGroup) -> None:
    """Append a flag, but before a trailing `-- ...` group so it stays a flag."""
    if groups and groups[-1].name is None and groups[-1].tokens[:1] == ["--"]:
        groups.insert(len(groups) - 1, group)
    else:
        groups.append(group)


def _drop(groups: list[FlagGroup], name: str) -> None:
    groups[:] = [g for g in groups if g.name != name]


def _set_values(groups: list[FlagGroup], name: str, values: Sequence[str]) -> None:
    """Replace the first occurrence of `name` in place (dropping later ones) or append it."""
    for index, group in enumerate(groups):
        if group.name == name:
            groups[index] = _group(name, values, inline=group.inline)
            groups[index + 1 :] = [g for g in groups[index + 1 :] if g.name != name]
            return
    _append(groups, _group(name, values))


def _switch_on(groups: list[FlagGroup], name: str) -> None:
    _drop(groups, "no-" + name)
    if not any(g.name == name for g in groups):
        _append(groups, _group(name, []))


def _apply_set(groups: list[FlagGroup], key: str, value: str, negatable: frozenset[str]) -> None:
    """`--set KEY=VALUE`: a boolean word on a flag that takes no value turns the switch on or off
    (`no-KEY=true` is `KEY=false`); any other value replaces the flag's values."""
    lowered = value.lower()
    if lowered in ("true", "false"):
        on, forced = lowered == "true", False
        if key.startswith("no-") and not _has_values(groups, key):
            key, on, forced = key[3:], not on, True
        if not _has_values(groups, key):
            _set_switch(groups, key, on, key in negatable or forced)
            return
    existing = next((g for g in groups if g.name == key), None)
    values = value.split() if existing is not None and len(existing.values) > 1 else [value]
    _set_values(groups, key, values)


def _has_values(groups: list[FlagGroup], key: str) -> bool:
    return any(g.name == key and (g.values or g.inline) for g in groups)


def _set_switch(groups: list[FlagGroup], key: str, on: bool, negatable: bool) -> None:
    """Switch `--KEY` on, or off: dropped, and `--no-KEY` added when the flag has that form."""
    if on:
        _switch_on(groups, key)
        return
    negated = any(g.name == "no-" + key for g in groups)
    _drop(groups, key)
    if negatable and not negated:
        _append(groups, _group("no-" + key, []))


def build_replay_argv(
    training_argv: Sequence[str],
    *,
    mode: ReplayMode,
    load_template: str | None = None,
    save_template: str | None = None,
    num_rollout: int | None = None,
    sets: Iterable[tuple[str, str]] = (),
    extra: Sequence[str] = (),
    negatable: frozenset[str] = DEFAULT_NEGATABLE,
) -> list[str]:
    """The argv of a replay of `training_argv` (interpreter onward); rules in the module doc."""
    prefix, script, args = _split_recorded(training_argv)
    groups = flag_groups(args)
    side = _SIDES.get(mode)
    if side is None:
        raise UsageError(f"unknown replay mode {mode!r}", "use 'train' or 'rollout'")
    _keep_one_side(groups, side, load_template if mode == "train" else save_template)
    if num_rollout is not None:
        _set_values(groups, "num-rollout", [str(num_rollout)])
        _drop(groups, "start-rollout-id")
    for key, value in sets:
        _apply_set(groups, key.lstrip("-"), value, negatable)
    tokens = [token for group in groups for token in group.tokens]
    head = [*prefix, script] if script is not None else []
    return [*head, *tokens, *extra]


def _split_recorded(training_argv: Sequence[str]) -> tuple[list[str], str | None, list[str]]:
    """(interpreter prefix, script, arguments) of the recorded command; a command of flags alone
    is all arguments, one that runs no python script is refused."""
    prefix, script, args = split_training_command(training_argv)
    if script is not None:
        return list(prefix), script, list(args)
    if training_argv and not training_argv[0].startswith("-"):
        raise UsageError(
            f"the recorded command {' '.join(training_argv[:3])!r}... runs no python script",
            "replay needs the training command (python3 train.py ...) of the run",
        )
    return [], None, list(training_argv)


class _Side(msgspec.Struct, frozen=True):
    """What a replay of one side drops and adds: the rollout data flag takes the template."""

    missing: str  # the error when no template is given
    hint: str
    drops: tuple[str, ...]
    data_flag: str
    switch: str


_SIDES: dict[str, _Side] = {
    # the training side alone, loading the rollouts from the template
    "train": _Side(
        "a train replay needs the rollout data to load",
        "pass load_template",
        ("save-debug-rollout-data", "debug-rollout-only", "load-debug-rollout-data"),
        "load-debug-rollout-data",
        "debug-train-only",
    ),
    # the engine side alone, saving the rollouts to the template
    "rollout": _Side(
        "a rollout replay needs where to save rollouts",
        "pass save_template",
        ("debug-train-only", "load-debug-rollout-data", "load-debug-rollout-data-subsample"),
        "save-debug-rollout-data",
        "debug-rollout-only",
    ),
}


def _keep_one_side(groups: list[FlagGroup], side: _Side, template: str | None) -> None:
    """Drop the flags of the other side and of old replays, then point `side` at `template`."""
    if not template:
        raise UsageError(side.missing, side.hint)
    for name in side.drops:
        _drop(groups, name)
    _set_values(groups, side.data_flag, [template])
    _switch_on(groups, side.switch)
