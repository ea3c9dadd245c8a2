"""The seeds a trainer runs with when its command passes none: its framework's defaults.

Miles' and slime's launchers pass no `--seed` or `--rollout-seed`; the trainer then runs with its
parser's defaults (`--seed` 1234 for the trainer, each SGLang engine `seed + rank`; `--rollout-seed`
42 for prompt shuffling and sampling: miles-facts.md). Miles and slime set them in
`<package>/utils/arguments.py` (`add_argument("--rollout-seed", type=int, default=42)`,
`reset_arg(parser, "--seed", type=int, default=1234)` over Megatron's own default).

Read without running any of the trainer's code (an `ast` walk of the `add_argument`/`reset_arg`
calls, literal defaults only, the last call of a flag in the file winning, as `reset_arg` does),
from the first of:
1. the framework's parser source: the `miles/` or `slime/` package beside the training script (a
   Miles checkout's `train.py` sits at its root), else where this interpreter would import it from
   (`importlib.util.find_spec`, which runs nothing of a top-level package);
2. the training script's own `argparse` calls (a trainer with a parser of its own);
3. `TABLE`, for Miles and slime.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Sequence
from pathlib import Path

import msgspec

# the `seeds` section's keys and the flags they stand for
SEED_FLAGS: dict[str, str] = {"seed": "--seed", "rollout_seed": "--rollout-seed"}
# radixark/miles 31f1ca96 and THUDM/slime 624b824a, `<package>/utils/arguments.py`
TABLE: dict[str, dict[str, int]] = {
    "miles": {"--seed": 1234, "--rollout-seed": 42},
    "slime": {"--seed": 1234, "--rollout-seed": 42},
}
ARGUMENTS = ("utils", "arguments.py")
READ_LIMIT = 4 << 20
_CALLS = ("add_argument", "reset_arg")


class Defaults(msgspec.Struct, frozen=True):
    """Seed values a trainer took from its defaults, and where each was read (`seeds.defaults`)."""

    values: dict[str, object] = msgspec.field(default_factory=dict)  # `seeds` key -> value
    sources: dict[str, str] = msgspec.field(default_factory=dict)  # `seeds` key -> where it was read


def _call_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return node.func.id if isinstance(node.func, ast.Name) else None


def parser_defaults(path: Path, flags: Sequence[str]) -> dict[str, object]:
    """The literal `default=` of the last `add_argument`/`reset_arg` call naming each flag in the
    Python file `path` (a flag whose last call has no literal default is left out)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            tree = ast.parse(f.read(READ_LIMIT))
    except (OSError, SyntaxError, ValueError):
        return {}
    found: list[tuple[int, int, str, ast.expr | None]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _call_name(node) not in _CALLS:
            continue
        named = {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
        default = next((k.value for k in node.keywords if k.arg == "default"), None)
        found += [(node.lineno, node.col_offset, flag, default) for flag in flags if flag in named]
    out: dict[str, object] = {}
    for _, _, flag, default in sorted(found, key=lambda item: (item[0], item[1])):
        out.pop(flag, None)
        try:
            out[flag] = ast.literal_eval(default) if default is not None else None
        except (ValueError, TypeError, SyntaxError, RecursionError):
            continue  # not a literal: unknown from here
    return {flag: value for flag, value in out.items() if value is not None}  # argparse's None: no seed to record


def arguments_file(framework: str, script: Path | None) -> Path | None:
    """The framework's parser source: beside the training script, else where it would be imported from."""
    if script is not None:
        beside = script.parent.joinpath(framework, *ARGUMENTS)
        if beside.is_file():
            return beside
    try:
        spec = importlib.util.find_spec(framework)  # a top-level name: finds, runs nothing
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        candidate = Path(folder).joinpath(*ARGUMENTS)
        if candidate.is_file():
            return candidate
    return None


def seed_defaults(framework: str | None, script: Path | None, missing: Sequence[str], shown: str = "") -> Defaults:
    """The defaults of the `seeds` keys in `missing` (module doc for the order); `shown`: how
    the sources are named (a path prefix to drop, e.g. the repository root)."""
    flags = [SEED_FLAGS[k] for k in missing if k in SEED_FLAGS]
    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    places: list[tuple[Path | None, str]] = []
    if framework in TABLE:
        places.append((arguments_file(framework, script), f"{framework}'s parser"))
    if script is not None and script.suffix == ".py":
        places.append((script, "the training script's parser"))
    for path, what in places:
        if path is None:
            continue
        read = parser_defaults(path, [f for f in flags if f not in values])
        name = str(path)[len(shown) :].lstrip("/") if shown and str(path).startswith(shown) else str(path)
        for flag, value in read.items():
            values[flag], sources[flag] = value, f"{what} ({name})"
    for flag, value in TABLE.get(framework or "", {}).items():
        if flag in flags and flag not in values:
            values[flag], sources[flag] = value, f"{framework}'s default (ledger's table: {framework} has no parser here)"
    keys = {flag: key for key, flag in SEED_FLAGS.items()}
    return Defaults({keys[f]: v for f, v in values.items()}, {keys[f]: s for f, s in sources.items()})
