"""Throughput of OutputCapture against `tee FILE > /dev/null` on the same fast log-writing job.

Usage: .venv/bin/python bench/bench_capture.py [--gib 1] [--scan commands|all]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ledger.capture.stream import OutputCapture

# The job: writes a pre-built 1 MiB block of realistic log lines N times (C speed).
_JOB = r"""
import os, random, sys
r = random.Random(7)
lines, size, i = [], 0, 0
while size < 1 << 20:
    i += 1
    k = i % 10
    if k == 0:
        line = (f"(SGLangEngine pid={r.randint(1000, 99999)}, ip=10.0.0.{r.randint(1, 9)}) "
                f"[2026-04-15 07:57:53 TP0] Decode batch. #running-req: {r.randint(1, 64)}, "
                f"#token: {r.randint(100, 99999)}, token usage: 0.{r.randint(10, 99)}, "
                f"gen throughput (token/s): {r.random() * 3000:.2f}, #queue-req: 0\n")
    elif k < 4:
        line = (f"(MegatronTrainRayActor pid={r.randint(1000, 99999)}) [2026-04-15 07:57:53.123 "
                f"actor_cell0_rank0] model.py:{r.randint(10, 999)} - step {i}: {{'train/loss': "
                f"{r.random():.6f}, 'train/grad_norm': {r.random() * 5:.4f}}}\n")
    elif k < 6:
        line = (f"(RolloutManager pid=1805485) [2026-04-15 07:57:53] rollout.py:1193 - perf {i}: "
                f"{{'rollout/response_len/mean': {r.random() * 3000:.1f}, "
                f"'perf/rollout_time': {r.random() * 400:.2f}}}\n")
    elif k == 6:
        line = f"[2026-04-15 07:57:53.123 main] train.py:88 - Timer train end (elapsed: 3.1s)\n"
    else:
        line = (f" iteration {i} | consumed samples: {i * 64} | elapsed time per iteration (ms): "
                f"{r.random() * 9999:.1f} | learning rate: 1.000000E-06 | lm loss: {r.random():.6E} |\n")
    lines.append(line)
    size += len(line)
block = "".join(lines).encode()
n = int(sys.argv[1])
for _ in range(n):
    view = memoryview(block)
    while view:
        view = view[os.write(1, view):]
"""


def run_tee(blocks: int, folder: Path) -> float:
    """Seconds for the job piped into tee."""
    start = time.perf_counter()
    subprocess.run(
        f'"{sys.executable}" -c "$JOB" {blocks} | tee "{folder / "tee.log"}" > /dev/null',
        shell=True,
        check=True,
        env={**os.environ, "JOB": _JOB},
    )
    return time.perf_counter() - start


def run_capture(
    blocks: int, folder: Path, scan: str
) -> tuple[float, float, OutputCapture]:
    """Seconds until the job exits and until the capture has finished, and the capture."""
    read_fd, write_fd = os.pipe()
    devnull = os.open(os.devnull, os.O_WRONLY)
    capture = OutputCapture(
        read_fd,
        devnull,
        folder / "trainer.log",
        folder / "engine.log",
    )  # every line is scanned for secrets now (issue 10); `scan` is kept for the report only
    start = time.perf_counter()
    capture.start()
    job = subprocess.Popen([sys.executable, "-c", _JOB, str(blocks)], stdout=write_fd)
    os.close(write_fd)
    if job.wait() != 0:
        raise SystemExit("the benchmark job failed")
    job_done = time.perf_counter() - start
    capture.join()
    all_done = time.perf_counter() - start
    os.close(devnull)
    return job_done, all_done, capture


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--scan", choices=["all", "commands"], default="commands")
    args = parser.parse_args()
    blocks = max(1, int(args.gib * 1024))
    mib = float(blocks)
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as tmp:
        folder = Path(tmp)
        tee_s = run_tee(blocks, folder)
        (folder / "tee.log").unlink()
        job_s, cap_s, capture = run_capture(blocks, folder, args.scan)
    print(f"data: {mib:.0f} MiB, secret scan: all lines (--scan is ignored since issue 10)")
    print(f"tee:     {tee_s:6.2f} s  {mib / tee_s:7.1f} MiB/s")
    print(
        f"capture: {cap_s:6.2f} s  {mib / cap_s:7.1f} MiB/s (job itself exited after {job_s:.2f} s)"
    )
    print(f"ratio capture/tee throughput: {tee_s / cap_s:.2f}")
    print(f"lines: trainer {capture.lines_trainer}, engine {capture.lines_engine}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
