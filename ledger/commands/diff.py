"""`ledger diff A B`: one changed setting, its git diff, and step-aligned timing.

A diff asked before is answered from the answers kept for this code, repository, `.ledger.yaml`
and ledger branch tip (`ledger.compare.answer`), before the comparison code is imported; any
other is computed by `ledger.diffrun`."""

from __future__ import annotations

from pathlib import Path

from ledger.compare.answer import DiffOutput, Question, recall


def diff_runs(
    start: Path,
    a: str,
    b: str,
    metrics: list[str],
    force: bool,
    steps_metric: str | None,
    git_diff: bool,
    ignore: list[str] | None = None,
    html: Path | None = None,
    any_age: bool = False,
    code_diff: bool = False,
    partial: bool = False,
) -> DiffOutput:
    """Compare two runs; refused (exit 3) unless exactly one setting differs, they are repeats, or `force`.

    Each metric is judged against the noise between the runs' replicas (`ledger.compare.sides`),
    found within `diff: max_age_hours` of A or B unless `any_age`. With `html`, also write the
    comparison as one self-contained page to that file; with
    `code_diff`, the git diff shows every code file that differs, launcher inputs and ignored
    files included. With `partial`, a run still running is compared as it is so far.
    """
    question = Question(a, b, tuple(metrics), force, steps_metric, git_diff, tuple(ignore or ()), any_age, code_diff)
    if html is None and not partial:
        kept = recall(start, question)
        if kept is not None:
            return kept
    # imported only now: pygit2 and the comparison modules are most of a repeated diff's time
    from ledger.diffrun import compute_diff

    return compute_diff(start, question, html, partial)
