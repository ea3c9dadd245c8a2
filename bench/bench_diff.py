"""`ledger diff` of two runs with 10,000 steps and ~100 MB of logs each: first time and again.

Baseline, same run: `git diff --stat` of the two run folders on the branch (git reading the same
records). Every round runs the baseline and each measured case one after another (interleaved),
so all of them see the same load; each figure is the median over the rounds, wall and CPU (user +
system of the process and its children). With `--baseline-python`, another checkout's
interpreter (its venv's python) runs the same diffs in the same rounds.

Cases: "first" is a diff with `.git/ledger` holding no answer, report, replica search or parsed
table (as after recording); "again" is the same diff repeated; "tip moved" is the same diff after
a note was added to a third run (a new tip: the kept answer is a miss) with and without the
report cache (`diffs`) and the replica search cache (`replicas`): what each cache saves a user.
"""

from __future__ import annotations

import argparse
import os
import pickle
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from common import ROOT, imported_by, importing, ledger_argv, report, scratch_repo, sh

CACHES = ("answers", "diffs", "replicas", "metrics")


def _timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one command (CPU: user + system of its process tree)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _clear(repo: Path, kinds: tuple[str, ...] = CACHES) -> None:
    for kind in kinds:
        shutil.rmtree(repo / ".git" / "ledger" / kind, ignore_errors=True)


def _table_read_vs_unpickled(repo: Path, rounds: int) -> tuple[float, float]:
    """A run's metrics table read from git (what `load_metrics` does) against reading the same
    table pickled from a file (what a cache of parsed tables would do instead), in this process,
    interleaved."""
    from ledger.metrics.store import load_metrics
    from ledger.opening import listing_for

    git_repo, _cfg, _tip, listing = listing_for(repo)
    entry = next(iter(listing.entries.values()))
    kept = repo / ".git" / "ledger" / "bench-table.pickle"
    kept.write_bytes(pickle.dumps(load_metrics(git_repo, entry), protocol=pickle.HIGHEST_PROTOCOL))
    read, unpickled = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        load_metrics(git_repo, entry)
        read.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        with open(kept, "rb") as f:
            pickle.load(f)
        unpickled.append(time.perf_counter() - t0)
    return statistics.median(read), statistics.median(unpickled)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--engine-lines", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline-python", help="another checkout's python: the same diffs, interleaved (its code)")
    args = ap.parse_args()
    repo = scratch_repo("diff")
    gen = [sys.executable, str(ROOT / "bench" / "gen_log.py"), "--steps", str(args.steps), "--engine-lines", str(args.engine_lines)]
    t = time.perf_counter()
    sh(ledger_argv("run", "--no-debug-data", "--", *gen, "--scale", "1.0"), cwd=repo)
    sh(ledger_argv("run", "--no-debug-data", "--", *gen, "--scale", "1.1"), cwd=repo)
    record = (time.perf_counter() - t) / 2
    sh(ledger_argv("run", "--no-debug-data", "--name", "other", "--", "true"), cwd=repo)
    size = sum(p.stat().st_size for p in (repo / ".git").rglob("*") if p.is_file()) / 1e6
    diff = ["diff", "latest~2", "latest~1", "--json"]
    pythons = {"this": sys.executable} | ({"baseline": args.baseline_python} if args.baseline_python else {})
    for python in pythons.values():  # compile each checkout's bytecode once, outside the rounds
        subprocess.run([python, "-m", "ledger", *diff], cwd=repo, check=True, stdout=subprocess.DEVNULL)
    notes = iter(range(10**6))

    def note() -> None:
        sh(ledger_argv("note", "other", f"note {next(notes)}"), cwd=repo)

    cases: dict[str, Callable[[str], tuple[float, float]]] = {
        "first": lambda py: (_clear(repo), _timed([py, "-m", "ledger", *diff], repo))[1],
        "again": lambda py: _timed([py, "-m", "ledger", *diff], repo),
        "tip moved, report and replica caches kept": lambda py: (note(), _timed([py, "-m", "ledger", *diff], repo))[1],
        "tip moved, no report cache": lambda py: (note(), _clear(repo, ("diffs",)), _timed([py, "-m", "ledger", *diff], repo))[2],
        "tip moved, no replica cache": lambda py: (note(), _clear(repo, ("replicas",)), _timed([py, "-m", "ledger", *diff], repo))[2],
    }
    commits = subprocess.run(["git", "rev-parse", "experiments~2", "experiments~1"], cwd=repo, check=True, capture_output=True, text=True)
    git = ["git", "diff", "--stat", *commits.stdout.split(), "--", "runs"]  # the two runs' commits (notes move the tip)
    _clear(repo)
    modules = imported_by(diff, repo, repo.parent / "diff-modules.txt")  # what a first diff imports
    times: dict[str, list[tuple[float, float]]] = {"git": [], "floor": []}
    for _ in range(args.rounds):
        times["git"].append(_timed(git, repo))
        times["floor"].append(_timed(importing(modules), repo))
        for who, python in pythons.items():
            for name, case in cases.items():
                times.setdefault(f"{who}: {name}", []).append(case(python))
    base_wall = statistics.median(w for w, _ in times["git"])
    base_cpu = statistics.median(c for _, c in times["git"])
    rows = [
        ("record one run (ledger run of the log writer)", f"{record:.2f} s"),
        ("repository size after the runs", f"{size:.0f} MB"),
        ("git diff --stat of the two records (baseline)", f"wall {base_wall:.3f} s, CPU {base_cpu:.3f} s"),
    ]
    for name, values in times.items():
        if name == "git":
            continue
        wall, cpu = statistics.median(w for w, _ in values), statistics.median(c for _, c in values)
        what = (
            f"importing the {len(modules.read_text().split())} modules a first diff loads, nothing else"
            if name == "floor"
            else f"ledger diff, {name}"
        )
        rows.append((what, f"wall {wall:.3f} s ({wall / base_wall:.1f}x), CPU {cpu:.3f} s ({cpu / base_cpu:.1f}x)"))
    read, unpickled = _table_read_vs_unpickled(repo, args.rounds * 4)
    rows.append(("a 10,000-step table: read from git / from a pickle file (a cache of tables)", f"{read:.4f} s / {unpickled:.4f} s"))
    rows.append(("load average at the end", " ".join(f"{x:.1f}" for x in os.getloadavg())))
    report(f"ledger diff, {args.steps:,} steps, {args.rounds} interleaved rounds (bench/bench_diff.py)", rows)


if __name__ == "__main__":
    main()
