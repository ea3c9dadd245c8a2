"""Turn a training command's arguments into a flat settings dict.

`parse_settings(["--lr", "1e-6", "--colocate", "--no-offload-train"])` gives
`{"lr": 1e-06, "colocate": True, "offload-train": False}`. The rules, in the order they apply:

- a token is a flag when one or two dashes and a name start it, and it is not a number
  (`-1`, `-0.5`, `-1e-5`, `-`, and `-----BEGIN ...` are values);
- `--key=value` is one flag with one value, even when the value starts with `-`;
- `--key v1 v2 ...` takes every following non-flag token: one value is a scalar, more a list;
- a bare `--key` is `True`, a bare `--no-key` is `key: False`;
- a flag given twice keeps its LAST value, as argparse and Megatron do (launchers put defaults
  first and overrides later); the raw argv is recorded beside the settings;
- values convert: `true`/`false` (any case) to bool, `None`/`null` to None, integers to int,
  decimals to float; numbers with leading zeros (`007`, `01.5`) and everything else, JSON-looking
  text included, stay strings;
- tokens before the first flag and every token after a lone `--` go under `_positional`.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ledger.argv import mentions
from ledger.globs import matcher

POSITIONAL_KEY = "_positional"

# Settings that are not experiment settings (docs/diff.md): where a run writes,
# how it reports, which machine and port it used, how it is labelled. They are recorded with the
# run but never compared; `ignore:` in .ledger.yaml extends the list, and a setting whose value
# holds the run's own id is left out too (`ignored_settings`). Checked against the flags of
# radixark/miles' launchers (tests/test_settings_scope.py holds their shapes).
DEFAULT_IGNORE: tuple[str, ...] = (
    # run-output directories
    "save",
    "save-dir",
    "output-dir",
    "out-dir",
    "*-output-dir",
    "save-traces-dir",
    "log-dir",
    "load",
    "ref-load",
    "hf-checkpoint",  # listed as output-ish in miles-facts.md; model identity is image/code side
    "save-debug-*",
    "load-debug-rollout-data",
    "dump-details",
    # reporting and labels
    "wandb-*",
    "use-wandb",
    "tb-*",
    "tensorboard-*",
    "use-tensorboard",
    "run-name",
    "*-run-name",
    "run-id",
    "*-run-id",
    # ports, node IPs, host names
    "port",
    "*-port",
    "*-ip",
    "*-ip-address",
    "host",
    "*-host",
    "hostname",
    "master-addr",
    "*-addr",
    "env.MASTER_ADDR",
    "env.MASTER_PORT",
    "env.*_PORT",
    "env.*_HOST",
    "env.HOSTNAME",
    "env.*_IP",
    "env.*_ADDR",
    "env.RAY_ADDRESS",
    "env.no_proxy",  # Miles' execute_train puts the master's address in it
    "env.NO_PROXY",
    "env.LEDGER_*",
)

_INT_RE = re.compile(r"[+-]?(0|[1-9][0-9]*)")
_FLOAT_RE = re.compile(r"[+-]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][+-]?[0-9]+)?")
_PYTHON_RE = re.compile(r"python(\d+(\.\d+)*)?")
_PY_SHORT_RE = re.compile(r"-([bBdEhiIOPqsSuvV]*)([cmWX]?)(.*)")
# torchrun options that take no value; every other option without `=` consumes the next token.
_TORCHRUN_SWITCHES = frozenset({"--standalone", "--no-python", "--no_python", "--run-path", "--run_path", "--module", "-m"})
_TORCHRUN_NAMES = frozenset({"torchrun"})
_TORCH_LAUNCH_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch"})

Value = object


@dataclass
class FlagGroup:
    """One flag occurrence in an argv and the tokens that belong to it.

    `name` is the flag without leading dashes (None for positional tokens), `tokens` the exact
    argv tokens (`["--lr", "1e-6"]` or `["--lr=1e-6"]`), `values` the raw value strings.
    """

    name: str | None
    tokens: list[str]
    values: list[str] = field(default_factory=list)
    inline: bool = False  # written as --key=value


_FLAG_START = re.compile(r"--?[^\s=-]")


def is_number(token: str) -> bool:
    """True when `token` reads as an int or float literal (signs and exponents allowed)."""
    return _FLOAT_RE.fullmatch(token) is not None


def is_flag(token: str) -> bool:
    """True when `token` starts a flag (`--x`, `-x`), not a value such as `-1`, `-`, or a text that
    only starts with dashes (`-----BEGIN PGP PRIVATE KEY BLOCK-----...`, a key given as a value:
    read as a flag it became a setting's name)."""
    return _FLAG_START.match(token) is not None and not is_number(token)


def flag_groups(args: Sequence[str]) -> list[FlagGroup]:
    """Split arguments into flag groups, keeping the exact tokens of each.

    Positional tokens before the first flag form a group with name None; a lone `--` and the
    tokens after it form a final group with name None.
    """
    groups: list[FlagGroup] = []
    current: FlagGroup | None = None
    for index, token in enumerate(args):
        if token == "--":
            groups.append(FlagGroup(None, list(args[index:]), list(args[index + 1 :])))
            return groups
        if is_flag(token):
            name, sep, inline_value = token.lstrip("-").partition("=")
            if sep:
                groups.append(FlagGroup(name, [token], [inline_value], inline=True))
                current = None
            else:
                current = FlagGroup(name, [token])
                groups.append(current)
        elif current is None:
            if groups and groups[-1].name is None:
                groups[-1].tokens.append(token)
                groups[-1].values.append(token)
            else:
                groups.append(FlagGroup(None, [token], [token]))
        else:
            current.tokens.append(token)
            current.values.append(token)
    return groups


def convert_value(text: str) -> Value:
    """Convert one argument string to bool, None, int, float or leave it a string."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if text in ("None", "null"):
        return None
    if _INT_RE.fullmatch(text):
        return int(text)
    if _FLOAT_RE.fullmatch(text) and not re.match(r"[+-]?0[0-9]", text):
        return float(text)
    return text


def parse_settings(training_argv: Sequence[str]) -> dict[str, Value]:
    """Parse the arguments after the training script into a flat settings dict (see module doc)."""
    settings: dict[str, Value] = {}
    positional: list[Value] = []
    for group in flag_groups(training_argv):
        if group.name is None:
            positional.extend(convert_value(v) for v in group.values)
            continue
        if not group.values and not group.inline:
            if group.name.startswith("no-") and len(group.name) > 3:
                settings[group.name[3:]] = False
            else:
                settings[group.name] = True
            continue
        values = [convert_value(v) for v in group.values]
        settings[group.name] = values[0] if len(values) == 1 else values
    if positional:
        settings[POSITIONAL_KEY] = positional
    return settings


def ignored_settings(
    settings: Mapping[str, Value],
    run_id: str | None = None,
    extra_ignore: Iterable[str] = (),
) -> set[str]:
    """Names of settings that are outputs rather than experiment settings.

    A name is ignored when it matches a glob of `DEFAULT_IGNORE` or `extra_ignore`, or when its
    value mentions `run_id` (a path like `/ckpt/<run id>` differs in every run by construction).
    """
    ignored = set(_matching(tuple(settings), (*DEFAULT_IGNORE, *extra_ignore)))
    if run_id:  # a string looked into here, a list by `mentions`: a search asks this of thousands of runs
        ignored.update(
            name
            for name, value in settings.items()
            if (run_id in value if value.__class__ is str else value.__class__ not in _NUMBERS and mentions(value, run_id))
        )
    return ignored


_NUMBERS = frozenset({int, float, bool})


@functools.lru_cache(maxsize=64)
def _matching(names: tuple[str, ...], globs: tuple[str, ...]) -> tuple[str, ...]:
    """The names that match a glob: asked once per set of names, which the runs of one project
    share (a search over thousands of runs asks it of each)."""
    ignores = matcher(globs)
    return tuple(name for name in names if ignores(name))


def _python_script_index(argv: Sequence[str], start: int) -> int | None:
    """Index of the script or module after a python interpreter at `start`, else None.

    For `-mmodule` written as one token the index of that token is returned.
    """
    i = start + 1
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return i + 1 if i + 1 < len(argv) else None
        if not token.startswith("-") or token == "-":
            return i
        short = _PY_SHORT_RE.fullmatch(token)
        if short is None:  # a long option such as --check-hash-based-pycs
            i += 1
            continue
        letter, attached = short.group(2), short.group(3)
        if letter == "c":
            return None  # inline code: no script to name
        if letter == "m":
            if attached:
                return i if token.startswith("-m") else None
            return i + 1 if i + 1 < len(argv) else None
        i += 2 if letter in ("W", "X") and not attached else 1
    return None


def _torchrun_script_index(argv: Sequence[str], start: int) -> int | None:
    """Index of the script after torchrun options starting at `start`, else None."""
    i = start
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return i + 1 if i + 1 < len(argv) else None
        if token.startswith("-"):
            i += 1 if ("=" in token or token in _TORCHRUN_SWITCHES) else 2
            continue
        return i
    return None


def is_interpreter(token: str) -> bool:
    """True when `token` names python (`python`, `python3.11`, a path to one) or torchrun."""
    base = os.path.basename(token)
    return base in _TORCHRUN_NAMES or _PYTHON_RE.fullmatch(base) is not None


def locate_training_command(argv: Sequence[str]) -> tuple[int, int] | None:
    """(interpreter index, script index) of the python/torchrun command in `argv`, else None.

    Tokens before the interpreter (`env A=1`, `nohup`) are allowed. An argv whose first token
    is itself a `.py` file counts as interpreter and script at index 0.
    """
    if argv and argv[0].endswith(".py"):
        return (0, 0)
    for index, token in enumerate(argv):
        base = os.path.basename(token)
        if base in _TORCHRUN_NAMES:
            script = _torchrun_script_index(argv, index + 1)
            return None if script is None else (index, script)
        if _PYTHON_RE.fullmatch(base):
            script = _python_script_index(argv, index)
            if script is None:
                return None
            if argv[script - 1] == "-m" and argv[script] in _TORCH_LAUNCH_MODULES:
                inner = _torchrun_script_index(argv, script + 1)
                return None if inner is None else (index, inner)
            return (index, script)
    return None


def split_training_command(argv: Sequence[str]) -> tuple[list[str], str | None, list[str]]:
    """Split a command into (prefix, script, args).

    `python3 -u train.py --lr 1` -> (`["python3", "-u"]`, `"train.py"`, `["--lr", "1"]`);
    `python3 -m miles.train --lr 1` -> (`["python3", "-m"]`, `"miles.train"`, ...);
    `torchrun --nproc_per_node 8 train.py ...` likewise. The prefix keeps anything before the
    interpreter. When no python script is found: (`list(argv)`, None, `[]`).
    """
    located = locate_training_command(argv)
    if located is None:
        return list(argv), None, []
    _, script_index = located
    token = argv[script_index]
    if token.startswith("-m") and len(token) > 2 and argv[script_index - 1] != "-m":
        return [*argv[:script_index], "-m"], token[2:], list(argv[script_index + 1 :])
    return list(argv[:script_index]), token, list(argv[script_index + 1 :])


ENTRY_SETTING = "command.entry"


def _script_in_repo(script: str, command: Mapping[str, Value]) -> str:
    """A script path as the repository sees it: relative to its root, `.`/`..` folded."""
    root = str(command.get("repo_root") or "")
    if os.path.isabs(script):
        if root and (script == root or script.startswith(root.rstrip("/") + "/")):
            return os.path.relpath(script, root)
        return os.path.normpath(script)
    return os.path.normpath(os.path.join(str(command.get("cwd_in_repo") or "."), script))


def entry_point(command: Mapping[str, Value]) -> str | None:
    """The `command.entry` setting of a manifest's `command` section.

    The training script relative to the repository (`train.py`), or `-m MODULE`; behind a
    launcher, `LAUNCHER -> SCRIPT` (the launcher's path relative to the repository). None when
    neither is known. Pure (from the manifest alone).
    """
    training = command.get("training_argv")
    script = None
    if isinstance(training, list) and training:
        prefix, found, _ = split_training_command([str(t) for t in training])
        if found is not None:
            script = f"-m {found}" if prefix and prefix[-1] == "-m" else _script_in_repo(found, command)
    launcher = command.get("launcher_path") or command.get("launcher")
    if launcher:
        return f"{launcher} -> {script}" if script else str(launcher)
    return script or _inline_program(command.get("argv"))


def _inline_program(argv: Value) -> str | None:
    """`python3 -c PROGRAM`: the program is the entry point, named by its text's sha256 (two
    different inline programs are different experiments, and the text may be long)."""
    if not isinstance(argv, list):
        return None
    words = [str(a) for a in argv]
    for i, word in enumerate(words[:-1]):
        if word == "-c" and i > 0 and os.path.basename(words[i - 1]).startswith("python"):
            return "-c sha256:" + hashlib.sha256(words[i + 1].encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return None
