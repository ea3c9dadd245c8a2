"""`ledger diff` of two runs with 10,000 steps and ~100 MB of logs each, first time and again.

Baseline, same run: `git diff --stat` of the two run folders on the branch (git reading the same
records), so the ratios say how much ledger adds on top of git.
"""

from __future__ import annotations

import argparse
import sys
import time

from common import ROOT, ledger_argv, report, scratch_repo, sh


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--engine-lines", type=int, default=100)
    args = ap.parse_args()
    repo = scratch_repo("diff")
    gen = [sys.executable, str(ROOT / "bench" / "gen_log.py"), "--steps", str(args.steps), "--engine-lines", str(args.engine_lines)]
    t = time.perf_counter()
    sh(ledger_argv("run", "--no-debug-data", "--", *gen, "--scale", "1.0"), cwd=repo)
    sh(ledger_argv("run", "--no-debug-data", "--", *gen, "--scale", "1.1"), cwd=repo)
    record = (time.perf_counter() - t) / 2
    size = sum(p.stat().st_size for p in (repo / ".git").rglob("*") if p.is_file()) / 1e6

    def diff() -> float:
        t0 = time.perf_counter()
        sh(ledger_argv("diff", "latest~1", "latest", "--json"), cwd=repo)
        return time.perf_counter() - t0

    first = diff()
    again = sorted(diff() for _ in range(5))[2]

    def git_diff() -> float:
        t0 = time.perf_counter()
        sh(["git", "diff", "--stat", "experiments~1", "experiments", "--", "runs"], cwd=repo)
        return time.perf_counter() - t0

    base = sorted(git_diff() for _ in range(5))[2]
    log_mb = args.steps * (args.engine_lines * 128 + 250) / 1e6
    report(
        f"ledger diff, {args.steps:,} steps and ~{log_mb:.0f} MB of logs per run (bench/bench_diff.py)",
        [
            ("record one run (ledger run of the log writer)", f"{record:.2f} s"),
            ("repository size after two runs", f"{size:.0f} MB"),
            ("git diff --stat of the two records (baseline)", f"{base:.3f} s"),
            ("ledger diff, first time", f"{first:.3f} s  ({first / base:.1f}x; target < 0.25 s)"),
            ("ledger diff, again (median of 5)", f"{again:.3f} s  ({again / base:.1f}x; target < 0.1 s)"),
        ],
    )


if __name__ == "__main__":
    main()
