"""The text of a diff's noise section, its repeat heading and its degenerate-run flags.

`render.render_text` places them: the repeat heading where the changed setting would be, the flags
right under it (the diff's first lines), the noise section after the learning section.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ledger.compare.diffcore import DiffReport
from ledger.compare.noise import METHODS, NO_REPLICAS, REPEAT, NoiseMetric
from ledger.textfmt import MISSING, plural, show_value

REPEAT_LINE = "no setting differs: this compares two repeats"


def _signed(value: float | None) -> str:
    return MISSING if value is None or not math.isfinite(value) else f"{value:+.4g}"


def _plain(value: float | None) -> str:
    return MISSING if value is None or not math.isfinite(value) else f"{value:.4g}"


def repeat_lines(report: DiffReport) -> list[str]:
    """The heading of a diff of two repeats (no setting, or only seeds, differ)."""
    if not report.changed:
        return [REPEAT_LINE, "  (the size of their difference is the run-to-run noise)"]
    seeds = "; ".join(f"{c.name}: {show_value(c.a)} -> {show_value(c.b)}" for c in report.changed)
    return [
        f"only seed settings differ ({seeds}): A and B are replicas, this compares two repeats",
        "  (the size of their difference is the run-to-run noise)",
    ]


def flag_lines(report: DiffReport) -> list[str]:
    """One `DEGENERATE:` line per flag on A, B or a replica."""
    names = {report.a: "A", report.b: "B"}
    if report.noise is not None:
        names.update({rid: "A's replica" for rid in report.noise.replicas_a[1:]})
        names.update({rid: "B's replica" for rid in report.noise.replicas_b[1:]})
    out = []
    for flag in report.flags:
        who = names.get(flag.run, "replica")
        steps = ", ".join(str(s) for s in flag.steps[:8]) + (" ..." if len(flag.steps) > 8 else "")
        context = "".join(f"; {k} {v:.3g}" for k, v in flag.context.items())
        out.append(f"DEGENERATE: {who} {flag.run}: {flag.describe()} (at or over it on rollouts {steps}{context})")
    return out


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    return [
        "  " + "  ".join(cell.rjust(w) if c in right else cell.ljust(w) for c, (cell, w) in enumerate(zip(row, widths))).rstrip()
        for row in rows
    ]


def _interval(m: NoiseMetric) -> str:
    if m.diff_ci is None:
        return "(no CI: n < 6)" if m.method in ("per-step", "repeat") else MISSING
    return f"[{_signed(m.diff_ci[0])}, {_signed(m.diff_ci[1])}]"


def _heading(report: DiffReport) -> str:
    noise = report.noise
    assert noise is not None
    confidence = f"{noise.metrics[0].confidence:.0%}" if noise.metrics else "95%"
    if noise.method == "repeat":
        return "noise: A and B are repeats; diff = mean B - mean A over the common steps (its size is the noise)"
    count = (
        f"{plural(len(noise.replicas_a), 'run')} for A ({plural(len(noise.replicas_a) - 1, 'replica')}), "
        f"{plural(len(noise.replicas_b), 'run')} for B ({plural(len(noise.replicas_b) - 1, 'replica')})"
    )
    age = "any age" if noise.any_age else f"within {noise.max_age_hours:g} h (--any-age for older)"
    if noise.method == "per-step":
        return (
            f"noise: no replicas (runs equal to A or B but for the seed, {age}); the interval is per step "
            f"and IGNORES run-to-run noise: a difference may be just the seed"
        )
    return (
        f"noise ({count}, {age}; {METHODS.get(noise.method, noise.method)}):\n"
        f"  diff = B-A of per-step means over replicas; interval: {confidence} CI over run means; noise floor "
        f"= SD of one run's mean; each metric is judged alone (of 20 metrics a change does not touch, "
        f"about one reads beyond noise by chance)"
    )


def noise_lines(report: DiffReport) -> list[str]:
    """The noise section: every metric's difference, its interval, the noise floor and the verdict."""
    noise = report.noise
    if noise is None:
        return []
    if not noise.metrics:
        return ["noise: no metric on common steps to judge"]
    rows = [["metric", "axis", "n", "runs", "diff", "interval", "noise floor", "verdict"]]
    for m in noise.metrics:
        verdict = m.verdict + (" (per-step CI)" if m.verdict == NO_REPLICAS else " (replicas agree exactly)" if m.method == "exact" else "")
        rows.append(
            [
                m.metric,
                m.axis,
                str(m.steps),
                f"{m.replicas_a}+{m.replicas_b}",
                _signed(m.diff),
                _interval(m),
                _plain(m.noise_floor),
                verdict,
            ]
        )
    lines = [*_heading(report).split("\n"), *_table(rows, right={2, 4, 6})]
    lines += [f"  {note}" for note in _session(noise.session)]
    disagree = [
        m.metric
        for m in noise.metrics
        if m.permutation_p is not None
        and m.verdict not in (REPEAT,)
        and (m.permutation_p < 1 - m.confidence) != (m.verdict == "beyond noise")
    ]
    if disagree:
        lines.append(f"  the permutation test disagrees on {', '.join(disagree)} (see --json permutation_p)")
    return lines


def _session(notes: Sequence[str]) -> list[str]:
    return [f"session: {n} (a baseline from the same session is the fair one)" for n in notes]


def baseline_session_lines(report: DiffReport) -> list[str]:
    """Under a refusal's baseline hint: the suggestion ran in another session than B."""
    return [f"  {n}" for n in _session(report.baseline_session)]
