"""Listing and filtering 0 to 100,000 runs (`ledger list`, `--where` on a setting and on a metric's
last value, `--name`/`--since`, `--json`), cold, warm and after a tag (the listing index:
ledger/storage/listindex.py), against `git log --first-parent` of the same branch; the index's
size; and the verbs that name runs (`show`, `compare --html` of 10 runs, `diff`, `replay --dry-run`).

The branch is filled through the same store code `ledger run` uses (as bench_store.py does), each
run with 150 settings and summary metrics for 12 metrics, as `ledger run` writes them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import ROOT, ledger_argv, report, scratch_repo, sh, timeit

from ledger.manifest import new_manifest
from ledger.metrics.jsonl import write_metrics_jsonl
from ledger.metrics.summarymetrics import summarize
from ledger.metrics.table import MetricsTable, StepRow
from ledger.storage.git import Repo
from ledger.storage.store import build_run_tree, commit_message
from ledger.storage.summary import summary_of

SETTINGS = {f"setting-{i}": i * 0.5 for i in range(150)}
METRICS = [
    "perf/rollout_time",
    "perf/train_time",
    "perf/step_time",
    "perf/tokens_per_gpu_per_sec",
    "train/loss",
    "train/grad_norm",
    "train/entropy_loss",
    "train/pg_clipfrac",
    "rollout/raw_reward",
    "rollout/response_len/mean",
    "eval/accuracy",
    "eval/reward",
]


def _table(i: int, steps: int) -> MetricsTable:
    table = MetricsTable()
    for s in range(steps):
        table.rows[s] = StepRow(s, None, None, {m: math.sin(s / 7 + k + i) + k for k, m in enumerate(METRICS)})
    return table


def populate(repo_dir, n: int, steps: int = 200, tables: int = 0, spacing_s: float = 1.0) -> list[str]:
    """`n` runs started `spacing_s` apart; the last `tables` of them also get a metrics.jsonl of
    `steps` steps (for compare)."""
    repo = Repo(repo_dir)
    code = repo.code_snapshot()
    tip = repo.branch_tip("experiments")
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    ids = []
    tmp = repo_dir.parent / "metrics.jsonl"
    for i in range(n):
        t = start + dt.timedelta(seconds=i * spacing_s)
        rid = f"{t.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
        m = new_manifest(rid, t)
        m["name"] = f"bench-{i}"
        # a path of its own per run, as a trainer's checkpoint folder is: no two settings.json alike
        m["settings"] = dict(SETTINGS, lr=1e-6 * (i % 7), seed=i % 3, save=f"/ckpt/bench-{i}")
        m["status"] = {"state": "finished", "exit_code": 0, "signal": None, "duration_s": 1.0}
        table = _table(i, steps if i >= n - tables else 3)
        # JSON is YAML: the manifest is written as JSON here only to keep populating 10,000 runs short
        files = {
            "manifest.yaml": json.dumps(m, indent=1).encode(),
            "summary.json": json.dumps(summary_of(m, summarize(table)), separators=(",", ":")).encode(),
            "settings.json": json.dumps(m["settings"], indent=0).encode(),
            "trainer.log": b"step 1\n",
        }
        if i >= n - tables:
            write_metrics_jsonl(tmp, table)
            files["metrics.jsonl"] = tmp.read_bytes()
        run_tree = repo.tree_with_edits(None, {k: (repo.blob(v), 0o100644) for k, v in files.items()})
        tree = build_run_tree(repo, code.tree, tip, rid, run_tree)
        tip = repo.commit(tree, [tip, code.commit] if tip else [code.commit], commit_message(rid, m["name"], "exit 0", "1.0s", code.commit))
        ids.append(rid)
    assert tip is not None
    repo.update_ref("refs/heads/experiments", tip, repo.branch_tip("experiments"), "bench populate")
    sh(["git", "gc", "--quiet"], cwd=repo_dir)
    return ids


def add_newest(repo_dir) -> str:
    """One run started after every run of the branch, as `ledger run` adds one: a new tip whose
    default table is the last one with a line on top (its name no wider than the others')."""
    repo = Repo(repo_dir)
    code = repo.code_snapshot()
    tip = repo.branch_tip("experiments")
    t = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=400)  # after any populated run, later each call
    rid = f"{t.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    m = new_manifest(rid, t)
    m["name"] = "bench-0"
    m["settings"] = dict(SETTINGS, lr=1e-6, seed=0, save=f"/ckpt/{rid}")
    m["status"] = {"state": "finished", "exit_code": 0, "signal": None, "duration_s": 1.0}
    files = {
        "manifest.yaml": json.dumps(m, indent=1).encode(),
        "summary.json": json.dumps(summary_of(m, summarize(_table(0, 3))), separators=(",", ":")).encode(),
        "settings.json": json.dumps(m["settings"], indent=0).encode(),
    }
    run_tree = repo.tree_with_edits(None, {k: (repo.blob(v), 0o100644) for k, v in files.items()})
    tree = build_run_tree(repo, code.tree, tip, rid, run_tree)
    new = repo.commit(tree, [tip, code.commit] if tip else [code.commit], commit_message(rid, m["name"], "exit 0", "1.0s", code.commit))
    repo.update_ref("refs/heads/experiments", new, tip, "bench run")
    return rid


