"""What each cache on the paths users feel saves: `ledger run` of a real short job and `ledger list`
of a small ledger, warm, and with one cache removed before each timed call, interleaved in rounds.

A cache earns its place only if removing it costs something a user would notice; the caches of
`ledger diff` (answers, reports, replica searches, metrics tables) are measured by bench_diff.py,
the listing index at 10,000 and 100,000 runs by bench_daily.py.

    .venv/bin/python bench/bench_caches.py [--rounds 7] [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from common import ledger_argv, report, scratch_repo, sh

JOB = """import sys
for i in range(int(sys.argv[1])):
    print(f"[2026-12-03 10:00:00] train.py:88 - step {i}: {{'train/loss': {1 / (i + 1):.4f}, 'train/grad_norm': 1.1}}")
"""


def _timed(argv: list[str], cwd: Path) -> float:
    t = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def _remove(*paths: Path) -> Callable[[], None]:
    def run() -> None:
        for p in paths:
            if p.is_dir():
                shutil.rmtree(p)
            else:
                p.unlink(missing_ok=True)

    return run


def _cases(repo: Path, user: Path) -> dict[str, Callable[[], None]]:
    local = repo / ".git" / "ledger"
    return {
        "warm (every cache kept)": lambda: None,
        "no .ledger.yaml cache (config)": _remove(local / "config"),
        "no host package versions (host)": _remove(local / "host"),
        "no secret catalogue (~/.cache/ledger/catalogue)": _remove(user / "catalogue"),
        "no compiled scanner database (~/.cache/ledger/hyperscan)": _remove(user / "hyperscan"),
        "no code-version memo (~/.cache/ledger/code-version)": _remove(user / "code-version"),
        "no parsed manifests or listing index (manifests.sqlite)": _remove(local / "manifests.sqlite"),
    }


def _measure(argv: list[str], repo: Path, cases: dict[str, Callable[[], None]], rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, before in cases.items():
            _timed(argv, repo)  # every other cache warm again
            before()
            times[name].append(_timed(argv, repo))
    return times


def _rows(times: dict[str, list[float]]) -> list[tuple[str, str]]:
    warm = statistics.median(next(iter(times.values())))
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append((name, f"{med:.3f} s" + ("" if med == warm else f" ({med - warm:+.3f} s against warm)")))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=30, help="runs in the ledger that `ledger list` lists")
    args = ap.parse_args()
    repo = scratch_repo("caches")
    user = Path(os.environ["HOME"]) / ".cache" / "ledger"
    os.environ.pop("XDG_CACHE_HOME", None)
    (repo / "job.py").write_text(JOB)
    sh(ledger_argv("init"), cwd=repo)
    sh(["git", "add", "-A"], cwd=repo)
    sh(["git", "commit", "-q", "-m", "job"], cwd=repo)
    run = ledger_argv("run", "--no-heat-guard", "--", sys.executable, "job.py", "1000")
    for _ in range(args.runs):
        sh(run, cwd=repo)
    cases = _cases(repo, user)
    report(
        f"`ledger run` of a real short job (1000 step lines), one cache removed before each call, medians of {args.rounds} rounds (bench/bench_caches.py)",
        _rows(_measure(run, repo, cases, args.rounds)),
    )
    listing = {k: v for k, v in cases.items() if "catalogue" not in k and "scanner" not in k and "host" not in k}
    report(
        f"`ledger list` of {args.runs}+ runs, one cache removed before each call, medians of {args.rounds} rounds",
        _rows(_measure(ledger_argv("list"), repo, listing, args.rounds)),
    )


if __name__ == "__main__":
    main()
