"""The human text of `ledger diff`: what changed first, then warnings, timing, and details.

Values are shown the way they read in a manifest (YAML-ish): `true`, `false`, `null`, numbers as
Python writes them, strings bare unless empty or ambiguous, lists in brackets, `<absent>` for a
setting one run does not have.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ledger.compare.diffcore import Change, DiffReport, TimingResult
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


def _ratio(result: TimingResult) -> str:
    if not math.isfinite(result.median_ratio):
        return MISSING
    text = f"{result.median_ratio:.3f}"
    if result.ratio_ci is not None:
        low, high = result.ratio_ci
        text += f" [{low:.3f}, {high:.3f}]"
    return text


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
        cells = [
            cell.rjust(w) if c in right else cell.ljust(w) for c, (cell, w) in enumerate(zip(row, widths))
        ]
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
                _number(t.median_a),
                _number(t.median_b),
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
    return lines


def _steps_lines(report: DiffReport) -> list[str]:
    lines = [f"per-step {report.steps_metric}:"]
    rows = [["step", "A", "B", "B/A"]]
    for line in report.steps:
        ratio = MISSING if line.ratio is None else f"{line.ratio:.3f}"
        rows.append([str(line.step), _number(line.a), _number(line.b), ratio])
    return lines + _table(rows, right={0, 1, 2, 3})


def render_text(report: DiffReport, git_diff: str | None = None, show_steps: bool = True) -> str:
    """The human output of `ledger diff` for `report`, ending in a newline.

    `git_diff` is the code diff between the runs' commits, shown last when given. The per-step
    table is shown when the report has one and `show_steps` is true.
    """
    lines: list[str] = [f"A: {report.a}", f"B: {report.b}", ""]
    if report.refused:
        count = len(report.changed)
        why = "no setting differs" if count == 0 else f"{count} settings differ"
        lines.append(f"refused: {why}; `ledger diff` compares runs that differ in exactly one setting")
        lines += [f"  {_change_line(c)}" for c in report.changed]
        if report.suggested_baseline:
            lines.append(
                f"hint: {report.suggested_baseline} differs from B in one setting: ledger diff {report.suggested_baseline} {report.b}"
            )
        lines.append("hint: --ignore GLOB leaves settings out; --force compares anyway")
    elif report.forced:
        lines.append(f"FORCED: {len(report.changed)} settings differ; timing cannot be pinned on one of them")
        lines += [f"  {_change_line(c)}" for c in report.changed]
    else:
        lines.append(_change_line(report.changed[0]))
    if report.warnings:
        lines.append("")
        lines += [f"warning: {w}" for w in report.warnings]
    if not report.refused:
        lines.append("")
        lines += _timing_lines(report)
        if show_steps and report.steps_metric:
            lines.append("")
            lines += _steps_lines(report)
    if git_diff:
        lines += ["", "code diff:", git_diff.rstrip("\n")]
    return "\n".join(lines) + "\n"