def chromium_ms(page, tmp) -> float:
    """Median wall time of a headless Chromium DOM dump of `page`."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium is not None
    argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp / 'profile'}", "--dump-dom", page.as_uri()]
    times = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, timeout=120)
        times.append(time.perf_counter() - t)
    return sorted(times)[1] * 1000


LISTINGS = [
    ("list (no filter)", ["list"]),
    ("list --where lr=2e-06 (a setting)", ["list", "--where", "lr=2e-06"]),
    ("list --where 'train/loss<4.5' (a metric's last value)", ["list", "--where", "train/loss<4.5"]),
    ("list --name 'bench-1*' --since 2026-01-01", ["list", "--name", "bench-1*", "--since", "2026-01-01"]),
    ("list --json (settings and metrics of every run)", ["list", "--json"]),
]
TARGETS = {  # (warm, cold) in seconds at 10,000 and 100,000 runs (issue 37)
    "list": {10_000: (0.3, 1.5), 100_000: (0.5, 10.0)},
    "--where": {100_000: (1.0, None)},
    "--json": {100_000: (5.0, None)},
}


def _target(argv: list[str], n: int) -> str:
    kind = "--json" if "--json" in argv else "--where" if "--where" in argv else "list" if argv == ["list"] else None
    found = TARGETS.get(kind or "", {}).get(n)
    if found is None:
        return ""
    warm, cold = found
    return f"; target warm <= {warm} s" + (f", cold <= {cold} s" if cold else "")


NAMED_LIMIT_S = 120.0  # a verb naming runs that takes longer is stopped and reported as over it


def run_quiet(argv: list[str], cwd) -> None:
    """A command whose exit code is not the point (`replay --dry-run` of a run it refuses)."""
    subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=NAMED_LIMIT_S)


def measure(repo, n: int, repeat: int, ids: list[str]) -> list[tuple[str, str]]:
    """Each listing cold (no listing index: every run folder read from git), warm (the index of this
    tip) and after a tag (a new tip: the index is updated from the last one, one folder read; for
    the default listing also after a new run, whose table is the last one with a line on top),
    against `git log --first-parent` of the branch run just before each timed call; the index's size; and the verbs
    that name runs (`show`, `compare`, `diff`, `replay --dry-run`)."""
    ledger = ledger_argv
    index = repo / ".git" / "ledger" / "manifests.sqlite"
    if not n:  # no branch yet: `ledger list` says so
        took = timeit(lambda: sh(ledger("list"), cwd=repo), repeat)
        return [
            (
                "list, 0 runs (no branch yet)",
                f"{took:.3f} s; `python3 -c pass` {timeit(lambda: sh([sys.executable, '-c', 'pass']), repeat):.3f} s",
            )
        ]
    base_times: list[float] = []

    def git_log() -> float:
        t = time.perf_counter()
        sh(["git", "log", "--first-parent", "--format=%H %s", "experiments"], cwd=repo)
        base_times.append(time.perf_counter() - t)
        return base_times[-1]

    def paired(fn: Callable[[], object], times: int) -> tuple[float, float]:
        """Median of `fn` and of the `git log` run just before each call (the same load)."""
        took, base = [], []
        for _ in range(times):
            base.append(git_log())
            t = time.perf_counter()
            fn()
            took.append(time.perf_counter() - t)
        return statistics.median(took), statistics.median(base)

    paired(lambda: None, repeat)
    rows = [
        (f"git log --first-parent of the branch, {n} runs", f"{statistics.median(base_times):.3f} s (the baseline, first {repeat} runs)")
    ]
    tags = iter(range(1_000_000))
    fresh = secrets.token_hex(3)  # a tag this ledger never had, also when a kept ledger is measured again

    answers = repo / ".git" / "ledger" / "answers"  # a repeated default `ledger list` is printed from here

    def cold(argv: list[str]) -> None:
        index.unlink(missing_ok=True)
        shutil.rmtree(answers, ignore_errors=True)
        sh(ledger(*argv), cwd=repo)

    def from_index(argv: list[str]) -> None:
        shutil.rmtree(answers, ignore_errors=True)
        sh(ledger(*argv), cwd=repo)

    def tagged(argv: list[str]) -> None:
        sh(ledger("list", "-n", "1"), cwd=repo)
        sh(ledger("tag", ids[n // 2], f"t{fresh}-{next(tags)}"), cwd=repo)

    def after_tag(argv: list[str]) -> tuple[float, float]:
        took, base = [], []
        for _ in range(repeat):
            tagged(argv)
            one, b = paired(lambda: sh(ledger(*argv), cwd=repo), 1)
            took.append(one)
            base.append(b)
        return statistics.median(took), statistics.median(base)

    def after_new_run() -> tuple[float, float]:
        """`ledger list` after a run newer than all (the usual new tip), each round a run more."""
        took, base = [], []
        for _ in range(repeat):
            sh(ledger("list"), cwd=repo)
            add_newest(repo)
            one, b = paired(lambda: sh(ledger("list"), cwd=repo), 1)
            took.append(one)
            base.append(b)
        return statistics.median(took), statistics.median(base)

    for label, argv in LISTINGS:
        took_cold, base_cold = paired(lambda argv=argv: cold(argv), max(1, repeat // 2))
        sh(ledger(*argv), cwd=repo)
        took, base = paired(lambda argv=argv: sh(ledger(*argv), cwd=repo), repeat)
        took_tag, base_tag = after_tag(argv)
        indexed = ""
        if argv == ["list"]:  # warm is the kept listing; the index alone is what a new tip reads
            took_index, base_index = paired(lambda argv=argv: from_index(argv), repeat)
            took_new, base_new = after_new_run()
            indexed = (
                f" (the index alone, no kept listing: {took_index:.3f} s, {took_index / base_index:.2f}x;"
                f" after a new run: {took_new:.3f} s, {took_new / base_new:.2f}x)"
            )
        rows.append(
            (
                f"{label}, {n} runs",
                f"warm {took:.3f} s ({took / base:.2f}x git log{_target(argv, n)}){indexed}, after a tag {took_tag:.3f} s "
                f"({took_tag / base_tag:.2f}x), cold {took_cold:.3f} s ({took_cold / base_cold:.1f}x)",
            )
        )
    took, base = _after_upgrade(repo, repeat, paired)
    rows.append(
        (f"list, first call of a new ledger that changed only the heat guard, {n} runs", f"{took:.3f} s ({took / base:.2f}x git log)")
    )
    for _label, argv in LISTINGS:  # the index as it is once every listing above was made
        sh(ledger(*argv), cwd=repo)
    rows.append((f"listing index (.git/ledger/manifests.sqlite), {n} runs", f"{index.stat().st_size / 1e6:.1f} MB"))
    names = [f"bench-{i}" for i in range(max(0, n - 10), n)]
    diff = ledger("diff", names[-8], names[-1]) if len(names) >= 8 else []
    named = [
        ("show NAME", ledger("show", names[-1]), False),
        (f"compare {len(names)} names --html", ledger("compare", *names, "--html", str(repo.parent / "cmp.html")), False),
        ("diff NAME NAME (one setting differs), first: its caches removed", diff, True),
        ("diff NAME NAME, again", diff, False),
        ("replay NAME --dry-run (refused: no training command)", ledger("replay", names[-1], "--dry-run"), False),
    ]

    def first(argv: list[str]) -> None:
        for kept in ("answers", "diffs", "replicas"):  # what a diff keeps of its answer (docs/performance.md, Caches)
            shutil.rmtree(repo / ".git" / "ledger" / kept, ignore_errors=True)
        run_quiet(argv, repo)

    for label, argv, uncached in named:
        if argv:
            try:
                took, base = paired(lambda argv=argv, uncached=uncached: first(argv) if uncached else run_quiet(argv, repo), repeat)
            except subprocess.TimeoutExpired:
                rows.append((f"{label}, {n} runs", f"over {NAMED_LIMIT_S:.0f} s (stopped)"))
                continue
            rows.append((f"{label}, {n} runs", f"{took:.3f} s ({took / base:.2f}x git log)"))
    return rows


def _after_upgrade(repo: Path, repeat: int, paired: Callable[[Callable[[], object], int], tuple[float, float]]) -> tuple[float, float]:
    """`ledger list` by a new ledger whose only change is to code the listing never runs (a comment
    added to heat/guard.py): its first call, byte-compiled as an installed package is. The index's
    tables are keyed by the listing's own code (`cache.code_version`), so it is read as it was."""
    sh(ledger_argv("list"), cwd=repo)
    took, base = [], []
    with tempfile.TemporaryDirectory(prefix="ledger-upgrade-") as tmp:
        for i in range(repeat):
            package = Path(tmp) / f"v{i}"
            shutil.copytree(ROOT / "ledger", package / "ledger", ignore=shutil.ignore_patterns("__pycache__"))
            with open(package / "ledger" / "heat" / "guard.py", "a", encoding="utf-8") as f:
                f.write(f"\n# upgrade {i}\n")
            sh([sys.executable, "-m", "compileall", "-q", str(package / "ledger")])
            env = dict(os.environ, PYTHONPATH=str(package))
            one, b = paired(lambda env=env: sh(ledger_argv("list"), cwd=repo, env=env), 1)
            took.append(one)
            base.append(b)
    return statistics.median(took), statistics.median(base)


