"""`ledger run`'s command line: its options, declared once, and a reader for the usual shape of it.

`ledger.cli` makes click's options from `OPTIONS`. `plain_args` reads the usual command line
(`ledger run [--name X ...] -- CMD`) without click, so that `ledger run`'s start-up neither
imports nor builds the whole command line (~15 ms of every run). Anything else (`--help`, a
misspelt option, an option given twice, a value that looks like an option) is left to click,
which gives its usual answer. This module imports nothing of ledger: `ledger --help` reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

OptionKind = Literal["value", "values", "flag", "switch"]


@dataclass(frozen=True)
class Option:
    """One option of `ledger run`: `value` takes a word, `values` is repeatable, `flag` is a
    bare flag (False when absent), `switch` is `--x/--no-x` (None when absent)."""

    flag: str
    dest: str
    kind: OptionKind
    help: str

    @property
    def off(self) -> str:
        """A switch's negative spelling (`--no-debug-data`)."""
        return "--no-" + self.flag[2:]


OPTIONS = (
    Option("--name", "name", "value", "A short name for the run (usable wherever a run is named)."),
    Option("--note", "note", "value", "Free text stored in the manifest."),
    Option("--image", "image", "value", "Docker image the job runs in (else detected from `docker run`, else .ledger.yaml)."),
    Option("--no-heat-guard", "no_heat_guard", "flag", "Record GPU temperatures but never pause the job."),
    Option("--data", "data_paths", "values", "Extra output path to track with DVC (repeatable)."),
    Option(
        "--debug-data",
        "debug_data",
        "switch",
        "Add --save-debug-rollout-data/--save-debug-event-data when absent (default: .ledger.yaml).",
    ),
)


@dataclass(frozen=True)
class RunArgs:
    """`ledger run`'s command line, read: the options (as `OPTIONS` declares them) and the command."""

    command: tuple[str, ...]
    name: str | None = None
    note: str | None = None
    image: str | None = None
    no_heat_guard: bool = False
    data_paths: tuple[str, ...] = ()
    debug_data: bool | None = None


def plain_args(args: Sequence[str]) -> RunArgs | None:
    """`ledger run`'s ARGS read as click reads them, when they are plain: each known option at
    most once (`--data` repeatable), a value as the next word or after `=`, then `--` or the
    first word that is not an option, and a command after it that does not start with `-`.
    Returns None for click to read (and answer) instead."""
    words = {o.flag: o for o in OPTIONS} | {o.off: o for o in OPTIONS if o.kind == "switch"}
    found: dict[str, Any] = {}
    i = 0
    while i < len(args) and args[i] != "--" and args[i].startswith("-"):
        flag, eq, value = args[i].partition("=")
        option = words.get(flag)
        if option is None or (option.dest in found and option.kind != "values"):
            return None
        i += 1
        if option.kind in ("flag", "switch"):
            if eq:
                return None
            found[option.dest] = flag != option.off
            continue
        if not eq:
            if i == len(args) or args[i].startswith("-"):
                return None
            value = args[i]
            i += 1
        found[option.dest] = (*found.get(option.dest, ()), value) if option.kind == "values" else value
    command = tuple(args[i + 1 :] if i < len(args) and args[i] == "--" else args[i:])
    if not command or command[0].startswith("-"):
        return None
    return RunArgs(command, **found)
