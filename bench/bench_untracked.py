"""Time until the job starts against the number of untracked files (issue 24, item 6): `ledger
run` in a clone with 0 and with N untracked files, the job printing the time it started. The
extra time N files add is reported as a ratio against `git status --porcelain -uall` in the same
clone, measured in the same run (target: well under 1x; was ~6x, the files were counted before
the job started). Ledger counts them with git while the job runs."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import ledger_argv, report, scratch_repo, timeit

JOB = [sys.executable, "-c", "import time; print(repr(time.time()))"]


def to_job(repo: Path, repeat: int) -> float:
    """Median seconds from `ledger run` starting to the job's first line of code."""
    times = []
    for _ in range(repeat):
        t = time.time()
        out = subprocess.run(
            ledger_argv("run", "--no-heat-guard", "--no-debug-data", "--", *JOB), cwd=repo, check=True, capture_output=True, text=True
        ).stdout
        times.append(float(out.strip().splitlines()[-1]) - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    repo = scratch_repo("untracked")
    empty = to_job(repo, args.repeat)
    for d in range(args.files // 1000 + 1):
        folder = repo / "outputs" / f"d{d:03d}"
        folder.mkdir(parents=True)
        for i in range(min(1000, args.files - d * 1000)):
            (folder / f"f{i:04d}.txt").write_bytes(b"")
    full = to_job(repo, args.repeat)
    status = timeit(
        lambda: subprocess.run(["git", "status", "--porcelain", "-uall"], cwd=repo, check=True, capture_output=True), args.repeat
    )
    extra = full - empty
    report(
        f"time to the job with {args.files} untracked files (bench/bench_untracked.py)",
        [
            ("0 untracked files", f"{empty * 1000:.0f} ms to the job"),
            (f"{args.files} untracked files", f"{full * 1000:.0f} ms to the job"),
            ("`git status --porcelain -uall`", f"{status * 1000:.0f} ms"),
            ("extra time to the job vs git status", f"{extra / status:.2f}x (target < 0.5x)"),
        ],
    )
    subprocess.run(["rm", "-rf", str(repo.parent)])


if __name__ == "__main__":
    main()
