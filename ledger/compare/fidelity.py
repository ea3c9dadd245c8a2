"""`replay.fidelity`: did a replay train as the run it replays did, on the steps both have?

Compared: every learning metric (not timing: `stats.is_timing`; not a step counter such as
`rollout/step` or `train/step`, which is an axis) that both runs logged at a common step, on the
original's step numbers. Rollout rows are matched through the replay's mapping (`--steps 2:5`
replays rollouts 2, 3, 4 as 0, 1, 2); train steps through the same mapping when the replay logged
the same number of train steps per rollout as it replayed rollouts.

Verdicts: `bitwise` (every common value identical, NaN equal to NaN), `close` (largest relative
difference below 1e-6), `diverged` (with the first step and metric, in step order, whose values
differ by more), `not comparable` (a replay of rollouts that start after 0 trains from the
initial weights, not the original's at that step: its training metrics are not expected to match,
so a difference is no divergence; the reason is part of the verdict's line), `unknown` (no common
step or metric, with the reason).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, TypedDict

from ledger.compare.stats import is_timing
from ledger.configload import load_config
from ledger.metrics.jsonl import read_metrics_jsonl
from ledger.metrics.store import load_metrics
from ledger.metrics.table import MetricsTable
from ledger.runrecord import RunRecord
from ledger.storage.store import check_ledger_branch, find_run

CLOSE = 1e-6


class FirstDifference(TypedDict):
    """The first value, in step order, that differs by `CLOSE` or more: where, and both values."""

    kind: str  # "rollout" or "train step"
    step: int  # the original's step
    replay_step: int
    metric: str
    source: float
    replay: float


class Verdict(TypedDict, total=False):
    """`replay.fidelity` as the manifest keeps it (module docstring), its keys in the order written."""

    compared: int  # values compared
    steps: int  # steps they were on
    max_rel_diff: float
    verdict: str  # bitwise / close / diverged / not comparable / unknown
    reason: str  # why unknown, or not comparable
    first_difference: FirstDifference
    note: str


def _rel(a: float, b: float) -> float:
    if math.isnan(a) and math.isnan(b):
        return 0.0
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
        return 0.0 if a == b else math.inf
    scale = max(abs(a), abs(b))
    return 0.0 if scale == 0 else abs(a - b) / scale


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


# (kind, the replay's step, the original's step, the replay's metrics, the original's)
Pair = tuple[str, int, int, dict[str, float], dict[str, float]]
STEP_COUNTER = re.compile(r"(?:^|/)(?:step|steps|global_step|train_step|rollout_id|rollout_step|iteration|iter|epoch)$")


def is_step_counter(name: str, values: list[tuple[int, float]]) -> bool:
    """Whether a metric is a step axis, not something learned: named as a step counter
    (`rollout/step`, `train/step`), or equal to its own step number at every step it was logged."""
    return bool(STEP_COUNTER.search(name)) or (len(values) >= 2 and all(float(v) == float(step) for step, v in values))


def _train_mapping(source: MetricsTable, replay: MetricsTable, mapping: dict[int, int]) -> dict[int, int]:
    """The replay's train steps on the original's numbers: with k train steps per replayed rollout
    (the same k in the original), replay step j is rollout j // k, its (j % k)th step."""
    if not replay.rows or not replay.train_steps or not source.rows or not source.train_steps:
        return {}
    k, rest = divmod(len(replay.train_steps), len(replay.rows))
    k_source, rest_source = divmod(len(source.train_steps), len(source.rows))
    if rest or rest_source or k == 0 or k != k_source:
        return {}
    first = min(replay.train_steps)
    base = min(source.train_steps)
    out = {}
    for step in replay.train_steps:
        rollout, within = divmod(step - first, k)
        if rollout in mapping:
            out[step] = base + mapping[rollout] * k + within
    return out


def _pairs(
    source: MetricsTable, replay: MetricsTable, mapping: dict[int, int] | None
) -> list[tuple[str, int, int, dict[str, float], dict[str, float]]]:
    """(kind, replay step, original step, the replay's metrics, the original's) for every step both have."""
    pairs: list[Pair] = []
    for new, row in sorted(replay.rows.items()):
        old = mapping.get(new) if mapping else new
        if old is not None and old in source.rows:
            pairs.append(("rollout", new, old, row.metrics, source.rows[old].metrics))
    train = _train_mapping(source, replay, mapping) if mapping else {s: s for s in replay.train_steps}
    for step, metrics in sorted(replay.train_steps.items()):
        old = train.get(step)
        if old is not None and old in source.train_steps:
            pairs.append(("train step", step, old, metrics, source.train_steps[old]))
    return pairs


