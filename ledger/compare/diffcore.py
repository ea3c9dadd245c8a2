"""The pure core of `ledger diff` and `ledger log`: what changed, and what it did to timing.

`ledger diff A B` is an experiment with one variable: it refuses unless exactly one setting differs
(after `ignore` globs), then compares per-step timing over the steps BOTH runs have. Comparing
medians over all steps would be wrong when one run is longer (later steps are often faster), so
each metric is compared on its common steps only; steps that only one run has are counted and
named; steps that overlap a heat pause in either run are left out and counted.

Beside `perf/rollout_time`, the same steps also give `rollout/response_len/mean` and the derived
`perf/rollout_time_per_1k_tokens` = rollout_time / (response_len_mean / 1000): seconds of rollout
per thousand tokens of mean response length, which separates "the engine got slower" from "the
model started writing longer answers".

`DiffReport.to_json_dict()` schema (version 1):

    {"version": 1, "a": id, "b": id, "refused": bool, "forced": bool,
     "changed": [{"name": str, "a": value|"<absent>", "b": value|"<absent>"}],
     "warnings": [str], "suggested_baseline": id|null, "suggested_baselines": [id],
     "code_files": [path], "code_note": str|null, "timing_unavailable": str|null,
     "malformed": {"a": int, "b": int},
     "timing": [{"metric": str, "common_steps": int, "only_a": [int], "only_b": [int],
                 "excluded_paused": int, "median_a": float|null, "median_b": float|null,
                 "median_ratio": float|null, "ratio_ci": [low, high]|null,
                 "confidence": float}],
     "steps_metric": str|null,
     "steps": [{"step": int, "a": float|null, "b": float|null, "ratio": float|null,
                "diff": float|null}],
     "learning_unavailable": str|null, "same_samples": bool,
     "metric_unmatched": [glob], "metrics_logged": [str],
     "learning": [{"metric": str, "axis": "train step"|"rollout", "common_steps": int,
                   "only_a": int, "only_b": int, "mean_a": float, "mean_b": float,
                   "median_a": float, "median_b": float, "median_diff": float|null,
                   "diff_ci": [low, high]|null, "confidence": float,
                   "first_divergence": int|null, "identical_before": bool,
                   "first_bitwise_difference": int|null,
                   "first_diffs": [{"step": int, "a": float, "b": float, "diff": float}]}],
     "repeat": bool,
     "noise": null | {"replicas_a": [id], "replicas_b": [id], "method": str, "method_text": str,
               "any_age": bool, "max_age_hours": float, "session": [str],
               "metrics": [{"metric": str, "axis": "train step"|"rollout", "steps": int,
                            "replicas": [int, int], "mean_a": float, "mean_b": float,
                            "diff": float, "diff_ci": [low, high]|null, "noise_floor": float|null,
                            "verdict": "beyond noise"|"within noise"|"no replicas"|"repeat",
                            "method": "welch"|"pooled-t"|"exact"|"per-step"|"repeat",
                            "df": float|null, "permutation_p": float|null, "confidence": float}]},
     "flags": [{"run": id, "flag": "zero-std"|"truncated", "value": float, "steps": [int],
                "threshold": float, "context": {name: float}}],
     "baseline_session": [str]}

`steps` holds B−A in `diff` for a learning metric (`--steps train/loss`), the ratio for timing.
`learning` compares training metrics (`ledger.compare.learning`): `median_diff` is the median of
per-step B−A; `first_divergence` the first common step where the runs differ beyond float noise;
`identical_before` whether every common step before it is bitwise equal (expected for replays on
identical samples, which `same_samples` says the two runs are); `first_bitwise_difference` the first
common step that is not bitwise equal (null: every one is).

`repeat`: no setting differs, or only seed settings (`seed`, `rollout-seed`, `diff: replica_keys`):
compared, not refused. `noise` (`ledger.compare.noise`, null when refused) judges every timing and
learning metric against the spread between each side's replicas (`replicas_a[0]` is A,
`replicas_b[0]` is B); `flags` names degenerate runs (`ledger.compare.flags`); `baseline_session`
says when a refusal's suggested baseline ran on another day, host, GPU or driver than B.

Ratios are B/A per step; `median_ratio` is the median of those ratios, not median_b / median_a.
Non-finite numbers are written as null.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

import msgspec

from ledger.compare.changes import Change, changed_settings, suggest_baselines
from ledger.compare.flags import RunFlag, flags_json
from ledger.compare.learning import (
    LearningResult,
    compare_learning,
    learning_json,
    logged_metrics,
    step_diffs,
    unmatched_patterns,
)
from ledger.compare.noise import NoiseReport, noise_json
from ledger.compare.settingsview import comparable, replay_mechanics
from ledger.compare.stats import CONFIDENCE, DEFAULT_METRICS, Pause, StepLine, TimingResult, compare_timing, is_timing, step_table
from ledger.metrics.table import READS, MetricsTable
from ledger.textfmt import ABSENT
from ledger.timefmt import parse_iso

__all__ = [
    "ABSENT",
    "CONFIDENCE",
    "DEFAULT_METRICS",
    "DiffReport",
    "StepLine",
    "TimingResult",
    "build_report",
    "compare_timing",
    "context_warnings",
    "pauses_from_manifest",
    "step_table",
]


# ---------------------------------------------------------------------------- context


def pauses_from_manifest(manifest: Mapping[str, Any]) -> list[Pause]:
    """Heat pauses of a run as (start, end) unix seconds; an open pause runs to +inf."""
    gpu = manifest.get("gpu") or {}
    windows = gpu.get("pause_windows")
    if windows is None and isinstance(gpu.get("pauses"), list):
        windows = gpu["pauses"]
    out = []
    for pause in windows or []:
        start = parse_iso(pause.get("start"))
        end = parse_iso(pause.get("end"))
        if start is not None:
            out.append((start, math.inf if end is None else end))
    return out


def _gpu_facts(manifest: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    gpu = manifest.get("gpu") or {}
    if "gpus" not in gpu:
        return None
    gpus = gpu.get("gpus") or []
    names = tuple(sorted(str(g.get("name")) for g in gpus))
    drivers = tuple(sorted({str(g.get("driver_version")) for g in gpus}))
    return names, drivers


def context_warnings(ma: Mapping[str, Any], mb: Mapping[str, Any], max_age_hours: float = 24) -> list[str]:
    """Reasons to distrust a timing comparison that no setting explains."""
    warnings = []
    host_a = (ma.get("host") or {}).get("hostname")
    host_b = (mb.get("host") or {}).get("hostname")
    if host_a != host_b:
        warnings.append(f"different hosts: {host_a} vs {host_b}")
    gpu_a, gpu_b = _gpu_facts(ma), _gpu_facts(mb)
    if gpu_a is None or gpu_b is None:
        missing = " and ".join(x for x, g in (("A", gpu_a), ("B", gpu_b)) if g is None)
        warnings.append(f"GPU facts unavailable for {missing}")
    else:
        if gpu_a[0] != gpu_b[0]:
            warnings.append(f"different GPUs: {', '.join(gpu_a[0])} vs {', '.join(gpu_b[0])}")
        if gpu_a[1] != gpu_b[1]:
            warnings.append(f"different GPU drivers: {', '.join(gpu_a[1])} vs {', '.join(gpu_b[1])}")
    start_a, start_b = parse_iso(ma.get("started")), parse_iso(mb.get("started"))
    if start_a is not None and start_b is not None:
        hours = abs(start_b - start_a) / 3600
        if hours > max_age_hours:
            warnings.append(f"runs started {hours:.1f} h apart (more than {max_age_hours:g} h)")
    for label, manifest in (("A", ma), ("B", mb)):
        state = (manifest.get("status") or {}).get("state")
        if state != "finished":
            warnings.append(f"run {label} ({manifest.get('id')}) did not finish: {state}")
    replay_a, replay_b = ma.get("replay_of"), mb.get("replay_of")
    if bool(replay_a) != bool(replay_b):
        which, of = ("A", replay_a) if replay_a else ("B", replay_b)
        warnings.append(f"only {which} is a replay (of {of}); replays skip rollout generation")
    return warnings


# ---------------------------------------------------------------------------- report


def _json_number(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _json_value(value: Any) -> Any:
    return "<absent>" if value is ABSENT else value


class DiffReport(msgspec.Struct):
    """Everything `ledger diff` found; `render.render_text` and `to_json_dict` present it."""

    a: str
    b: str
    refused: bool
    forced: bool
    changed: list[Change]
    warnings: list[str] = msgspec.field(default_factory=list)
    timing: list[TimingResult] = msgspec.field(default_factory=list)
    timing_unavailable: str | None = None
    steps_metric: str | None = None
    steps: list[StepLine] = msgspec.field(default_factory=list)
    suggested_baseline: str | None = None
    suggested_baselines: list[str] = msgspec.field(default_factory=list)  # newest first, up to MAX_BASELINES
    code_files: list[str] = msgspec.field(default_factory=list)  # files behind a `code` change (codeset rule)
    code_note: str | None = None  # "only files that are not code differ: ..." (not a difference)
    malformed_a: int = 0
    malformed_b: int = 0
    learning: list[LearningResult] = msgspec.field(default_factory=list)
    learning_unavailable: str | None = None
    same_samples: bool = False
    metric_unmatched: list[str] = msgspec.field(default_factory=list)
    metrics_logged: list[str] = msgspec.field(default_factory=list)
    # A and B are repeats (no setting, or only seeds, differ); each metric judged against
    # the replicas' noise (`ledger.compare.noise`); degenerate runs (`ledger.compare.flags`)
    repeat: bool = False
    noise: NoiseReport | None = None
    flags: list[RunFlag] = msgspec.field(default_factory=list)
    baseline_session: list[str] = msgspec.field(default_factory=list)

    def to_json_dict(self) -> dict[str, Any]:
        """The report as plain JSON data (schema in the module docstring)."""
        return {
            "version": 1,
            "a": self.a,
            "b": self.b,
            "refused": self.refused,
            "forced": self.forced,
            "changed": [{"name": c.name, "a": _json_value(c.a), "b": _json_value(c.b)} for c in self.changed],
            "warnings": list(self.warnings),
            "suggested_baseline": self.suggested_baseline,
            "suggested_baselines": list(self.suggested_baselines),
            "code_files": list(self.code_files),
            "code_note": self.code_note,
            "timing_unavailable": self.timing_unavailable,
            "malformed": {"a": self.malformed_a, "b": self.malformed_b},
            "timing": [
                {
                    "metric": t.metric,
                    "common_steps": t.common_steps,
                    "only_a": list(t.only_a),
                    "only_b": list(t.only_b),
                    "excluded_paused": t.excluded_paused,
                    "median_a": _json_number(t.median_a),
                    "median_b": _json_number(t.median_b),
                    "median_ratio": _json_number(t.median_ratio),
                    "ratio_ci": list(t.ratio_ci) if t.ratio_ci else None,
                    "confidence": t.confidence,
                }
                for t in self.timing
            ],
            "steps_metric": self.steps_metric,
            "steps": [
                {
                    "step": s.step,
                    "a": _json_number(s.a),
                    "b": _json_number(s.b),
                    "ratio": _json_number(s.ratio),
                    "diff": _json_number(s.diff),
                }
                for s in self.steps
            ],
            "learning_unavailable": self.learning_unavailable,
            "same_samples": self.same_samples,
            "metric_unmatched": list(self.metric_unmatched),
            "metrics_logged": list(self.metrics_logged),
            "learning": [learning_json(r) for r in self.learning],
            "repeat": self.repeat,
            "noise": noise_json(self.noise),
            "flags": flags_json(self.flags),
            "baseline_session": list(self.baseline_session),
        }


def _timing_gap(table_a: MetricsTable | None, table_b: MetricsTable | None) -> str | None:
    for label, table in (("A", table_a), ("B", table_b)):
        if table is None:
            return f"run {label} recorded no per-step metrics in any format ledger reads ({READS})"
        if not table.rows:
            return (
                f"run {label} logged train-step metrics only (`step N:` lines), "
                "no per-rollout ones (`perf N:`/`rollout N:` lines or metric events)"
            )
    assert table_a is not None and table_b is not None
    if not set(table_a.rows) & set(table_b.rows):
        return "the runs have no rollout step in common"
    return None


def build_report(
    ma: Mapping[str, Any],
    mb: Mapping[str, Any],
    table_a: MetricsTable | None,
    table_b: MetricsTable | None,
    ignore: Sequence[str] = (),
    metrics: Sequence[str] = (),
    force: bool = False,
    earlier_runs: Iterable[Mapping[str, Any]] = (),
    max_age_hours: float = 24,
    steps_metric: str | None = None,
    replica_keys: Sequence[str] = (),
) -> DiffReport:
    """Compare run A (`ma`, `table_a`) with run B: settings, context, timing on common steps.

    Refused when not exactly one setting differs and not `force`; a refused report carries the
    suggested baseline (an earlier run one setting away from B) and no timing. A table is None
    when that run has no metrics at all. `steps_metric` fills the per-step table for `--steps`.
    """
    changed = changed_settings(comparable(ma), comparable(mb), [*ignore, *replay_mechanics(ma, mb)])
    repeat = is_repeat(changed, replica_keys)
    report = DiffReport(
        a=str(ma.get("id")),
        b=str(mb.get("id")),
        refused=len(changed) != 1 and not repeat and not force,
        forced=force and len(changed) != 1 and not repeat,
        changed=changed,
        repeat=repeat,
        warnings=context_warnings(ma, mb, max_age_hours),
        malformed_a=table_a.malformed if table_a else 0,
        malformed_b=table_b.malformed if table_b else 0,
    )
    report.warnings += _malformed_warnings(table_a, table_b)
    if report.refused:
        report.suggested_baselines = suggest_baselines(mb, earlier_runs, ignore)
        report.suggested_baseline = report.suggested_baselines[0] if report.suggested_baselines else None
        return report
    report.metrics_logged = logged_metrics(table_a, table_b)
    report.metric_unmatched = unmatched_patterns([*metrics, *([steps_metric] if steps_metric else [])], report.metrics_logged)
    report.timing_unavailable = _timing_gap(table_a, table_b)
    if report.timing_unavailable is None and table_a is not None and table_b is not None:
        pauses_a, pauses_b = pauses_from_manifest(ma), pauses_from_manifest(mb)
        report.timing = compare_timing(table_a.rows, table_b.rows, metrics, pauses_a, pauses_b)
    report.same_samples = same_samples(ma, mb)
    report.learning = compare_learning(table_a, table_b, metrics)
    if not report.learning:
        report.learning_unavailable = _learning_gap(table_a, table_b)
    if steps_metric:
        report.steps_metric = steps_metric
        report.steps = _step_lines(table_a, table_b, steps_metric)
    return report


def _malformed_warnings(table_a: MetricsTable | None, table_b: MetricsTable | None) -> list[str]:
    """One warning per run whose log had metric lines that did not parse, with examples."""
    out = []
    for label, table in (("A", table_a), ("B", table_b)):
        if table is not None and table.malformed:
            examples = "; ".join(table.malformed_examples[:3])
            out.append(f"{table.malformed} malformed metric line(s) in run {label}: {examples}")
    return out


def _step_lines(table_a: MetricsTable | None, table_b: MetricsTable | None, metric: str) -> list[StepLine]:
    """`--steps METRIC`: A and B on each common step (a learning metric's difference, or a timing's ratio)."""
    diffs = None if is_timing(metric) else step_diffs(table_a, table_b, metric)
    if diffs is not None:
        return [StepLine(d.step, d.a, d.b, d.b / d.a if d.a else None, d.diff) for d in diffs]
    if table_a is not None and table_b is not None:
        return step_table(table_a.rows, table_b.rows, metric)
    return []


def is_repeat(changed: Sequence[Change], replica_keys: Sequence[str] = ()) -> bool:
    """A and B are repeats: no setting differs, or only seed settings (`replica_keys` globs) do.

    Such a diff is not refused: the size of the difference between two repeats is the noise.
    """
    return all(any(fnmatchcase(c.name, k) for k in replica_keys) for c in changed)


def _learning_gap(table_a: MetricsTable | None, table_b: MetricsTable | None) -> str:
    if table_a is None or table_b is None:
        return f"run {'A' if table_a is None else 'B'} recorded no per-step metrics in any format ledger reads"
    return "no training metric (loss, grad norm, reward, KL, entropy, clip fraction, eval) on common steps"


def same_samples(ma: Mapping[str, Any], mb: Mapping[str, Any]) -> bool:
    """Both runs replay the same recorded rollouts onto the same step numbers."""
    src_a, src_b = ma.get("replay_of"), mb.get("replay_of")
    mapping_a = (ma.get("replay") or {}).get("mapping")
    mapping_b = (mb.get("replay") or {}).get("mapping")
    return bool(src_a) and src_a == src_b and mapping_a == mapping_b
