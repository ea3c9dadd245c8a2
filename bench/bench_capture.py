"""What `ledger run` costs a log-writing job, against `JOB | tee FILE > /dev/null` in the same run.

The job is `bench/gen_log.py`: Miles-shaped lines (SGLang decode lines, RolloutManager and train
perf lines) in many small writes, as trainers write. Both sides run the very same command:
  baseline: `gen_log.py ... | tee tee.out > /dev/null`
  ledger:   `ledger run --no-debug-data -- sh -c 'gen_log.py ...'` with stdout to /dev/null, in a
            real repository (`ledger init` done), i.e. exactly the path users take: raw copy while
            the job runs, then split, metrics, offload and the commit after it ended.
The job stamps its own first and last write (`--stamp FILE`): the job's throughput under each side.
Reported: job throughput ratio (tee / ledger: 1.0 means free; issue target >= 0.9x) and wall time
until the run is committed against wall time until `tee` exits (issue target <= 1.2x + 1 s).
With `--paced S` the job spreads the same lines over S seconds, as a trainer does: the log work
then happens while the job runs, and what is left after it is the figure that matters.
`--against DIR` also runs the ledger of another source tree (`git archive main | tar -x -C DIR`)
in each round, interleaved with the other two, so that a change is measured against the code it
replaces under the same load.

    .venv/bin/python bench/bench_capture.py [--mib 256] [--repeat 1] [--paced SECONDS] [--against DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, ledger_argv, report, scratch_repo

LINE_BYTES = 3200  # gen_log.py with --engine-lines 20: bytes per step, measured


def metric_rows(repo: Path) -> int:
    """Rows of metrics.jsonl in the run just committed: proof the bench recorded real work."""
    changed = subprocess.run(
        ["git", "diff-tree", "-r", "--name-only", "--no-commit-id", "experiments^1", "experiments"],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    path = next((p for p in changed if p.endswith("/metrics.jsonl")), None)
    if path is None:
        return 0
    return subprocess.run(["git", "cat-file", "-p", f"experiments:{path}"], cwd=repo, check=True, capture_output=True).stdout.count(b"\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=float, default=256.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--paced", type=float, default=0.0, help="spread the job's writes over this many seconds")
    ap.add_argument("--against", type=Path, default=None, help="a source tree of another ledger, run in each round too")
    args = ap.parse_args()
    repo = scratch_repo("capture")
    subprocess.run(ledger_argv("init"), cwd=repo, check=True, capture_output=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "ledger init"], cwd=repo, check=True)
    stamp = repo.parent / "job-seconds"
    steps = max(1, int(args.mib * (1 << 20) / LINE_BYTES))
    job = [
        sys.executable,
        str(ROOT / "bench" / "gen_log.py"),
        "--steps",
        str(steps),
        "--engine-lines",
        "20",
        "--stamp",
        str(stamp),
        "--seconds",
        str(args.paced),
    ]

    def tee() -> tuple[float, float]:
        t = time.perf_counter()
        subprocess.run(f"{' '.join(job)} | tee tee.out > /dev/null", shell=True, cwd=repo, check=True)
        return float(stamp.read_text()), time.perf_counter() - t

    def ledger(source: Path | None) -> tuple[float, float, int]:
        env = dict(os.environ, PYTHONPATH=str(source)) if source is not None else None
        t = time.perf_counter()
        subprocess.run(
            ledger_argv("run", "--no-debug-data", "--", *job),
            cwd=repo,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - t
        return float(stamp.read_text()), wall, metric_rows(repo)

    sides: list[tuple[str, Path | None]] = [("ledger run", None)]
    if args.against is not None:
        sides.append((f"ledger run of {args.against}", args.against.resolve()))
    size = repo / "tee.out"
    rows: list[tuple[str, str]] = []
    thr: dict[str, list[float]] = {name: [] for name, _ in sides}
    wall: dict[str, list[float]] = {name: [] for name, _ in sides}
    for i in range(args.repeat):
        j_tee, e_tee = tee()
        mib = size.stat().st_size / (1 << 20)
        size.unlink()
        for name, source in sides if i % 2 == 0 else sides[::-1]:
            j_led, e_led, rows_recorded = ledger(source)
            thr[name].append(j_tee / j_led)
            wall[name].append(e_led / e_tee)
            rows.append(
                (
                    f"round {i + 1}, {name}",
                    f"{mib:.0f} MiB; job under tee {mib / j_tee:.0f} MiB/s, under ledger run "
                    f"{mib / j_led:.0f} MiB/s; until tee exits {e_tee:.2f} s, until the run is "
                    f"committed {e_led:.2f} s (+{e_led - e_tee:.2f} s); "
                    f"recorded {rows_recorded} metric rows for {steps} steps",
                )
            )
    for name, _ in sides:
        rows.append((f"job throughput, {name} vs tee (median)", f"{statistics.median(thr[name]):.2f}x (target >= 0.9x)"))
        rows.append(
            (f"wall until committed, {name} vs until tee exits (median)", f"{statistics.median(wall[name]):.2f}x (target <= 1.2x + 1 s)")
        )
    paced = f", written over {args.paced:g} s" if args.paced else ", written as fast as the job can"
    report(f"`ledger run` of a Miles-shaped log writer vs `| tee FILE`, {args.mib:g} MiB{paced} (bench/bench_capture.py)", rows)
    shutil.rmtree(repo.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
