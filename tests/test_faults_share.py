"""Fault suite, issue 11 part 3: sharing errors are whole one-liners, and `ledger pull RUN` pulls
a run from the default remote. Real git remotes (bare repos) and real DVC."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git, ledger, make_repo


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, str]:
    """A repo set up with `ledger init` and one run with DVC-tracked data (no remotes yet)."""
    repo = make_repo(tmp_path / "proj", {"README.md": "x\n"})
    assert ledger(repo, "init").returncode == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "ledger init")
    run = ledger(repo, "run", "--no-heat-guard", "--data", "out", "--", "sh", "-c", "mkdir -p out; echo x > out/f")
    assert run.returncode == 0, run.stderr
    run_id = ledger(repo, "path", "latest").stdout.strip().rsplit("/", 1)[-1]
    return repo, run_id


def _one_error_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("ledger: error:")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    return errors[0]


def test_push_to_a_missing_git_remote_fails_before_any_data_moves(recorded: tuple[Path, str]) -> None:
    repo, _ = recorded
    proc = ledger(repo, "push", "upstream")
    assert proc.returncode == 1
    line = _one_error_line(proc.stderr)
    assert "no git remote named 'upstream'" in line and "git remote add upstream URL" in line
    assert "pushed data" not in proc.stderr and "data not pushed" not in proc.stderr  # nothing before it


def test_push_to_an_unreachable_url_says_all_of_gits_message(recorded: tuple[Path, str], tmp_path: Path) -> None:
    repo, _ = recorded
    git(repo, "remote", "add", "origin", str(tmp_path / "nowhere.git"))
    line = _one_error_line(ledger(repo, "push").stderr)
    # was: "cannot push 'experiments' to 'origin': and the repository exists."
    assert "does not appear to be a git repository" in line and line.count("(") >= 1
    assert "Could not read from remote repository. Please make sure" in line


def test_missing_dvc_remote_is_named_with_the_whole_fix(recorded: tuple[Path, str], tmp_path: Path) -> None:
    repo, _ = recorded
    git(tmp_path, "init", "-q", "--bare", "shared.git")
    git(repo, "remote", "add", "origin", str(tmp_path / "shared.git"))
    proc = ledger(repo, "push")
    assert proc.returncode == 5  # EXIT_DATA: the branch went, the data did not
    (line,) = [line for line in proc.stderr.splitlines() if "data not pushed" in line]
    assert "dvc remote add -d <remote name> <remote url>" in line  # was cut after "Create a default remote with"


def test_pull_with_one_run_argument_pulls_it_from_the_default_remote(recorded: tuple[Path, str], tmp_path: Path) -> None:
    repo, run_id = recorded
    git(tmp_path, "init", "-q", "--bare", "shared.git")
    git(repo, "remote", "add", "origin", str(tmp_path / "shared.git"))
    ledger(repo, "push")
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(tmp_path / "shared.git"), str(other))
    git(other, "checkout", "-q", "--orphan", "work")
    git(other, "commit", "-q", "--allow-empty", "-m", "work")
    proc = ledger(other, "pull", run_id)  # was: tried a git remote called '<run id>'
    assert "now at" in proc.stderr, proc.stderr
    assert "no git remote" not in proc.stderr
    assert ledger(other, "show", run_id).returncode == 0


def test_pull_without_a_dvc_remote_ends_on_the_failure(recorded: tuple[Path, str], tmp_path: Path) -> None:
    """A data failure on pull is named with its fix, and no "fetched data" line follows it."""
    repo, run_id = recorded
    git(tmp_path, "init", "-q", "--bare", "shared.git")
    git(repo, "remote", "add", "origin", str(tmp_path / "shared.git"))
    git(repo, "push", "-q", "origin", "main")
    ledger(repo, "push")  # the branch goes; the data cannot (no DVC remote)
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", "-b", "main", str(tmp_path / "shared.git"), str(other))
    proc = ledger(other, "pull", run_id)
    assert proc.returncode == 5, proc.stderr  # EXIT_DATA: the branch came, the data did not
    (line,) = [line for line in proc.stderr.splitlines() if "data not fetched" in line]
    assert "dvc remote add -d <remote name> <remote url>" in line
    assert "fetched data of" not in proc.stderr  # was: "fetched data of 1 run (0 objects)" after it
    assert "`ledger pull` again retries the data" in proc.stderr
