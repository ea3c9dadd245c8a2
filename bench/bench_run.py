"""Log capture of a full `ledger run` against `tee`: a job writing N GiB of log lines as fast as it
can, (a) piped into `tee FILE > /dev/null`, (b) under `ledger run` with stdout to /dev/null.
Same job, same machine, same run: the ratio is what counts (target >= 0.7x of tee).

The job times itself (first write to last flush): that is the throughput the capture allows it.
The end-to-end time of `ledger run` also includes recording (metrics parse, the commit of the
logs into git), reported separately."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from common import ledger_argv, report, scratch_repo

WRITER = r"""
import sys
block = b"".join(
    (b"(SGLangEngine pid=4242) [2026-11-29 00:00:00 TP0] Decode batch. #running-req: 32, gen throughput (token/s): %d\n" % i)
    if i % 10 == 0 else
    (b"[2026-11-29 00:00:00.000 main] model.py:88 - iteration %d | consumed samples: 1024 | lm loss: 1.25E+00\n" % i)
    for i in range(9000))
import time
n = int(float(sys.argv[1]) * (1 << 30)) // len(block)
out = sys.stdout.buffer
t = time.perf_counter()
for _ in range(n):
    out.write(block)
out.flush()
open(sys.argv[2], "w").write(str(time.perf_counter() - t))  # how long the job itself took
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    repo = scratch_repo("capture")
    subprocess.run(ledger_argv("init"), cwd=repo, check=True, capture_output=True)  # DVC, as a user would have
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "ledger init"], cwd=repo, check=True)
    (repo / "writer.py").write_text(WRITER)
    timing = repo.parent / "job-seconds"
    job = f"{sys.executable} writer.py {args.gib} {timing}"
    size = args.gib * 1024

    def tee() -> tuple[float, float]:
        t = time.perf_counter()
        subprocess.run(f"{job} | tee tee.out > /dev/null", shell=True, cwd=repo, check=True)
        return float(timing.read_text()), time.perf_counter() - t

    def ledger() -> tuple[float, float]:
        t = time.perf_counter()
        subprocess.run(
            ledger_argv("run", "--no-debug-data", "--", *job.split()),
            cwd=repo,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return float(timing.read_text()), time.perf_counter() - t

    rows = []
    ratios = []
    for i in range(args.repeat):
        (j_tee, e_tee), (j_led, e_led) = tee(), ledger()
        (repo / "tee.out").unlink()
        ratios.append(j_tee / j_led)
        rows.append(
            (
                f"round {i + 1}",
                f"job under tee {size / j_tee:.0f} MiB/s, under ledger run {size / j_led:.0f} MiB/s "
                f"(ratio {j_tee / j_led:.2f}x); end to end: tee {e_tee:.1f} s, "
                f"ledger run {e_led:.1f} s incl. recording",
            )
        )
    rows.append(("ledger run throughput vs tee (median)", f"{statistics.median(ratios):.2f}x (target >= 0.7x)"))
    report(f"log capture of `ledger run` vs tee, {args.gib:g} GiB (bench/bench_run.py)", rows)
    subprocess.run(["rm", "-rf", str(repo.parent)])


if __name__ == "__main__":
    main()
