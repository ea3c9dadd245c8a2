"""`ledger run -- true` against `true` and `python3 -c pass`, and `ledger list` against `git log`, with 0, 1,000, 10,000 runs.

Time until the job starts: the job is `date +%s.%N > FILE`; the time from launching `ledger run`
to that stamp, against the same command launched bare (both from this process, same run).

The branch is filled with synthetic run commits written through the same store code `ledger
run` uses (one ref update at the end, to keep set-up short).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import secrets
import statistics
import subprocess
import sys
import time

from common import ledger_argv, report, scratch_repo, sh, timeit

from ledger import yamlio
from ledger.manifest import new_manifest
from ledger.storage.git import Repo
from ledger.storage.store import build_run_tree, commit_message
from ledger.storage.summary import summary_of

SETTINGS = {f"setting-{i}": i * 0.5 for i in range(150)}  # a Miles run has ~150


def populate(repo_dir, n: int) -> None:
    if n <= 0:
        return
    repo = Repo(repo_dir)
    code = repo.code_snapshot()
    tip = repo.branch_tip("experiments")
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    for i in range(n):
        t = start + dt.timedelta(seconds=i)
        rid = f"{t.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
        m = new_manifest(rid, t)
        m["name"] = f"bench-{i}"
        m["settings"] = dict(SETTINGS, lr=1e-6 * (i % 7))
        m["status"] = {"state": "finished", "exit_code": 0, "signal": None, "duration_s": 1.0}
        blob = repo.blob(yamlio.dumps(m).encode())
        summary = repo.blob(json.dumps(summary_of(m), separators=(",", ":")).encode())
        settings = repo.blob(json.dumps(m["settings"], indent=0).encode())
        log = repo.blob(b"step 1\n")
        run_tree = repo.tree_with_edits(
            None,
            {
                "manifest.yaml": (blob, 0o100644),
                "summary.json": (summary, 0o100644),
                "settings.json": (settings, 0o100644),
                "trainer.log": (log, 0o100644),
                "engine.log": (log, 0o100644),
            },
        )
        tree = build_run_tree(repo, code.tree, tip, rid, run_tree)
        tip = repo.commit(tree, [tip, code.commit] if tip else [code.commit], commit_message(rid, m["name"], "exit 0", "1.0s", code.commit))
    assert tip is not None
    old = repo.branch_tip("experiments")
    repo.update_ref("refs/heads/experiments", tip, old, "bench populate")
    sh(["git", "gc", "--quiet"], cwd=repo_dir)  # the packed state `git gc --auto` after each run leads to


def until_start(argv: list[str], repo, stamp) -> float:
    """Seconds from launching `argv` (which ends in the stamping job) until the job ran."""
    t = time.time()
    sh(argv, cwd=repo)
    return float(stamp.read_text()) - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, nargs="*", default=[0, 1000, 10000])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--run-repeat", type=int, default=21, help="runs of each `ledger run` measure (medians: a shared machine is noisy)")
    args = ap.parse_args()
    repo = scratch_repo("store")
    rows = []
    have = 0
    for n in args.runs:
        populate(repo, n - have)
        have = n
        stamp = repo.parent / "started"
        job = ["sh", "-c", f"date +%s.%N > {stamp}"]
        k = args.run_repeat
        bare_start = statistics.median(until_start(job, repo, stamp) for _ in range(k))
        led_start = statistics.median(until_start(ledger_argv("run", "--no-debug-data", "--", *job), repo, stamp) for _ in range(k))
        base = timeit(lambda: sh(["true"], cwd=repo), k)
        # interleaved, so that both see the same load on a shared machine
        pairs = [
            (
                timeit(lambda: sh([sys.executable, "-c", "pass"], cwd=repo), 1),
                timeit(lambda: sh(ledger_argv("run", "--no-debug-data", "--", "true"), cwd=repo), 1),
            )
            for _ in range(k)
        ]
        python = statistics.median(p for p, _ in pairs)
        run = statistics.median(r for _, r in pairs)
        have += 2 * k
        sh(["git", "gc", "-q", "--auto"], cwd=repo)
        rows.append(
            (
                f"ledger run, {n:>6} runs: until the job starts",
                f"{led_start:.3f} s  (bare: {bare_start * 1000:.1f} ms; {led_start / bare_start:.0f}x; target < 0.1 s)",
            )
        )
        rows.append(
            (
                f"ledger run -- true, {n:>6} runs: total",
                f"{run:.3f} s  (true: {base * 1000:.1f} ms; {run / base:.0f}x; target < 0.2 s, flat)",
            )
        )
        rows.append(
            (
                f"ledger run -- true, {n:>6} runs: above python",
                f"{run - python:.3f} s  (python3 -c pass: {python:.3f} s, same interpreter; target <= 0.17 s, flat)",
            )
        )
        if n:
            cold_cache = repo / ".git" / "ledger" / "manifests.sqlite"
            cold_cache.unlink(missing_ok=True)
            cold = timeit(lambda: sh(ledger_argv("list", "--json"), cwd=repo), 1)
            warm = timeit(lambda: sh(ledger_argv("list", "--json"), cwd=repo), args.repeat)
            git_log = timeit(lambda: sh(["git", "log", "--format=%H %s", "experiments"], cwd=repo), args.repeat)
            rows.append(
                (
                    f"ledger list --json, {n:>6} runs",
                    f"{warm:.3f} s warm, {cold:.3f} s cold manifest cache (target < 0.3 s); "
                    f"git log of the branch {git_log:.3f} s: {warm / git_log:.1f}x / {cold / git_log:.1f}x",
                )
            )
    report("run overhead and listing (bench/bench_store.py)", rows)
    subprocess.run(["rm", "-rf", str(repo.parent)])


if __name__ == "__main__":
    main()
