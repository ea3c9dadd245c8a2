"""Bounded cost per pulled run (issue 31, item 4): the verbs with and without one crafted run
holding 400,000 settings (in settings.json and in manifest.yaml, under the byte limits).

Three real runs of the toy trainer, then the crafted run committed with git plumbing as a teammate's
push would bring it. Baseline, same run: each verb on the branch without the crafted run; the
ratios say what the crafted run adds. Every diff compares anew (its cached comparison and replica
search are removed first); the listing index stays, as it does between a user's commands.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from common import ROOT, ledger_argv, report, scratch_repo, sh

from ledger.storage.limits import MAX_JSON_BYTES


def _git(repo: Path, *args: str, data: bytes | None = None, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(["git", *args], cwd=repo, input=data, capture_output=True, check=True, env=env)
    return out.stdout.decode().strip()


def craft(repo: Path, seed: str, rid: str, settings: int) -> None:
    """Commit a copy of run `seed` as run `rid`, with `settings` more settings, on `experiments`."""
    src = f"runs/{seed[-4:-2]}/{seed}"
    content = {}
    for rel in _git(repo, "ls-tree", "-r", "--name-only", "experiments", src).split():
        content[rel[len(src) + 1 :]] = subprocess.run(
            ["git", "show", f"experiments:{rel}"], cwd=repo, capture_output=True, check=True
        ).stdout.replace(seed.encode(), rid.encode())
    many = {f"k{i}": i for i in range(settings)}
    content["settings.json"] = json.dumps({**json.loads(content["settings.json"]), **many}).encode()
    assert len(content["settings.json"]) <= MAX_JSON_BYTES, "under the byte limit: only counting refuses it"
    extra = "".join(f"  {k}: {v}\n" for k, v in many.items()).encode()
    content["manifest.yaml"] = content["manifest.yaml"].replace(b"\nsettings:\n", b"\nsettings:\n" + extra, 1)
    env = {**os.environ, "GIT_INDEX_FILE": str(repo / ".git" / "craft-index")}
    tip = _git(repo, "rev-parse", "experiments")
    _git(repo, "read-tree", tip, env=env)
    lines = [
        f"100644 {_git(repo, 'hash-object', '-w', '--stdin', data=data)}\truns/{rid[-4:-2]}/{rid}/{rel}\n" for rel, data in content.items()
    ]
    _git(repo, "update-index", "--index-info", data="".join(lines).encode(), env=env)
    code = _git(repo, "rev-list", "--parents", "-n1", "experiments").split()[-1]
    msg = f"run {rid} (x): exit 0, 1.0s\n\nRun-Id: {rid}\nCode-Commit: {code}\n"
    commit = _git(repo, "commit-tree", _git(repo, "write-tree", env=env), "-p", tip, "-p", code, "-m", msg)
    _git(repo, "update-ref", "refs/heads/experiments", commit, tip)


def timed(repo: Path, *args: str, repeat: int) -> float:
    """Median wall time of `ledger ARGS` (exit 0, 1 or 3), each diff compared anew."""
    times = []
    for _ in range(repeat):
        for kind in ("diffs", "replicas"):
            shutil.rmtree(repo / ".git" / "ledger" / kind, ignore_errors=True)
        t = time.perf_counter()
        code = subprocess.run(ledger_argv(*args), cwd=repo, capture_output=True).returncode
        times.append(time.perf_counter() - t)
        assert code in (0, 1, 3), (args, code)
    return sorted(times)[len(times) // 2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--settings", type=int, default=400_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    repo = scratch_repo("limits")
    shutil.copytree(ROOT / "examples" / "toy_grpo", repo / "examples" / "toy_grpo")
    sh(["git", "add", "-A"], cwd=repo)
    sh(["git", "commit", "-q", "-m", "toy"], cwd=repo)
    for lr in ("0.1", "0.2", "0.3"):
        sh(ledger_argv("run", "--", "python3", "examples/toy_grpo/train.py", "--num-rollout", "3", "--lr", lr), cwd=repo)
    a, b, c = (
        json.loads(subprocess.run(ledger_argv("show", f"latest~{k}", "--json"), cwd=repo, capture_output=True).stdout)["id"]
        for k in (2, 1, 0)
    )
    verbs = [
        ("diff A B (two healthy runs)", ["diff", a, b]),
        ("log", ["log"]),
        ("list --changed", ["list", "--changed"]),
        ("list", ["list"]),
    ]
    base = {label: timed(repo, *argv, repeat=args.repeat) for label, argv in verbs}
    bad = "20260101-000010-0a0a"
    craft(repo, a, bad, args.settings)
    first = timed(repo, "diff", b, c, repeat=1)  # the first command after the run arrived: the listing index is made
    rows = [("first diff after the crafted run arrived", f"{first:.2f} s  ({first / base[verbs[0][0]]:.1f}x the healthy diff)")]
    for label, argv in verbs:
        t = timed(repo, *argv, repeat=args.repeat)
        rows.append((label, f"{t:.2f} s  ({t / base[label]:.1f}x the same verb without it, {base[label]:.2f} s)"))
    for label, argv in (("diff A BAD --force (refused)", ["diff", a, bad, "--force"]), ("show BAD (refused)", ["show", bad])):
        t = timed(repo, *argv, repeat=args.repeat)
        rows.append((label, f"{t:.2f} s  ({t / base[verbs[0][0]]:.1f}x the healthy diff)"))
    report(f"one pulled run of {args.settings:,} settings (bench/bench_limits.py)", rows)


if __name__ == "__main__":
    main()
