"""Time the PATH wrappers add to each `python3` call of a job (issue 9).

Runs `python3 -c pass` (not the training command: passed through) and `python3 train.py ...` (the
training command: recorded, flags appended) directly and through ledger's wrappers, alternating,
and prints the medians. Usage: python bench/bench_wrappers.py [--n 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from ledger.understand import shim


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=30)
    n = parser.parse_args().n
    folder = Path(tempfile.mkdtemp(prefix="bench-wrappers-"))
    (folder / "train.py").write_text("pass\n")
    plain = dict(os.environ)
    wrapped = dict(plain)
    wrapped.update(
        shim.install(
            folder / "bin",
            folder / "shim.jsonl",
            [r"train\.py$"],
            [("--save-debug-event-data", str(folder / "events"))],
            ["NCCL_*"],
            plain,
            {},
        )
    )
    for label, argv in (
        ("python3 -c pass", ["python3", "-c", "pass"]),
        ("python3 train.py (recorded)", ["python3", "train.py", "--lr", "1"]),
    ):
        times: dict[str, list[float]] = {"direct": [], "wrapped": []}
        for _ in range(n):
            for kind, env in (("direct", plain), ("wrapped", wrapped)):
                start = time.perf_counter()
                subprocess.run(argv, env=env, cwd=folder, check=True)
                times[kind].append(time.perf_counter() - start)
        a, b = statistics.median(times["direct"]), statistics.median(times["wrapped"])
        print(f"{label}: direct {a * 1000:.0f} ms, wrapped {b * 1000:.0f} ms, added {(b - a) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
