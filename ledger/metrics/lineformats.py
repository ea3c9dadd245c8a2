"""Per-step metric lines of trainers other than Miles: `key=value`, `key: value` and JSON lines.

Miles' own `step N: {...}` lines are read by `ledger.metrics.logparse`; these are what any other
trainer tends to print, one line per step (the shapes in tests/test_metrics_sources.py):

    step 3: loss=0.41 reward=0.52 grad_norm=1.1                 key=value, with a step number
    epoch 1 step 20 | loss: 0.41 | acc: 0.9                     key: value
    iteration 10/ 100 | lm loss: 2.3E+00 | grad norm: 1.2 |      Megatron's training log line
    Epoch 1: 100%|█████| 10/10 [00:01<00:00, loss=0.41, v_num=0]  a Lightning progress bar
    {"step": 3, "loss": 0.41, "train": {"reward": 0.52}}       a JSON line (nested keys: train/reward)

A line counts when it names its step (`step`, `global_step`, `iteration`, `iter` or `epoch`,
preferred in that order, followed by a whole number; in a JSON object the same names, `_step`,
or a key ending in `/step`) and gives at least one other number. The step words are axes, never
metrics. `|`-separated fields may have keys of several words (`lm loss`); elsewhere a key is one
word (`loss`, `train/loss`, `grad_norm`).

`may_hold_metrics` is the cheap test of a block (a few substring searches) before any regex.
"""

from __future__ import annotations

import ast
import functools
import json
import mmap
import re
from collections.abc import Mapping
from typing import Any

import msgspec

# the step words, most specific first: `epoch 2 step 150` is step 150
AXES = ("step", "global_step", "iteration", "iter", "epoch")
_JSON_AXES = ("step", "global_step", "_step", "iteration", "iter", "epoch")
_PREFILTER = (b"step", b"Step", b"STEP", b"iter", b"Iter", b"ITER", b"epoch", b"Epoch", b"EPOCH")
KEY_VALUE, JSON_LINES = "key-value lines", "json lines"

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[nN]a[nN]|-?inf"
# a step word then its number (`step 3`, `step=3`, `Step: 3`, `iteration 10/ 100`, `train/step 3`)
_AXIS = re.compile(r"(?i)(?<![\w.-])(global_step|step|iteration|iter|epoch)[ \t]*[=:#]?[ \t]*(\d+)(?![\w.])")
# where a metric line may be: a step word anywhere (`_step` too); `parse_line` decides
FINDER = re.compile(rb"(?i)step|iter|epoch")
_WORD_PAIR = re.compile(r"(?<![\w./-])([A-Za-z_][\w./-]*)[ \t]*[=:][ \t]*(" + _NUMBER + r")(?![\w.:/])")
# a whole `|`-separated field, its key of one or more words (`lm loss: 2.3E+00`, `elapsed time (ms): 5`)
_FIELD_PAIR = re.compile(r"\s*([A-Za-z_][\w./-]*(?: +[A-Za-z_(][\w./()-]*)*)\s*[=:]\s*(" + _NUMBER + r")\s*")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class MetricLine(msgspec.Struct, frozen=True):
    """One line's step and its numbers (`fmt`: KEY_VALUE or JSON_LINES)."""

    step: int
    metrics: dict[str, float]
    fmt: str


def may_hold_metrics(data: bytes | mmap.mmap) -> bool:
    """Whether a block of output can hold a metric line at all (no regex: substring searches)."""
    return any(data.find(word) >= 0 for word in _PREFILTER)


_AXIS_NAMES = frozenset((*AXES, "_step"))


@functools.lru_cache(maxsize=4096)  # a trainer prints the same few keys on every line
def _is_axis(key: str) -> bool:
    return key.rsplit("/", 1)[-1].lower() in _AXIS_NAMES


def flat_numbers(obj: Mapping[Any, Any], prefix: str = "") -> dict[str, float]:
    """The numbers of a (nested) mapping, nested keys joined by `/`; booleans and text left out."""
    out: dict[str, float] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat_numbers(value, name + "/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value)
    return out


def object_step(obj: Mapping[Any, Any]) -> int | None:
    """The step a metric object names (`step`, `global_step`, `_step`, ..., a `*/step` key), or None."""
    for key in _JSON_AXES:
        value = obj.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer():
            return int(value)
    for key, value in obj.items():
        if isinstance(key, str) and key.endswith("/step") and isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def object_metrics(obj: Mapping[Any, Any]) -> dict[str, float]:
    """A metric object's numbers less its step counters."""
    return {k: v for k, v in flat_numbers(obj).items() if not _is_axis(k)}


def _object(text: str) -> dict[Any, Any] | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    body = text[start : end + 1]
    try:
        obj = json.loads(body)
    except ValueError:
        if "'" not in body:
            return None
        try:  # a printed Python dict; a literal only, never code
            obj = ast.literal_eval(body)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
    return obj if isinstance(obj, dict) else None


def _pairs(text: str) -> dict[str, float]:
    if "|" not in text:  # the common line: one-word keys (`float` reads `nan`, `NaN`, `-inf` too)
        return {k: float(v) for k, v in _WORD_PAIR.findall(text) if not _is_axis(k)}
    out: dict[str, float] = {}
    for part in text.split("|"):
        whole = _FIELD_PAIR.fullmatch(part)
        for key, value in [whole.groups()] if whole else _WORD_PAIR.findall(part):
            if not _is_axis(key.strip()):
                out[key.strip()] = float(value)
    return out


def _step(text: str) -> int | None:
    first = _AXIS.search(text)
    if first is None:
        return None
    if first.group(1).lower() == AXES[0]:  # `step N`, the most specific: no need to look further
        return int(first.group(2))
    found = {m.group(1).lower(): int(m.group(2)) for m in reversed(list(_AXIS.finditer(text)))}
    return next((found[axis] for axis in AXES if axis in found), None)


def parse_line(line: str) -> MetricLine | None:
    """The step and metrics of one printed line, or None when it is not a metric line."""
    text = _ANSI.sub("", line) if "\x1b" in line else line
    obj = _object(text) if "{" in text else None
    if obj is not None:  # `{"step": 3, ...}`, or `step 3: {'loss': 0.4}` (the step outside)
        step = object_step(obj)
        step = _step(text[: text.find("{")]) if step is None else step
        metrics = object_metrics(obj)
        return MetricLine(step, metrics, JSON_LINES) if step is not None and metrics else None
    step = _step(text)
    if step is None:
        return None
    metrics = _pairs(text)
    return MetricLine(step, metrics, KEY_VALUE) if metrics else None
