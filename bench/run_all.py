"""`make bench`: every benchmark, each reporting ratios against a baseline measured in the same run.

Quick by default (sized to finish in a few minutes on 2 cores); `--full` uses the sizes the issues
name (10,000 runs, 1 GiB of logs, 1 GiB of rollout data).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true")
    args = ap.parse_args()
    runs = ["0", "1000", "10000"] if args.full else ["0", "1000"]
    plan = [
        ["bench_store.py", "--runs", *runs],
        ["bench_shortjob.py", "--pairs", "21" if args.full else "11"],
        ["bench_caches.py", "--rounds", "9" if args.full else "5"],
        ["bench_run.py", "--gib", "1" if args.full else "0.25"],
        ["bench_capture.py", "--mib", "1024" if args.full else "128"],
        ["bench_capture.py", "--mib", "1024" if args.full else "128", "--paced", "120" if args.full else "20"],
        ["bench_worker.py", "--mib", "256" if args.full else "64"],
        ["bench_longline.py", "--mb", "200" if args.full else "64"],
        ["bench_redact.py", *(["--mib", "1024", "--no-fallback"] if args.full else ["--mib", "64"])],
        ["bench_diff.py", "--steps", "10000", "--engine-lines", "100" if args.full else "20"],
        ["bench_data.py", *([] if args.full else ["--files", "8"])],
        ["bench_cluster_heat.py", "--interval", "1"],
        [
            "bench_daily.py",
            "--sizes",
            *(["0", "1000", "10000", "100000"] if args.full else ["0", "100", "1000"]),
            "--repeat",
            "5" if args.full else "3",
        ],
        ["bench_limits.py", "--settings", "400000"],
    ]
    failed = 0
    for argv in plan:
        print(f"\n# {' '.join(argv)}", flush=True)
        failed |= subprocess.run([sys.executable, str(HERE / argv[0]), *argv[1:]], cwd=HERE).returncode
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
