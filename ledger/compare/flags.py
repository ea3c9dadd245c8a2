"""Degenerate runs: a "win" from a run whose groups all got the same reward is not a win.

Read from the metrics Miles logs per rollout (`perf N:` lines and metric events, `rollout/` prefix
or none): `zero_std/all_zero_percentage` and `zero_std/all_one_percentage` (the fractions of GRPO
groups whose rewards are all 0 / all 1, despite the name), `truncated_ratio`, `repetition_frac`,
and the trainer's `train/train_rollout_logprob_abs_diff`. Never from the rollout `.pt` files: a
pulled one is untrusted data, and unpickling it could run code.

On the compared steps a run is flagged

- `zero-std`: when at least half of the groups have zero reward spread (the mean over those steps):
  such groups give no policy gradient. Miles counts the groups whose rewards are all `r` as
  `zero_std/count_<r>`, `r` rounded to one decimal, one count per value; the groups are
  `--rollout-batch-size` of them (the run's recorded setting), so the share is every count over
  that number: groups that all got 0.5 count as surely as all-0 and all-1 ones. A run recorded
  without the setting falls back to the all-0 plus all-1 shares, the other counts added where a
  count and its share give the number of groups;
- `truncated`: when at least a quarter of the samples were cut at the length limit,

the thresholds Miles' own dashboard warns at (`miles/dashboard/advisory.py`). Repetition and the
train/rollout log-prob difference ride along as context (Miles gives them no threshold).
A value above 1 is read as a percentage.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping

import msgspec

from ledger.metrics.table import MetricsTable

ZERO_STD_WARN = 0.5
TRUNCATED_WARN = 0.25
_ALL_ZERO, _ALL_ONE = "zero_std/all_zero_percentage", "zero_std/all_one_percentage"
_COUNT = "zero_std/count_"
GROUPS_SETTING = "rollout-batch-size"  # prompts per rollout: the number of GRPO groups (miles-facts.md)
_TRUNCATED, _REPETITION = "truncated_ratio", "repetition_frac"
_LOGPROB_DIFF = "train/train_rollout_logprob_abs_diff"
# the names `_get` and `_zero_spread` read (beside those holding `_COUNT`): a table with none of
# them has no per-step flag value, and is not walked step by step
_FLAG_NAMES = frozenset(n for name in (_ALL_ZERO, _ALL_ONE, _TRUNCATED, _REPETITION) for n in (name, f"rollout/{name}"))


class RunFlag(msgspec.Struct, frozen=True):
    """One degenerate-run flag: the run, the flag, its mean value, and the steps at or over the line."""

    run: str
    flag: str  # "zero-std" | "truncated"
    value: float
    steps: list[int]
    threshold: float
    context: dict[str, float] = msgspec.field(default_factory=dict)

    def describe(self) -> str:
        """The flag as a phrase (`75% of groups had zero reward spread`)."""
        what = "of groups had zero reward spread (no policy gradient)" if self.flag == "zero-std" else "of samples were truncated"
        return f"{self.value:.0%} {what}; Miles warns at {self.threshold:.0%}"


def _get(metrics: Mapping[str, float], name: str) -> float | None:
    for key in (f"rollout/{name}", name):
        value = metrics.get(key)
        if value is not None and math.isfinite(value):
            return value / 100.0 if value > 1.0 else value
    return None


def groups_of(settings: Mapping[str, object] | None) -> int | None:
    """The number of groups per rollout, from a run's recorded `rollout-batch-size` (None when absent)."""
    value = (settings or {}).get(GROUPS_SETTING)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _zero_spread(metrics: Mapping[str, float], groups: int | None = None) -> float | None:
    counts = {k.rsplit(_COUNT, 1)[1]: v for k, v in metrics.items() if _COUNT in k and not k.startswith("eval/") and math.isfinite(v)}
    if groups and counts:  # every constant reward, over the recorded number of groups
        return min(sum(counts.values()) / groups, 1.0)
    zero, one = _get(metrics, _ALL_ZERO), _get(metrics, _ALL_ONE)
    if zero is None and one is None:
        return None
    share = (zero or 0.0) + (one or 0.0)
    derived = None  # total groups, from a count and its share
    for label, fraction in (("0.0", zero), ("1.0", one)):
        if fraction and counts.get(label):
            derived = counts[label] / fraction
    if derived:
        share += sum(v for k, v in counts.items() if k not in ("0.0", "1.0")) / derived
    return min(share, 1.0)


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def degenerate_flags(run: str, table: MetricsTable | None, steps: Iterable[int] | None = None, groups: int | None = None) -> list[RunFlag]:
    """The flags of one run over `steps` (rollout ids; None: every step it logged); `groups`: its
    number of groups per rollout (`groups_of` its settings), None when not recorded."""
    if table is None:
        return []
    wanted = sorted(table.rows) if steps is None else sorted(set(steps) & table.rows.keys())
    per_step: dict[str, dict[int, float]] = {"zero-std": {}, "truncated": {}, _REPETITION: {}}
    names: set[str] = set().union(*(table.rows[step].metrics.keys() for step in wanted))
    if names.isdisjoint(_FLAG_NAMES) and not any(_COUNT in name for name in names):
        wanted = []
    for step in wanted:
        metrics = table.rows[step].metrics
        for key, value in (
            ("zero-std", _zero_spread(metrics, groups)),
            ("truncated", _get(metrics, _TRUNCATED)),
            (_REPETITION, _get(metrics, _REPETITION)),
        ):
            if value is not None:
                per_step[key][step] = value
    context: dict[str, float] = {}
    repetition = _mean(list(per_step[_REPETITION].values()))
    if repetition is not None:
        context[_REPETITION] = repetition
    logprob = _mean([m[_LOGPROB_DIFF] for m in table.train_steps.values() if _LOGPROB_DIFF in m and math.isfinite(m[_LOGPROB_DIFF])])
    if logprob is not None:
        context[_LOGPROB_DIFF] = logprob
    flags = []
    for flag, threshold in (("zero-std", ZERO_STD_WARN), ("truncated", TRUNCATED_WARN)):
        values = per_step[flag]
        mean = _mean(list(values.values()))
        if mean is not None and mean >= threshold:
            flags.append(RunFlag(run, flag, mean, [s for s, v in values.items() if v >= threshold], threshold, dict(context)))
    return flags


def flags_json(flags: Iterable[RunFlag]) -> list[dict[str, object]]:
    """`flags` of `ledger diff --json`: [{run, flag, value, steps, threshold, context}]."""
    return [
        {"run": f.run, "flag": f.flag, "value": f.value, "steps": list(f.steps), "threshold": f.threshold, "context": dict(f.context)}
        for f in flags
    ]
