"""Find a run's bulky outputs in its training command, and add the debug-data flags.

Miles writes per-rollout data, event logs and per-rank training data where its debug flags say
(see miles-facts.md, "Flags"). These are the files `ledger` tracks with DVC and `ledger replay`
feeds back in.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import msgspec

from ledger.understand.launcher import without_comments
from ledger.understand.settings import flag_groups, locate_training_command, split_training_command

ROLLOUT_FLAG = "--save-debug-rollout-data"
EVENTS_FLAG = "--save-debug-event-data"
TRAIN_FLAG = "--save-debug-train-data"
DETAILS_FLAG = "--dump-details"

# flag -> (role, whether the value is a per-file template rather than a directory)
_OUTPUT_FLAGS: dict[str, tuple[str, bool]] = {
    ROLLOUT_FLAG: ("rollout", True),
    EVENTS_FLAG: ("events", False),
    TRAIN_FLAG: ("train", True),
    DETAILS_FLAG: ("details", False),
}


class Output(msgspec.Struct, frozen=True):
    """One bulky output of a run.

    `template` is the flag's value as given (`/data/rollout/{rollout_id}.pt`), `path` the
    directory that holds the files (`/data/rollout`); both as written, relative paths relative
    to the job's working directory.
    """

    role: str
    flag: str
    template: str
    path: str


def template_folder(template: str) -> str:
    """The deepest directory of `template` that holds no `{field}`: where its files land.

    `/d/rollout/{rollout_id}.pt` -> `/d/rollout`; `/d/{rollout_id}/x.pt` -> `/d`;
    `{rollout_id}.pt` -> `.`.
    """
    head = template.split("{", 1)[0]
    folder = head if head.endswith(("/", os.sep)) else os.path.dirname(head)
    folder = folder.rstrip("/") or ("/" if folder.startswith("/") else "")
    return folder or "."


def _last_values(argv: Sequence[str]) -> dict[str, str]:
    """flag -> the value of its last occurrence, for flags that carry a value."""
    values: dict[str, str] = {}
    for group in flag_groups(argv):
        if group.name is not None and group.values:
            values["--" + group.name] = group.values[-1]
    return values


def training_args(argv: Sequence[str]) -> list[str]:
    """The arguments of the training script inside `argv`, wherever it is: after an interpreter,
    after `ray job submit ... --`, after `env A=1`; `argv` itself when it names no interpreter."""
    located = locate_training_command(argv)
    if located is None:
        return list(argv)
    return split_training_command(argv[located[0] :])[2]


def find_outputs(argv: Sequence[str]) -> list[Output]:
    """The debug outputs a training command writes, in the order rollout, events, train, details.

    `argv` may be the whole command (`ray job submit ... -- python3 train.py ARGS`) or its ARGS.
    `--dump-details DIR` stands for `DIR/rollout_data/{rollout_id}.pt`, `DIR/events`,
    `DIR/train_data/{rollout_id}_{rank}.pt` where no explicit flag names them, and its
    `DIR/trajectory` files are the `details` output (so replay finds the rollouts either way).
    """
    values = _last_values(training_args(argv))
    details = values.get(DETAILS_FLAG, "").rstrip("/")
    derived = (
        {
            ROLLOUT_FLAG: f"{details}/rollout_data/{{rollout_id}}.pt",
            EVENTS_FLAG: f"{details}/events",
            TRAIN_FLAG: f"{details}/train_data/{{rollout_id}}_{{rank}}.pt",
            DETAILS_FLAG: f"{details}/trajectory/{{rollout_id}}.jsonl",
        }
        if details
        else {}
    )
    outputs: list[Output] = []
    for flag, (role, is_template) in _OUTPUT_FLAGS.items():
        value = values.get(flag) if flag != DETAILS_FLAG else None
        source_flag = flag
        if not value and flag in derived:
            value, is_template, source_flag = derived[flag], flag != EVENTS_FLAG, DETAILS_FLAG
        if not value:
            continue
        path = template_folder(value) if is_template else value.rstrip("/") or "/"
        outputs.append(Output(role=role, flag=source_flag, template=value, path=path))
    return outputs


def _mentions(flag: str, argv: Sequence[str], launcher_text: str | None) -> bool:
    """Whether the argv sets `flag`, or the launcher's code (not its comments) names it."""
    if any(token == flag or token.startswith(flag + "=") for token in argv):
        return True
    if launcher_text is None:
        return False
    code = without_comments(launcher_text)
    name = flag.lstrip("-")
    return name in code or name.replace("-", "_") in code


def debug_flag_values(data_dir: str) -> list[tuple[str, str]]:
    """The debug-data flags ledger adds and their values under the run's data folder."""
    base = data_dir.rstrip("/")
    return [(ROLLOUT_FLAG, f"{base}/rollout/{{rollout_id}}.pt"), (EVENTS_FLAG, f"{base}/events")]


def inject_debug_flags(
    argv: Sequence[str],
    data_dir: str,
    launcher_text: str | None = None,
    allowed: Sequence[str] | None = None,
) -> tuple[list[str], list[str]]:
    """Append the rollout- and event-data flags the run does not set yet.

    Adds `--save-debug-rollout-data <data_dir>/rollout/{rollout_id}.pt` and
    `--save-debug-event-data <data_dir>/events` unless the argv or the launcher script text
    already sets them; adds nothing when `--dump-details` is set (it places all dumps).
    Returns (new argv, the flags added).
    """
    new_argv = list(argv)
    added: list[str] = []
    if _mentions(DETAILS_FLAG, argv, launcher_text):
        return new_argv, added
    for flag, value in debug_flag_values(data_dir):
        if allowed is not None and flag not in allowed:
            continue  # the trainer's framework has no such flag (ledger/understand/framework.py)
        if not _mentions(flag, argv, launcher_text):
            new_argv += [flag, value]
            added.append(flag)
    return new_argv, added
