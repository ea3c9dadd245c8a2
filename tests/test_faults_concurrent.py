"""Fault suite, issue 24 part 1: concurrent writers. Sixteen `ledger run` at once in one clone,
several rounds: every run lands exactly once with exit 0. A ref lock another ledger's `git
update-ref` holds for milliseconds is waited out (bounded, with backoff); only a lock that
outlives the bound is reported (tests/test_faults_input.py holds that contract)."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

from conftest import LEDGER, git, ledger

WRITERS = 16
ROUNDS = 2


def _run_ids(repo: Path) -> list[str]:
    log = git(repo, "log", "--first-parent", "--format=%(trailers:key=Run-Id,valueonly)", "experiments")
    return [line.strip() for line in log.splitlines() if line.strip()]


def test_sixteen_concurrent_runs_all_land_exactly_once(repo: Path) -> None:
    """Was: some runs exited 1 with "branch 'experiments' is locked (… is at X but expected Y)"
    (another ledger's update-ref held the lock that instant), or 125 before the job."""
    failures: list[str] = []
    for _round in range(ROUNDS):
        procs = [
            subprocess.Popen(
                [*LEDGER, "run", "--no-heat-guard", "--", "true"], cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            )
            for _ in range(WRITERS)
        ]
        for proc in procs:
            _out, err = proc.communicate(timeout=120)
            if proc.returncode != 0:
                failures.append(f"exit {proc.returncode}: {err.strip().splitlines()[-1:]}")
    assert not failures, failures
    ids = _run_ids(repo)
    assert len(ids) == WRITERS * ROUNDS and max(Counter(ids).values()) == 1
    folders = {path.split("/")[-1] for path in git(repo, "ls-tree", "-d", "--name-only", "-r", "experiments", "runs/").split()}
    assert set(ids) <= folders  # every run's folder is at the tip: none was dropped by a later commit
    staging = repo / ".ledger" / "staging"
    assert not staging.exists() or not any(staging.iterdir())  # nothing left behind
    git(repo, "fsck", "--strict", "--no-progress")


def test_a_run_whose_ledger_was_killed_is_listed_as_orphaned(repo: Path) -> None:
    """Was: `ledger list` said nothing of it until someone thought of `ledger recover`."""
    from test_faults_input import _staged_dead_run

    assert ledger(repo, "run", "--no-heat-guard", "--name", "kept", "--", "true").returncode == 0
    staged = _staged_dead_run(repo)  # its ledger and job SIGKILLed
    listed = ledger(repo, "list")
    assert listed.returncode == 0, listed.stderr
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith(staged.name)]
    assert "orphaned: `ledger recover` commits it" in row
    as_json = json.loads(ledger(repo, "list", "--json").stdout)
    rows = as_json if isinstance(as_json, list) else as_json.get("runs", [])
    (entry,) = [r for r in rows if r["id"] == staged.name]
    assert entry["state"] == "orphaned" and "ledger recover" in entry["hint"]
    assert ledger(repo, "recover").returncode == 0
    after = ledger(repo, "list").stdout
    assert "orphaned" not in after and "lost" in next(line for line in after.splitlines() if line.startswith(staged.name))
