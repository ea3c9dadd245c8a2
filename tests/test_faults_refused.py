"""Faults refused cleanly (issue 31, item 7): one line that says what refused and how to fix it.

A repository owned by another user (git's `safe.directory`), a user's `reference-transaction`
hook that rejects ledger's ref update, and a 2 GiB dirty file: each was an internal error, 200
retries ending in "kept moving", or 83 s before the job started with the whole blob in the tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git, head, ledger

from ledger.storage.git import Repo
from ledger.storage.store import find_run

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving the repository to another user (chown) needs root")


def _error_lines(err: str) -> list[str]:
    assert "Traceback" not in err and "internal error" not in err, err
    return [line for line in err.splitlines() if line.startswith("ledger: error:")]


def _chown(root: Path, uid: int) -> None:
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(folder, name), uid, uid)
    os.lchown(root, uid, uid)


def _staged(repo: Path) -> list[Path]:
    staging = repo / ".ledger" / "staging"
    return sorted(staging.iterdir()) if staging.is_dir() else []


@needs_root
def test_a_repository_owned_by_another_user_is_refused_naming_safe_directory(repo: Path, tmp_path: Path) -> None:
    """Was: `internal error: GitError: ... is not owned by current user`, exit 1, for every verb."""
    _chown(repo, 4242)
    marker = tmp_path / "job-ran"
    fix = f"git config --global --add safe.directory {repo}"
    r = ledger(repo, "run", "--", "touch", str(marker))
    lines = _error_lines(r.stderr)
    assert r.returncode == 125 and len(lines) == 1 and "safe.directory" in lines[0] and fix in lines[0], r.stderr
    assert not marker.exists() and not (repo / ".ledger").exists()  # nothing ran, nothing staged
    r = ledger(repo, "list")
    lines = _error_lines(r.stderr)
    assert r.returncode == 1 and len(lines) == 1 and fix in lines[0], r.stderr
    subprocess.run(fix.split(), cwd=tmp_path, check=True)  # the fix it names is the fix
    r = ledger(repo, "run", "--", "touch", str(marker))
    assert r.returncode == 0 and marker.exists(), r.stderr


def test_git_alone_refusing_the_repository_is_caught_before_the_job(repo: Path) -> None:
    """Where git refuses the repository but libgit2 opens it (git's test knob makes git alone see
    another owner), ledger asks git before the job (which worktree has the branch): one line naming
    safe.directory, exit 125, nothing run or staged. (A refusal at the commit itself, after the
    job, keeps the run staged: the hook test below.)"""
    knob = {"GIT_TEST_ASSUME_DIFFERENT_OWNER": "1"}
    probe = subprocess.run(["git", "status"], cwd=repo, env={**os.environ, **knob}, capture_output=True, text=True)
    if "dubious ownership" not in probe.stderr:
        pytest.skip(f"this git ignores GIT_TEST_ASSUME_DIFFERENT_OWNER ({git(repo, 'version').strip()})")
    marker = repo / "ran"
    r = ledger(repo, "run", "--", "touch", str(marker), env=knob)
    lines = _error_lines(r.stderr)
    assert r.returncode == 125 and len(lines) == 1, r.stderr
    assert "safe.directory" in lines[0] and "kept moving" not in lines[0], lines
    assert not marker.exists() and _staged(repo) == []


HOOK = """#!/bin/sh
echo "$1" >> {log}
cat > /dev/null
[ "$1" = prepared ] || exit 0
echo "policy: branch experiments is frozen for the audit" >&2
exit 1
"""


def test_a_reference_transaction_hook_that_refuses_is_named_once_and_the_run_stays_staged(repo: Path, tmp_path: Path) -> None:
    """Was: the hook refused 200 times, then "kept moving"; now its refusal and its words, once."""
    log = tmp_path / "hook.log"
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(HOOK.format(log=log))
    hook.chmod(0o755)
    r = ledger(repo, "run", "--", "true")
    lines = _error_lines(r.stderr)
    assert r.returncode == 75 and len(lines) == 1, r.stderr
    assert "reference-transaction hook" in lines[0] and "policy: branch experiments is frozen for the audit" in lines[0], lines
    assert "ledger recover" in lines[0], lines
    assert log.read_text().split().count("prepared") == 1  # asked once: no retry can change its answer
    [staged] = _staged(repo)
    hook.unlink()
    r = ledger(repo, "recover")
    assert r.returncode == 0, r.stderr
    tip = Repo(repo).branch_tip("experiments")
    assert tip is not None and find_run(Repo(repo), tip, staged.name) is not None
    m = json.loads(ledger(repo, "show", staged.name, "--json").stdout)
    assert m["status"]["state"] == "finished" and m["status"]["exit_code"] == 0  # the job's true ending


GIB2 = 2 << 30
# `truncate -s 2G f && git hash-object f`: git's blob id of 2 GiB of zeros
ZEROS_2G_OID = "77e9132b46cb9535f286f18974872f40049d1a89"
PEEK = (
    "import glob, json, sys\n"
    "m = json.load(open(glob.glob('.ledger/staging/*/manifest.json')[0]))\n"
    "open(sys.argv[1], 'w').write(json.dumps(m['code']['large_files']))\n"
)


def test_a_big_dirty_file_is_recorded_by_size_and_blob_id_and_never_read_before_the_job(repo: Path, tmp_path: Path) -> None:
    """A tracked file made 2 GiB (sparse: no disk) is not read before the job: the manifest staged
    when the job starts has its size and no blob id yet; the committed one has git's blob id,
    computed while the job ran; the run's tree keeps the committed version; one warning says so.
    Was: 83 s before the job started, and the whole blob in the run's tree."""
    (repo / "data.bin").write_bytes(b"small\n")
    git(repo, "add", "data.bin")
    git(repo, "commit", "-q", "-m", "data")
    committed = git(repo, "rev-parse", "HEAD:data.bin").strip()
    with open(repo / "data.bin", "wb") as f:  # 2 GiB of zeros, every one a hole
        f.truncate(GIB2)
    seen = tmp_path / "seen.json"
    r = ledger(repo, "run", "--", sys.executable, "-c", PEEK, str(seen))
    assert r.returncode == 0, r.stderr
    notes = [line for line in r.stderr.splitlines() if "data.bin" in line]
    assert len(notes) == 1 and "code.max_file_mb (64)" in notes[0] and "2.0 GiB" in notes[0], r.stderr
    at_start = json.loads(seen.read_text())["data.bin"]
    assert at_start["size"] == GIB2 and at_start["oid"] is None  # what the job started with: not hashed yet
    rid = json.loads(ledger(repo, "list", "--json").stdout)[0]["id"]
    m = json.loads(ledger(repo, "show", rid, "--json").stdout)
    assert m["code"]["dirty"] is True and m["code"]["commit"] == head(repo)
    assert m["code"]["large_files"]["data.bin"] == {"size": GIB2, "mtime": at_start["mtime"], "oid": ZEROS_2G_OID}
    assert m["settings"]["code.large.data.bin"] == ZEROS_2G_OID
    assert any("data.bin" in w for w in m["warnings"])
    assert git(repo, "rev-parse", "experiments:data.bin").strip() == committed
