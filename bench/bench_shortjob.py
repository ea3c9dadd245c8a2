"""What a real short job pays under `ledger run`: `python3 job.py` printing N Miles-shaped step
lines, bare and under `ledger run`, interleaved in the same run (target: at most 0.25 s above the
bare job, median of the pairs). The first `ledger run` of a fresh home compiles the rules' Hyperscan
database and derives the secret catalogue; it is reported apart (cold), then every pair is warm.

    .venv/bin/python bench/bench_shortjob.py [--lines 1000] [--pairs 11]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from common import import_floor, imported_by, ledger_argv, report, short_job_repo, timed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--pairs", type=int, default=11)
    args = ap.parse_args()
    repo = short_job_repo("shortjob")
    job = [sys.executable, "job.py", str(args.lines)]
    under = ledger_argv("run", "--no-heat-guard", "--", *job)
    cold = timed(under, repo) - timed(job, repo)
    modules = imported_by(["run", "--no-heat-guard", "--", *job], repo, repo.parent / "run-modules.txt")
    bare, led, floor = [], [], []
    for _ in range(args.pairs):
        bare.append(timed(job, repo))
        led.append(timed(under, repo))
        floor.append(import_floor(modules, repo))
    above = statistics.median(b - a for a, b in zip(bare, led))
    count = len(modules.read_text().split())
    report(
        f"a real short job ({args.lines} step lines) bare and under `ledger run`, {args.pairs} interleaved pairs (bench/bench_shortjob.py)",
        [
            ("bare job (median)", f"{statistics.median(bare):.3f} s"),
            ("under ledger run (median)", f"{statistics.median(led):.3f} s"),
            ("above the bare job (median of pairs)", f"{above:.3f} s (target <= 0.25 s)"),
            (
                f"importing the {count} modules a run loads, nothing else (median)",
                f"{statistics.median(floor):.3f} s (the floor under the run)",
            ),
            ("first run of a fresh home, above bare", f"{cold:.3f} s (compiles and caches the rules' database)"),
        ],
    )


if __name__ == "__main__":
    main()
