"""Fault suite, issue 11: the branch and the claim, beyond test_faults_input.py. The experiments
branch checked out in the main worktree is refused like in a linked one; a branch moved to a
foreign commit while the job ran keeps the run staged with its true ending; a claim held by a
live `ledger recover` is a real lock that another recover respects."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from conftest import git, ledger
from test_faults_input import _manifest, _refused, _run_ids, _staged_dead_run


def test_branch_checked_out_in_the_main_worktree_is_refused(repo: Path) -> None:
    assert ledger(repo, "run", "--no-heat-guard", "--", "true").returncode == 0
    git(repo, "checkout", "-q", "experiments")
    line = _refused(repo)
    assert "checked out" in line and str(repo) in line


def test_worktrees_of_a_bare_repository_are_judged_by_their_own_heads(repo: Path, tmp_path: Path) -> None:
    """A bare repository's HEAD names a branch nobody has checked out (`git worktree list` says
    "bare"): it never blocks recording; a linked worktree that has the branch checked out does."""
    assert ledger(repo, "run", "--no-heat-guard", "--", "true").returncode == 0
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    git(bare, "symbolic-ref", "HEAD", "refs/heads/experiments")
    git(bare, "worktree", "add", "-q", str(tmp_path / "wt"), "main")
    run = ledger(tmp_path / "wt", "run", "--no-heat-guard", "--", "true")
    assert run.returncode == 0, run.stderr
    git(bare, "worktree", "add", "-q", str(tmp_path / "exp"), "experiments")
    line = _refused(tmp_path / "wt")
    assert "checked out" in line and str(tmp_path / "exp") in line


def test_foreign_tip_at_the_end_keeps_the_true_exit_status_for_recover(repo: Path) -> None:
    """The job moves the branch to a commit ledger did not make: one error line that names
    `ledger recover`, the run stays staged, and recover records exit 3 (not lost, exit None)."""
    assert ledger(repo, "run", "--no-heat-guard", "--", "true").returncode == 0
    tip = git(repo, "rev-parse", "experiments").strip()
    proc = ledger(repo, "run", "--no-heat-guard", "--", "sh", "-c", "git update-ref refs/heads/experiments $(git rev-parse main); exit 3")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ledger: error:")]
    assert proc.returncode == 75 and len(errors) == 1, proc.stderr  # EXIT_NOT_RECORDED
    assert "not a ledger branch" in errors[0] and "ledger recover" in errors[0]  # was: no word of recover
    git(repo, "update-ref", "refs/heads/experiments", tip)
    assert ledger(repo, "recover").returncode == 0
    status = _manifest(repo, _run_ids(repo)[0])["status"]
    assert (status["state"], status["exit_code"]) == ("failed", 3)


def test_claim_held_by_a_live_recover_is_respected(repo: Path) -> None:
    """While another recover holds the `finalising` lock the run is left to it; when that
    recover dies the kernel drops the lock and the next recover commits the run."""
    staged = _staged_dead_run(repo)
    fd = os.open(staged / "finalising", os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a recover still at work
        rec = ledger(repo, "recover")
        assert rec.returncode == 0 and "recovered 0 runs" in rec.stderr, rec.stderr
        assert git(repo, "branch", "--list", "experiments") == "" and staged.is_dir()
    finally:
        os.close(fd)
    assert "recovered 1 run" in ledger(repo, "recover").stderr
    assert len(_run_ids(repo)) == 1
