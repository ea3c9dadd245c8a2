"""Log capture of a full `ledger run` against `tee`: a job writing N GiB of log lines as fast as it
can, (a) piped into `tee FILE > /dev/null`, (b) under `ledger run` with stdout to /dev/null.
Same job, same machine, same run: the ratio is what counts (target >= 0.7x of tee)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from common import ledger_argv, report, scratch_repo

WRITER = r"""
import sys
block = b"".join(
    (b"(SGLangEngine pid=4242) [2026-11-29 00:00:00 TP0] Decode batch. #running-req: 32, gen throughput (token/s): %d\n" % i)
    if i % 10 == 0 else
    (b"[2026-11-29 00:00:00.000 main] train.py:310 - step %d: {'train/loss': 0.125, 'train/grad_norm': 1.5}\n" % i)
    for i in range(9000))
n = int(float(sys.argv[1]) * (1 << 30)) // len(block)
out = sys.stdout.buffer
for _ in range(n):
    out.write(block)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    repo = scratch_repo("capture")
    (repo / "writer.py").write_text(WRITER)
    job = f"{sys.executable} writer.py {args.gib}"
    size = args.gib * 1024

    def tee() -> float:
        t = time.perf_counter()
        subprocess.run(f"{job} | tee tee.out > /dev/null", shell=True, cwd=repo, check=True)
        return time.perf_counter() - t

    def ledger() -> float:
        t = time.perf_counter()
        subprocess.run(ledger_argv("run", "--no-debug-data", "--", *job.split()), cwd=repo, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t

    rows = []
    ratios = []
    for i in range(args.repeat):
        t_tee, t_led = tee(), ledger()
        (repo / "tee.out").unlink()
        ratios.append(t_tee / t_led)
        rows.append((f"round {i + 1}", f"tee {size / t_tee:.0f} MiB/s, ledger run {size / t_led:.0f} MiB/s, "
                                        f"ratio {t_tee / t_led:.2f}x"))
    rows.append(("ledger run throughput vs tee (median)", f"{sorted(ratios)[len(ratios) // 2]:.2f}x (target >= 0.7x)"))
    report(f"log capture of `ledger run` vs tee, {args.gib:g} GiB (bench/bench_run.py)", rows)
    subprocess.run(["rm", "-rf", str(repo.parent)])


if __name__ == "__main__":
    main()
