"""Splitting one huge output line against the same bytes in ordinary lines (issue 11).

Both raw files hold the same number of bytes; the ratio is long-line time / ordinary-lines time,
each in a fresh process so its peak memory (ru_maxrss) is its own.

Usage: .venv/bin/python bench/bench_longline.py [--mb 200]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

_SPLIT = """
import json, resource, sys, time
from pathlib import Path
from ledger.capture.stream import LineSplitter, split_file
raw, out = Path(sys.argv[1]), Path(sys.argv[2])
t = time.perf_counter()
split_file(raw, LineSplitter(out / "trainer.log", out / "engine.log"))
print(json.dumps({"s": time.perf_counter() - t,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
"""


def _measure(raw: Path, out: Path) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", _SPLIT, str(raw), str(out)], check=True, capture_output=True, text=True, cwd=out)
    result: dict[str, float] = json.loads(proc.stdout)
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    args = ap.parse_args()
    size = args.mb << 20
    with tempfile.TemporaryDirectory(prefix="ledger-bench-longline-") as tmp:
        base = Path(tmp)
        one, many = base / "one.raw", base / "many.raw"
        with open(one, "wb") as f:  # in pieces: the children would inherit a big parent's peak RSS
            for _ in range(args.mb - 1):
                f.write(b"x" * (1 << 20))
            f.write(b"x" * ((1 << 20) - 1) + b"\n")
        line = b"y" * 99 + b"\n"
        with open(many, "wb") as f:
            block = line * ((1 << 20) // len(line))
            while f.tell() + len(block) <= size:
                f.write(block)
            f.write(line * ((size - f.tell()) // len(line)))
        lines = _measure(many, base)
        huge = _measure(one, base)
    print(f"ordinary lines: {lines['s']:.2f} s, peak {lines['rss_mb']:.0f} MB")
    print(f"one {args.mb} MB line: {huge['s']:.2f} s, peak {huge['rss_mb']:.0f} MB")
    print(f"ratio (one line / ordinary lines): time {huge['s'] / lines['s']:.2f}x")


if __name__ == "__main__":
    main()