def _axes(pairs: list[Pair]) -> set[str]:
    """The metrics that are step counters in the original (see `is_step_counter`)."""
    seen: dict[str, list[tuple[int, float]]] = {}
    for _kind, _new, old, _mine, theirs in pairs:
        for name, value in theirs.items():
            seen.setdefault(name, []).append((old, value))
    return {name for name, values in seen.items() if is_step_counter(name, values)}


def compare(source: MetricsTable, replay: MetricsTable, mapping: dict[int, int] | None) -> Verdict:
    """The fidelity verdict of `replay` against `source` (module docstring)."""
    pairs = _pairs(source, replay, mapping)
    axes = _axes(pairs)
    compared = 0
    worst = 0.0
    first: FirstDifference | None = None
    steps: set[tuple[str, int]] = set()
    bitwise = True
    for kind, new, old, mine, theirs in pairs:
        for name in sorted(set(mine) & set(theirs)):
            if is_timing(name) or name in axes:
                continue
            a, b = float(mine[name]), float(theirs[name])
            compared += 1
            steps.add((kind, old))
            if _same(a, b):
                continue
            bitwise = False
            rel = _rel(a, b)
            worst = max(worst, rel)
            if rel >= CLOSE and first is None:
                first = {"kind": kind, "step": old, "replay_step": new, "metric": name, "source": b, "replay": a}
    late = min(mapping.values()) if mapping else 0
    if compared == 0:
        return {"verdict": "unknown", "reason": "no learning metric at a step both runs logged", "compared": 0}
    out: Verdict = {"compared": compared, "steps": len(steps), "max_rel_diff": worst}
    if bitwise:
        out["verdict"] = "bitwise"
    elif first is None:
        out["verdict"] = "close"
    elif late > 0:
        out["verdict"] = "not comparable"
        out["reason"] = f"replayed from rollout {late} without the original's weights at that step (no checkpoint)"
        out["first_difference"] = first
    else:
        out["verdict"] = "diverged"
        out["first_difference"] = first
    if late > 0:
        out["note"] = (
            f"replayed from rollout {late} without the original's weights at that step (no checkpoint): "
            "its training metrics are not expected to match"
        )
    return out


def describe(fidelity: Verdict | None) -> str | None:
    """One line for `ledger show` / `ledger list`."""
    if not isinstance(fidelity, dict) or not fidelity.get("verdict"):
        return None
    verdict = str(fidelity["verdict"])
    if verdict == "diverged" and isinstance(fidelity.get("first_difference"), dict):
        d = fidelity["first_difference"]
        return f"diverged at {d.get('kind')} {d.get('step')} ({d.get('metric')}: {d.get('source')!r} -> {d.get('replay')!r})"
    if verdict == "close":
        return f"close (max rel diff {fidelity.get('max_rel_diff'):.2g})"
    if verdict in ("unknown", "not comparable"):
        return f"{verdict} ({fidelity.get('reason')})"
    return f"{verdict} ({fidelity.get('compared')} values on {fidelity.get('steps')} steps)"


def fidelity_of(repo: Any, record: RunRecord, run_dir: Any) -> Verdict | None:
    """`replay.fidelity` for the replay being recorded (`record`), against its source run on the
    ledger branch; None when `record` is not a replay."""
    source_id = record.replay_of
    if not source_id:
        return None
    path = Path(run_dir) / "metrics.jsonl"
    mine = read_metrics_jsonl(path) if path.exists() else MetricsTable()
    tip = check_ledger_branch(repo, load_config(repo.root, repo.common_dir).branch)
    entry = find_run(repo, tip, str(source_id)) if tip is not None else None
    if entry is None:
        return {"verdict": "unknown", "reason": f"run {source_id} is not on the ledger branch", "compared": 0}
    theirs = load_metrics(repo, entry) or MetricsTable()
    raw_mapping = record.replay.mapping if record.replay is not None else None
    mapping = {int(k): int(v) for k, v in raw_mapping.items()} if isinstance(raw_mapping, dict) else None
    return compare(theirs, mine, mapping)
