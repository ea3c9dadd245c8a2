"""Which trainer a training command runs, and so which debug-data flags it accepts.

ledger adds debug-data flags for replay (`--save-debug-rollout-data`, `--save-debug-event-data`)
only to a trainer known to have them (miles-facts.md):

- Miles: both flags;
- slime (THUDM/slime): `--save-debug-rollout-data` only (it has no event data, and part of its
  parsing uses `parse_known_args`, so an unknown flag would pass silently);
- a script that names the flags in its own code (a trainer speaking Miles' command line, like
  the bundled toy): the flags it names;
- any other trainer: none, unless `.ledger.yaml` says which (`capture.debug_framework`).

Recognised, in order: `.ledger.yaml`; the entry script's imports (`import miles...`,
`from slime... import`); the debug flags its code names as string literals; the image facts
(a recorded Miles commit). Standard library only: the PATH wrappers (`shim`) import this module.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

ROLLOUT_FLAG = "--save-debug-rollout-data"
EVENTS_FLAG = "--save-debug-event-data"
FLAGS: dict[str, tuple[str, ...]] = {"miles": (ROLLOUT_FLAG, EVENTS_FLAG), "slime": (ROLLOUT_FLAG,), "none": ()}
READ_LIMIT = 1 << 20
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(miles|slime)(?:\.[\w.]+)?[ \t]+import\b|import[ \t]+(miles|slime)\b)", re.M)


def _literal(flag: str) -> re.Pattern[str]:
    return re.compile(r"""["']""" + re.escape(flag) + r"""(?:=)?["']""")


def _code(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(READ_LIMIT)
    except OSError:
        return None
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def detect(script: str | None, cwd: str, configured: str | None = None, miles_image: bool = False) -> tuple[str, str, tuple[str, ...]]:
    """(framework, how it was recognised, the debug flags to add) for the entry script `script`
    (relative to `cwd`). Framework is `miles`, `slime`, `declared` (the script names the flags),
    `none` (configured off) or `unknown`."""
    if configured:
        return configured, "capture.debug_framework in .ledger.yaml", FLAGS.get(configured, ())
    name = os.path.basename(script) if script else "the training script"
    text = _code(os.path.join(cwd, script)) if script else None
    if text is not None:
        found = _IMPORT.search(text)
        if found:
            framework = found.group(1) or found.group(2)
            return framework, f"{name} imports {framework}", FLAGS[framework]
        named = tuple(flag for flag in FLAGS["miles"] if _literal(flag).search(text))
        if named:
            return "declared", f"{name} names {', '.join(named)} in its code", named
    if miles_image:
        return "miles", "the image has a Miles checkout", FLAGS["miles"]
    if text is None:
        return "unknown", f"{name} could not be read", ()
    return "unknown", f"{name} imports neither miles nor slime and names no debug-data flag", ()


def keep_flags(add: Sequence[Sequence[str]], allowed: Sequence[str]) -> list[list[str]]:
    """The `[flag, value]` pairs of `add` whose flag the framework has."""
    return [list(pair) for pair in add if pair and pair[0] in allowed]


def off_hint(log_tail: str) -> str | None:
    """One line saying how to turn the debug-data flags off, when a trainer refused one."""
    found = re.search(r"unrecognized arguments:[^\n]*(--save-debug-[\w-]+)", log_tail)
    if not found:
        return None
    return (
        f"the trainer does not accept {found.group(1)}, which ledger added for replay: run with "
        "`ledger run --no-debug-data`, or set `capture.debug_framework: none` (or `slime`, `miles`) "
        "in .ledger.yaml"
    )
