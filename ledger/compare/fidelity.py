"""`replay.fidelity`: did a replay train as the run it replays did, on the steps both have?

Compared: every learning metric (not timing: `stats.is_timing`) that both runs logged at a
common step. Rollout rows are matched through the replay's mapping (`--steps 2:5` replays
rollouts 2, 3, 4 as 0, 1, 2); train steps (`step N:` lines) only when the replay ran every
rollout from 0 (no mapping), since their numbering follows the rollouts replayed.

Verdicts: `bitwise` (every common value identical, NaN equal to NaN), `close` (largest relative
difference below 1e-6), `diverged` (with the first step and metric, in step order, whose values
differ by more), `unknown` (no common step or metric, with the reason). A replay of rollouts
that start after 0 trains from the initial weights, not the original's at that step: a `note`
says its training metrics are not expected to match.
"""

from __future__ import annotations

import math
from typing import Any

from ledger.compare.logparse import MetricsTable

CLOSE = 1e-6


def _rel(a: float, b: float) -> float:
    if math.isnan(a) and math.isnan(b):
        return 0.0
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
        return 0.0 if a == b else math.inf
    scale = max(abs(a), abs(b))
    return 0.0 if scale == 0 else abs(a - b) / scale


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def compare(source: MetricsTable, replay: MetricsTable, mapping: dict[int, int] | None) -> dict[str, Any]:
    """The fidelity verdict of `replay` against `source` (module docstring)."""
    from ledger.compare.stats import is_timing

    pairs: list[tuple[str, int, int, dict[str, float], dict[str, float]]] = []
    for new, row in sorted(replay.rows.items()):
        old = mapping.get(new) if mapping else new
        if old is not None and old in source.rows:
            pairs.append(("rollout", new, old, row.metrics, source.rows[old].metrics))
    if not mapping:
        for step, metrics in sorted(replay.train_steps.items()):
            if step in source.train_steps:
                pairs.append(("train step", step, step, metrics, source.train_steps[step]))
    compared = 0
    worst = 0.0
    first: dict[str, Any] | None = None
    steps: set[tuple[str, int]] = set()
    bitwise = True
    for kind, new, old, mine, theirs in pairs:
        for name in sorted(set(mine) & set(theirs)):
            if is_timing(name):
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
    out: dict[str, Any] = {"compared": compared, "steps": len(steps), "max_rel_diff": worst}
    if bitwise:
        out["verdict"] = "bitwise"
    elif first is None:
        out["verdict"] = "close"
    else:
        out["verdict"] = "diverged"
        out["first_difference"] = first
    if late > 0:
        out["note"] = (
            f"replayed from rollout {late} without the original's weights at that step (no checkpoint): "
            "its training metrics are not expected to match"
        )
    return out


def describe(fidelity: dict[str, Any] | None) -> str | None:
    """One line for `ledger show` / `ledger list`."""
    if not isinstance(fidelity, dict) or not fidelity.get("verdict"):
        return None
    verdict = str(fidelity["verdict"])
    if verdict == "diverged" and isinstance(fidelity.get("first_difference"), dict):
        d = fidelity["first_difference"]
        return f"diverged at {d.get('kind')} {d.get('step')} ({d.get('metric')}: {d.get('source')!r} -> {d.get('replay')!r})"
    if verdict == "close":
        return f"close (max rel diff {fidelity.get('max_rel_diff'):.2g})"
    if verdict == "unknown":
        return f"unknown ({fidelity.get('reason')})"
    return f"{verdict} ({fidelity.get('compared')} values on {fidelity.get('steps')} steps)"


def fidelity_of(repo: Any, m: dict[str, Any], run_dir: Any) -> dict[str, Any] | None:
    """`replay.fidelity` for the replay being recorded (`m`), against its source run on the
    ledger branch; None when `m` is not a replay."""
    from pathlib import Path

    from ledger.compare.logparse import read_metrics_jsonl
    from ledger.compare.metrics_store import load_metrics
    from ledger.configload import load_config
    from ledger.storage.store import check_ledger_branch, find_run

    source_id = m.get("replay_of")
    if not source_id:
        return None
    path = Path(run_dir) / "metrics.jsonl"
    mine = read_metrics_jsonl(path) if path.exists() else MetricsTable()
    tip = check_ledger_branch(repo, load_config(repo.root, repo.common_dir).branch)
    entry = find_run(repo, tip, str(source_id)) if tip is not None else None
    if entry is None:
        return {"verdict": "unknown", "reason": f"run {source_id} is not on the ledger branch", "compared": 0}
    theirs = load_metrics(repo, entry) or MetricsTable()
    info = m.get("replay") or {}
    raw_mapping = info.get("mapping") if isinstance(info, dict) else None
    mapping = {int(k): int(v) for k, v in raw_mapping.items()} if isinstance(raw_mapping, dict) else None
    return compare(theirs, mine, mapping)
