"""Runs in progress: `ledger list` shows a running run, then its final state; `ledger tail` follows it.

The job prints Miles-shaped lines (shapes from shared/miles-facts.md, "Log lines": a RolloutManager
`perf N:` line and an SGLang engine `Decode batch` line, each with its Ray actor prefix), then waits
for a file the test creates, so the test sees it running for as long as it needs, without timings.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from conftest import LEDGER, ledger

JOB = r"""
import os, sys, time
print("(SGLangEngine pid=42, ip=10.0.0.1) [2026-12-01 10:00:00 TP0] Decode batch. #running-req: 3", flush=True)
for step in range(3):
    print(f"(RolloutManager pid=7) [2026-12-01 10:00:0{step}] rollout.py:1193 - perf {step}: "
          f"{{'perf/rollout_time': 1.5}}", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
print("(RolloutManager pid=7) [2026-12-01 10:00:09] rollout.py:1193 - perf 3: {'perf/rollout_time': 1.5}",
      flush=True)
"""


def _wait_for(what: str, check: Callable[[], object], limit_s: float = 60) -> object:
    """Poll until `check` returns something truthy (a guard against hanging, not a timing check)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"gave up waiting for {what}")


def _listed(repo: Path, name: str) -> dict | None:
    out = ledger(repo, "list", "--json")
    assert out.returncode == 0, out.stderr
    rows = [r for r in json.loads(out.stdout) if r["name"] == name]
    return rows[-1] if rows else None


def test_list_shows_a_running_run_then_its_final_state_and_tail_follows_it(repo: Path) -> None:
    (repo / "job.py").write_text(JOB)
    go = repo.parent / "go"
    run = subprocess.Popen(
        [*LEDGER, "run", "--name", "live", "--no-debug-data", "--", "python3", "job.py", str(go)],
        cwd=repo,
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        row = _wait_for("the running run at step 2", lambda: (r := _listed(repo, "live")) and r.get("step") == 2 and r)
        assert isinstance(row, dict)
        assert row["state"] == "running" and row["exit_code"] is None
        assert row["last_step_at"] == "2026-12-01 10:00:02"
        table = ledger(repo, "list").stdout
        assert "running: step 2 (2026-12-01 10:00:02)" in table

        shown = ledger(repo, "show", "live", "--json")  # the manifest so far, marked as such
        assert shown.returncode == 0, shown.stderr
        so_far = json.loads(shown.stdout)
        assert so_far["status"]["state"] == "running" and so_far["status"]["step"] == 2
        assert so_far["name"] == "live" and so_far["command"]["argv"][-2:] == ["job.py", str(go)]
        assert "still running: this is its manifest so far" in shown.stderr
        assert "state: running" in ledger(repo, "show", "latest").stdout

        trainer = ledger(repo, "tail", "live", "-n", "2")
        assert trainer.returncode == 0, trainer.stderr
        assert [line.split(" - ")[1][:6] for line in trainer.stdout.splitlines()] == ["perf 1", "perf 2"]
        engine = ledger(repo, "tail", "latest", "--engine")
        assert engine.stdout.splitlines() == ["(SGLangEngine pid=42, ip=10.0.0.1) [2026-12-01 10:00:00 TP0] Decode batch. #running-req: 3"]

        follower = subprocess.Popen(
            [*LEDGER, "tail", "live", "-f", "-n", "1"],
            cwd=repo,
            env=dict(os.environ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_for("the follower's first line", lambda: follower.stdout and follower.stdout.readline())
        go.touch()  # the job prints its last step and ends; the follower ends with the run
        rest, err = follower.communicate(timeout=60)
        assert follower.returncode == 0, err
        assert "perf 3:" in rest
        assert run.wait(timeout=60) == 0
    finally:
        go.touch()
        if run.poll() is None:
            run.kill()
            run.wait()
    done = _listed(repo, "live")
    assert done is not None and done["state"] == "finished" and done["exit_code"] == 0
    assert "step" not in done  # a recorded run has no progress fields
    last = ledger(repo, "tail", "live", "-n", "1").stdout
    assert "perf 3:" in last


OTHER_FORMAT_JOB = r"""
import os, sys, time
for step in range(3):
    print(f"step {step}: loss={1.0 / (step + 1)} reward=0.5", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
"""


def test_list_n_counts_the_run_in_progress_and_shows_another_trainers_step(repo: Path) -> None:
    for name in ("old", "new"):
        assert ledger(repo, "run", "--name", name, "--no-debug-data", "--no-heat-guard", "--", "true").returncode == 0
    (repo / "job.py").write_text(OTHER_FORMAT_JOB)
    go = repo.parent / "go"
    run = subprocess.Popen(
        [*LEDGER, "run", "--name", "live", "--no-debug-data", "--no-heat-guard", "--", "python3", "job.py", str(go)],
        cwd=repo,
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for("the running run at step 2", lambda: (r := _listed(repo, "live")) and r.get("step") == 2)
        rows = ledger(repo, "list", "-n", "2").stdout.splitlines()[1:]  # issue 34, item 6: not 3 rows
        assert [r.split()[1] for r in rows] == ["live", "new"]
        assert "running: step 2" in rows[0]  # a `step N: key=value` trainer's step (item 1)
        assert [r["name"] for r in json.loads(ledger(repo, "list", "-n", "1", "--json").stdout)] == ["live"]
        go.touch()
        assert run.wait(timeout=60) == 0
    finally:
        go.touch()
        if run.poll() is None:
            run.kill()
            run.wait()
