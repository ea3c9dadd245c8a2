"""The log worker alone on a finished raw output: what is left after a job that flooded its output.

A job writing faster than the worker follows (64 MiB/s) leaves all of the log work for after it;
this measures that catch-up: `bench/gen_log.py` output (Miles-shaped lines) written to a staging
folder as `ledger run` leaves it, the end marker written, then the worker started on it as ledger
starts it (its own session). Wall time and CPU (the worker and the readers it forks). With
`--against DIR` (a source tree of another ledger, e.g. `git archive main | tar -x -C DIR`), that
tree's worker runs on the same file in each round, interleaved, under the same load.

    .venv/bin/python bench/bench_worker.py [--mib 256] [--repeat 3] [--against DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, report

from ledger.config import DEFAULT_ENGINE_PATTERNS

LINE_BYTES = 3200  # gen_log.py with --engine-lines 20: bytes per step, measured


def _worker_module(source: Path) -> str:
    """The worker's module in a source tree (before December 4 it was `record/streamed.py`)."""
    return "ledger.record.logworker" if (source / "ledger" / "record" / "logworker.py").exists() else "ledger.record.streamed"


def _staged(base: Path, raw: Path) -> Path:
    staging = base / "staging"
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "run").mkdir(parents=True)
    os.link(raw, staging / "output.raw")
    spec = {"engine_patterns": list(DEFAULT_ENGINE_PATTERNS), "secret_names": [], "nice": 0}
    (staging / "streamed.json").write_text(json.dumps(spec))
    (staging / "output.end").write_text(str(raw.stat().st_size))
    return staging


def _catch_up(base: Path, raw: Path, source: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one worker's catch-up on `raw`."""
    staging = _staged(base, raw)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", _worker_module(source), str(staging)],
        cwd=base,  # not a source tree: `-m` puts the current folder first on the path
        env=dict(os.environ, PYTHONPATH=str(source)),
        check=True,
        start_new_session=True,
    )
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if not (staging / "run" / "metrics.jsonl").exists():
        raise SystemExit(f"the worker of {source} wrote no metrics.jsonl")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=float, default=256.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--against", type=Path, default=None, help="a source tree of another ledger, run in each round too")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ledger-bench-worker-"))
    raw = base / "output.raw"
    steps = max(1, int(args.mib * (1 << 20) / LINE_BYTES))
    with open(raw, "wb") as f:
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / "gen_log.py"), "--steps", str(steps), "--engine-lines", "20"], stdout=f, check=True
        )
    sides = [("this tree", ROOT)] + ([(str(args.against), args.against.resolve())] if args.against is not None else [])
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in sides}
    rows: list[tuple[str, str]] = []
    for i in range(args.repeat):
        for name, source in sides if i % 2 == 0 else sides[::-1]:
            wall, cpu = _catch_up(base, raw, source)
            figures[name].append((wall, cpu))
            rows.append((f"round {i + 1}, {name}", f"wall {wall:.2f} s, CPU {cpu:.2f} s (load {os.getloadavg()[0]:.1f})"))
    for name, got in figures.items():
        rows.append(
            (f"{name}, medians", f"wall {statistics.median(w for w, _ in got):.2f} s, CPU {statistics.median(c for _, c in got):.2f} s")
        )
    mib = raw.stat().st_size / (1 << 20)
    report(f"the log worker's catch-up on a finished {mib:.0f} MiB raw output (bench/bench_worker.py)", rows)
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
