"""Fault suite, issue 24 part 2: the code a run records is the code it saw. A modified submodule
keeps its entry (a gitlink to the commit it has checked out; its uncommitted changes as a
setting), and a dirty tracked file whose name is not UTF-8 is stored under its exact bytes."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from conftest import git, ledger, make_repo

from ledger import yamlio


def _latest(repo: Path) -> tuple[str, dict]:
    run_id = git(repo, "log", "-1", "--format=%(trailers:key=Run-Id,valueonly)", "experiments").strip()
    m = yamlio.loads(git(repo, "show", f"experiments:runs/{run_id[-4:-2]}/{run_id}/manifest.yaml"))
    return run_id, m


def _ls_tree(repo: Path, path: str) -> str:
    return git(repo, "ls-tree", "experiments", "--", path).strip()


def test_modified_submodule_is_recorded_as_its_checked_out_commit(repo: Path, tmp_path: Path) -> None:
    """Was: the run was `dirty: true` but its tree had no entry for the submodule at all."""
    lib = make_repo(tmp_path / "lib", {"a.txt": "a\n"})
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(repo, "commit", "-q", "-m", "add lib")
    sub = repo / "lib"
    (sub / "b.txt").write_text("b\n")
    git(sub, "add", "b.txt")
    git(sub, "commit", "-q", "-m", "a new commit in the submodule")
    moved_to = git(sub, "rev-parse", "HEAD").strip()
    (sub / "a.txt").write_text("a, edited\n")  # and a dirty file on top
    proc = ledger(repo, "run", "--no-heat-guard", "--", "true")
    assert proc.returncode == 0, proc.stderr
    _run_id, m = _latest(repo)
    assert _ls_tree(repo, "lib") == f"160000 commit {moved_to}\tlib"
    assert m["code"]["dirty"] is True
    state = m["code"]["submodules"]["lib"]
    assert state["commit"] == moved_to and state["dirty"] is True and len(state["patch"]) == 64
    assert m["settings"]["code.submodule.lib"] == state["patch"]
    # another edit inside the submodule is another setting value
    (sub / "a.txt").write_text("a, edited again\n")
    assert ledger(repo, "run", "--no-heat-guard", "--", "true").returncode == 0
    assert _latest(repo)[1]["settings"]["code.submodule.lib"] != state["patch"]
    git(repo, "fsck", "--strict", "--no-progress")


def test_dirty_tracked_file_with_a_non_utf8_name_is_stored_under_its_bytes(repo: Path) -> None:
    """Was: `internal error: UnicodeEncodeError … surrogates not allowed`, exit 1, no run."""
    name = b"conf-\xff\xfe.txt"
    (repo / name.decode("utf-8", "surrogateescape")).write_bytes(b"one\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    git(repo, "commit", "-q", "-m", "a file whose name is not UTF-8")
    (repo / name.decode("utf-8", "surrogateescape")).write_bytes(b"two\n")
    proc = ledger(repo, "run", "--no-heat-guard", "--", "true")
    assert proc.returncode == 0, proc.stderr
    run_id, m = _latest(repo)
    assert m["code"]["dirty"] is True and m["code"]["patch"]
    listed = subprocess.run(["git", "ls-tree", "-z", "experiments"], cwd=repo, capture_output=True, check=True).stdout
    entries = dict((e.split(b"\t", 1)[1], e.split(b"\t", 1)[0]) for e in listed.split(b"\0") if e)
    blob = entries[name].split()[2].decode()
    assert git(repo, "cat-file", "blob", blob) == "two\n"
    assert f"runs/{run_id[-4:-2]}/{run_id}" in git(repo, "ls-tree", "-r", "--name-only", "experiments")
    git(repo, "fsck", "--strict", "--no-progress")


def test_untracked_files_are_counted_by_git_while_the_job_runs(repo: Path) -> None:
    """Was: libgit2 listed every untracked file before the job started (100,000 files: ~0.6 s
    before the job; bench/bench_untracked.py measures the time to the job). Now the snapshot
    taken before the job never looks at them, and git counts them while the job runs: files in
    untracked folders count, ignored ones and the job's own outputs do not."""
    from ledger.storage.git import Repo

    (repo / ".gitignore").write_text("*.ckpt\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore checkpoints")
    for rel in ("notes.txt", "outputs/a/1.txt", "outputs/a/2.txt", "outputs/b/3.txt", "model.ckpt"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("x\n")
    assert Repo(repo).code_snapshot().untracked is None  # nothing listed before the job
    proc = ledger(repo, "run", "--no-heat-guard", "--", "sh", "-c", "mkdir -p outputs/c && touch outputs/c/new.txt")
    assert proc.returncode == 0, proc.stderr
    assert _latest(repo)[1]["code"]["untracked_left_out"] == 4


def test_a_file_the_job_writes_in_its_first_instant_is_not_counted(repo: Path) -> None:
    """Was: `since` came from time.time(), and the kernel stamps a file's ctime from a coarse clock
    up to a tick behind it: a file written within that tick of the job's start had a ctime before
    `since` and was counted as untracked (5, not 4, once in a full run)."""
    from ledger.fsutil import inode_clock
    from ledger.storage.gitcmd import UntrackedCount

    written = []
    for n in range(300):  # back to back, as a job that `touch`es a file at once: within one tick
        since = inode_clock(repo)  # what `ledger run` takes just before the job starts
        path = repo / f"out-{n}.txt"
        path.touch()  # an empty new file keeps the coarse stamp it was made with
        written.append((path.lstat().st_ctime, since))
    assert all(ctime >= since for ctime, since in written)  # was: nearly every one before `since`
    since = inode_clock(repo)
    (repo / "job-output.txt").touch()
    before = sum(p.lstat().st_ctime < since for p in repo.glob("out-*.txt"))
    assert before >= 290 and UntrackedCount(repo, since).result() == before  # job-output.txt is not counted


def test_the_inode_clock_of_a_folder_that_cannot_take_a_file_is_the_wall_clock(tmp_path: Path) -> None:
    from ledger.fsutil import inode_clock

    before = time.time()
    assert before <= inode_clock(tmp_path / "missing") <= time.time()  # no probe file: time.time()
    assert list(tmp_path.iterdir()) == []
    inode_clock(tmp_path)
    assert list(tmp_path.iterdir()) == []  # the probe file is removed again
