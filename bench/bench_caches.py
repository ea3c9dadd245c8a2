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
import sys
from collections.abc import Callable
from pathlib import Path

from common import ledger_argv, report, sh, short_job_repo, timed


def _remove(*paths: Path) -> Callable[[], None]:
    def run() -> None:
        for p in paths:
            if p.is_dir():
                shutil.rmtree(p)
            else:
                p.unlink(missing_ok=True)

    return run


WARM = "warm (every cache kept)"


def _cases(repo: Path, user: Path, listing: bool) -> dict[str, Callable[[], None]]:
    """Each cache's removal, by name: `ledger run`'s (`listing` False) or `ledger list`'s."""
    local = repo / ".git" / "ledger"
    both = {
        WARM: lambda: None,
        "no .ledger.yaml cache (.git/ledger/config)": _remove(local / "config"),
        "no code-version memo (~/.cache/ledger/code-version)": _remove(user / "code-version"),
        "no parsed manifests or listing index (manifests.sqlite)": _remove(local / "manifests.sqlite"),
    }
    if listing:
        return both
    return {
        **both,
        "no host package versions (.git/ledger/host)": _remove(local / "host"),
        "no secret catalogue (~/.cache/ledger/catalogue)": _remove(user / "catalogue"),
        "no compiled scanner database (~/.cache/ledger/hyperscan)": _remove(user / "hyperscan"),
    }


def _measure(argv: list[str], repo: Path, cases: dict[str, Callable[[], None]], rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, before in cases.items():
            timed(argv, repo)  # every other cache warm again
            before()
            times[name].append(timed(argv, repo))
    return times


def _rows(times: dict[str, list[float]]) -> list[tuple[str, str]]:
    warm = statistics.median(times[WARM])
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append((name, f"{med:.3f} s" + ("" if name == WARM else f" ({med - warm:+.3f} s against warm)")))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=30, help="runs in the ledger that `ledger list` lists")
    args = ap.parse_args()
    repo = short_job_repo("caches")
    user = Path(os.environ["HOME"]) / ".cache" / "ledger"
    os.environ.pop("XDG_CACHE_HOME", None)
    run = ledger_argv("run", "--no-heat-guard", "--", sys.executable, "job.py", "1000")
    for _ in range(args.runs):
        sh(run, cwd=repo)
    report(
        f"`ledger run` of a real short job (1000 step lines), one cache removed before each call, medians of {args.rounds} rounds (bench/bench_caches.py)",
        _rows(_measure(run, repo, _cases(repo, user, listing=False), args.rounds)),
    )
    report(
        f"`ledger list` of {args.runs}+ runs, one cache removed before each call, medians of {args.rounds} rounds",
        _rows(_measure(ledger_argv("list"), repo, _cases(repo, user, listing=True), args.rounds)),
    )


if __name__ == "__main__":
    main()
