"""The human text of `ledger diff`: what changed first, then warnings, timing, and details.

Values are shown the way they read in a manifest (YAML-ish): `true`, `false`, `null`, numbers as
Python writes them, strings bare unless empty or ambiguous, lists in brackets, `<absent>` for a
setting one run does not have.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ledger.compare.changes import Change
from ledger.compare.diffcore import DiffReport, TimingResult
from ledger.compare.learning import LearningResult
from ledger.compare.noisetext import baseline_session_lines, flag_lines, noise_lines, repeat_lines
from ledger.compare.stats import RESPONSE_LEN, ROLLOUT_TIME_PER_1K
from ledger.textfmt import MISSING, show_value


def _change_line(change: Change) -> str:
    return f"{change.name}: {show_value(change.a)} -> {show_value(change.b)}"


def _number(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return MISSING
    if abs(value) >= 1000:
        return f"{value:.0f}"
    if abs(value) >= 1:
        return f"{value:.3g}" if abs(value) >= 100 else f"{value:.2f}"
    return f"{value:.4g}"


def unit_of(metric: str) -> str:
    """The unit a timing metric is logged in (Miles logs every time in seconds)."""
    if metric == RESPONSE_LEN:
        return "tok"
    if metric == ROLLOUT_TIME_PER_1K:
        return "s/1k tok"
    return "s"


def _with_unit(value: float | None, unit: str) -> str:
    text = _number(value)
    return text if text == MISSING else f"{text} {unit}"


def _ratio(result: TimingResult) -> str:
    if not math.isfinite(result.median_ratio):
        return MISSING
    text = f"{result.median_ratio:.3f}x"
    if result.ratio_ci is not None:
        low, high = result.ratio_ci
        text += f" [{low:.3f}, {high:.3f}]"
    elif 0 < result.common_steps < 6:
        text += " (no CI: n < 6)"
    return text


def _signed(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return MISSING
    return f"{value:+.4g}"


def compact_steps(steps: Sequence[int], limit: int = 8) -> str:
    """Step numbers as ranges (`3-7, 9`), shortened after `limit` pieces."""
    pieces: list[str] = []
    ordered = sorted(steps)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        pieces.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    if len(pieces) > limit:
        return ", ".join(pieces[:limit]) + f", ... ({len(ordered)} steps)"
    return ", ".join(pieces)


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.rjust(w) if c in right else cell.ljust(w) for c, (cell, w) in enumerate(zip(row, widths))]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def _timing_lines(report: DiffReport) -> list[str]:
    if report.timing_unavailable:
        return [f"timing: unavailable ({report.timing_unavailable})"]
    if not report.timing:
        return ["timing: no timing metrics in common"]
    confidence = f"{report.timing[0].confidence:.0%}"
    lines = [f"timing on common steps (ratio = median of per-step B/A [{confidence} CI]):"]
    rows = [["metric", "n", "median A", "median B", "ratio", "only A", "only B", "paused"]]
    for t in report.timing:
        rows.append(
            [
                t.metric,
                str(t.common_steps),
                _with_unit(t.median_a, unit_of(t.metric)),
                _with_unit(t.median_b, unit_of(t.metric)),
                _ratio(t),
                str(len(t.only_a)),
                str(len(t.only_b)),
                str(t.excluded_paused),
            ]
        )
    lines += _table(rows, right={1, 2, 3, 5, 6, 7})
    # Name the unshared steps once per distinct set, not once per metric.
    named: set[tuple[str, tuple[int, ...]]] = set()
    for t in report.timing:
        for label, steps in (("A", t.only_a), ("B", t.only_b)):
            key = (label, tuple(steps))
            if steps and key not in named:
                named.add(key)
                lines.append(f"  steps only in {label} ({t.metric}): {compact_steps(steps)}")
    if any(t.ratio_ci is None and 0 < t.common_steps < 6 for t in report.timing):
        lines.append(f"  no CI: a {confidence} interval for a median needs at least 6 common steps")
    return lines


def _diverges(r: LearningResult, same_samples: bool) -> str:
    inexact = f"{r.axis} {r.first_bitwise_difference}"
    if r.first_divergence is None:
        return "never (bitwise identical)" if r.identical_before else f"never (within float noise from {inexact})"
    text = f"{r.axis} {r.first_divergence}"
    if same_samples:  # where the bits first differ tells a change acting below noise from nondeterminism
        text += "; bitwise identical before" if r.identical_before else f"; NOT bitwise identical from {inexact}"
    return text


def _learning_lines(report: DiffReport) -> list[str]:
    if not report.learning:
        return [f"learning: unavailable ({report.learning_unavailable})"]
    confidence = f"{report.learning[0].confidence:.0%}"
    lines = [f"learning on common steps (diff = median of per-step B-A [{confidence} CI]):"]
    rows = [["metric", "n", "mean A", "mean B", "median A", "median B", "diff", "diverges at"]]
    for r in report.learning:
        diff = _signed(r.median_diff)
        if r.diff_ci is not None:
            diff += f" [{_signed(r.diff_ci[0])}, {_signed(r.diff_ci[1])}]"
        elif 0 < r.common_steps < 6:
            diff += " (no CI: n < 6)"
        rows.append(
            [
                r.metric,
                str(r.common_steps),
                _number(r.mean_a),
                _number(r.mean_b),
                _number(r.median_a),
                _number(r.median_b),
                diff,
                _diverges(r, report.same_samples),
            ]
        )
    lines += _table(rows, right={1, 2, 3, 4, 5})
    for r in report.learning:
        if r.first_diffs and ("loss" in r.metric or r is report.learning[0]):
            shown = ", ".join(f"{d.step}: {_signed(d.diff)}" for d in r.first_diffs)
            lines.append(f"  {r.metric} B-A per {r.axis} from {r.first_divergence}: {shown}")
    return lines


def _steps_lines(report: DiffReport) -> list[str]:
    if not report.steps:
        return [f"per-step {report.steps_metric}: no step has it in both runs"]
    learning = any(line.diff is not None for line in report.steps)
    lines = [f"per-step {report.steps_metric}:"]
    rows = [["step", "A", "B", "B-A" if learning else "B/A"]]
    for line in report.steps:
        if learning:
            last = _signed(line.diff)
        else:
            last = MISSING if line.ratio is None else f"{line.ratio:.3f}"
        rows.append([str(line.step), _number(line.a), _number(line.b), last])
    return lines + _table(rows, right={0, 1, 2, 3})


def _unmatched_lines(report: DiffReport) -> list[str]:
    if not report.metric_unmatched:
        return []
    logged = ", ".join(report.metrics_logged) or "nothing"
    return [f"metric {', '.join(repr(p) for p in report.metric_unmatched)} matched nothing; the runs logged: {logged}"]


def _code_lines(report: DiffReport) -> list[str]:
    """The files behind a `code` change, and the one line saying only non-code files differ."""
    lines = []
    if report.code_files and any(c.name == "code" for c in report.changed):
        shown = ", ".join(report.code_files[:20]) + (f" (+{len(report.code_files) - 20} more)" if len(report.code_files) > 20 else "")
        lines.append(f"  code files changed: {shown}")
    if report.code_note:
        lines.append(report.code_note)
    return lines


def _baseline_lines(report: DiffReport) -> list[str]:
    """The earlier runs one setting away from B (newest first), or that there is none."""
    found = report.suggested_baselines or ([report.suggested_baseline] if report.suggested_baseline else [])
    if not found:
        return ["hint: no earlier run differs from B in exactly one setting"]
    if len(found) == 1:
        return [f"hint: {found[0]} differs from B in one setting: ledger diff {found[0]} {report.b}"]
    return [
        f"hint: {len(found)} earlier runs differ from B in one setting (newest first):",
        *(f"  ledger diff {run} {report.b}" for run in found),
    ]


def render_text(report: DiffReport, git_diff: str | None = None, show_steps: bool = True) -> str:
    """The human output of `ledger diff` for `report`, ending in a newline.

    `git_diff` is the git diff of the two records, under its own headings, shown last when given. The per-step
    table is shown when the report has one and `show_steps` is true.
    """
    lines: list[str] = [f"A: {report.a}", f"B: {report.b}", ""]
    if report.refused:
        count = len(report.changed)
        why = "no setting differs" if count == 0 else f"{count} settings differ"
        lines.append(f"refused: {why}; `ledger diff` compares runs that differ in exactly one setting")
        lines += [f"  {_change_line(c)}" for c in report.changed]
        lines += _code_lines(report)
        lines += _baseline_lines(report)
        lines += baseline_session_lines(report)
        lines.append("hint: --ignore GLOB leaves settings out; --force compares anyway")
    elif report.repeat:
        lines += repeat_lines(report)
        lines += _code_lines(report)
    elif report.forced:
        lines.append(f"FORCED: {len(report.changed)} settings differ; timing cannot be pinned on one of them")
        lines += [f"  {_change_line(c)}" for c in report.changed]
        lines += _code_lines(report)
    else:
        lines.append(_change_line(report.changed[0]))
        lines += _code_lines(report)
    lines += flag_lines(report)
    if report.warnings:
        lines.append("")
        lines += [f"warning: {w}" for w in report.warnings]
    if not report.refused:
        lines.append("")
        lines += _unmatched_lines(report)
        lines += _timing_lines(report)
        lines.append("")
        lines += _learning_lines(report)
        if report.noise is not None:
            lines += ["", *noise_lines(report)]
        if show_steps and report.steps_metric:
            lines.append("")
            lines += _steps_lines(report)
    if git_diff:
        lines += ["", git_diff.rstrip("\n")]
    return "\n".join(lines) + "\n"