def compare_page(repo, ids: list[str]) -> tuple[str, str]:
    """A 10-run `compare --html` page: its size, write time and render time in headless Chromium."""
    ledger = ledger_argv
    page = repo.parent / "compare.html"
    write = timeit(lambda: sh(ledger("compare", *ids[-10:], "--html", str(page)), cwd=repo), 3)
    empty = repo.parent / "empty.html"
    empty.write_text("<!DOCTYPE html><html><body></body></html>")
    if shutil.which("chromium") or shutil.which("chromium-browser"):
        render, base = chromium_ms(page, repo.parent), chromium_ms(empty, repo.parent)
        shown = f"render {render:.0f} ms in headless Chromium (empty page {base:.0f} ms: +{render - base:.0f} ms)"
    else:
        shown = "no chromium on PATH: render time not measured"
    label = f"compare --html, 10 runs x 12 metrics x 200 steps, {len(ids)} runs"
    return label, f"{page.stat().st_size / 1024:.0f} KiB, written in {write:.2f} s (with resolving and reading), {shown}"


def filled(n: int, keep: Path | None, days: float | None = None) -> tuple[Path, list[str]]:
    """A repository whose branch holds `n` runs (started a second apart, or spread over `days`):
    filled now, or (`keep`) the one filled before."""
    folder = f"r{n}" if days is None else f"r{n}-d{days:g}"
    if keep is not None and (keep / folder / "ids.json").is_file():
        base = keep / folder
        os.environ["HOME"] = str(base / "home")
        os.environ["GIT_CONFIG_GLOBAL"] = str(base / "home" / ".gitconfig")
        return base / "repo", json.loads((base / "ids.json").read_text())
    repo = scratch_repo(f"daily-{n}")
    ids = populate(repo, n, tables=10, spacing_s=1.0 if days is None or not n else days * 86400 / n) if n else []
    (repo.parent / "ids.json").write_text(json.dumps(ids))
    if keep is None:
        return repo, ids
    keep.mkdir(parents=True, exist_ok=True)
    shutil.move(str(repo.parent), keep / folder)
    return filled(n, keep, days)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10000, help="the larger ledger (the smaller one has a tenth of its runs)")
    ap.add_argument("--sizes", type=int, nargs="+", help="instead of --runs: every size to measure (0 is a repository without runs)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--keep", type=Path, help="keep each filled branch under DIR/r<N> and measure it again next time (100,000 runs take ~1 h to fill)"
    )
    ap.add_argument(
        "--spread",
        type=float,
        metavar="DAYS",
        help="start the runs evenly over DAYS (default: a second apart, so every run is in a diff's replica window)",
    )
    args = ap.parse_args()
    rows: list[tuple[str, str]] = []
    sizes = args.sizes or [args.runs // 10, args.runs]
    for n in sizes:
        repo, ids = filled(n, args.keep, args.spread)
        rows += measure(repo, n, args.repeat, ids)
        if n == max(sizes) and n >= 10:
            rows.append(compare_page(repo, ids))
        if args.keep is None:
            subprocess.run(["rm", "-rf", str(repo.parent)])
    report("listing, filtering and naming runs (bench/bench_daily.py)", rows)


if __name__ == "__main__":
    main()
