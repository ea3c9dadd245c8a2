"""`ledger run` end to end: the commit layout, the user's tree untouched, races, signals, crashes."""

from __future__ import annotations

import hashlib
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import git, ledger, make_repo

from ledger import yamlio


def _snapshot(repo: Path) -> dict[str, str]:
    """HEAD, the index file's bytes, and every working-tree file's bytes."""
    out = {
        "HEAD": (repo / ".git" / "HEAD").read_text(),
        "head_commit": git(repo, "rev-parse", "HEAD"),
        "index": hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest(),
    }
    for p in sorted(repo.rglob("*")):
        if ".git" in p.parts or ".ledger" in p.parts or not p.is_file():
            continue
        out[str(p.relative_to(repo))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _manifest(repo: Path, run_id: str) -> dict:
    path = f"runs/{run_id[-4:-2]}/{run_id}/manifest.yaml"
    return yamlio.loads(git(repo, "show", f"experiments:{path}"))


def _run_ids(repo: Path) -> list[str]:
    log = git(repo, "log", "--first-parent", "--format=%(trailers:key=Run-Id,valueonly)", "experiments")
    return [line.strip() for line in log.splitlines() if line.strip()]


def test_run_makes_one_commit_with_the_required_layout(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "train.py").write_text("print('changed')\n")  # an uncommitted change to a tracked file
    (repo / "untracked.txt").write_text("not recorded\n")
    head = git(repo, "rev-parse", "HEAD").strip()
    r = ledger(repo, "run", "--name", "first", "--", sys.executable, "-c", "print('hello from the job')")
    assert r.returncode == 0, r.stderr
    assert "hello from the job" in r.stdout  # the terminal still sees the output
    [run_id] = _run_ids(repo)
    tip = git(repo, "rev-parse", "experiments").strip()
    parents = git(repo, "rev-list", "--parents", "-n1", tip).split()
    assert parents[1:] == [head]  # first run: the code commit is the only parent
    msg = git(repo, "log", "-1", "--format=%B", tip)
    assert msg.startswith(f"run {run_id} (first): exit 0, ")
    assert f"Run-Id: {run_id}" in msg and f"Code-Commit: {head}" in msg
    files = git(repo, "ls-tree", "-r", "--name-only", tip).split()
    folder = f"runs/{run_id[-4:-2]}/{run_id}"
    for name in ("manifest.yaml", "trainer.log", "engine.log", "status"):
        assert f"{folder}/{name}" in files
    assert "untracked.txt" not in files
    assert git(repo, "show", f"{tip}:train.py") == "print('changed')\n"  # the code as the run saw it
    m = _manifest(repo, run_id)
    assert m["code"]["commit"] == head and m["code"]["dirty"] is True and m["code"]["branch"] == "feature"
    assert m["code"]["untracked_left_out"] == 1
    assert len(m["code"]["patch"]) == 64
    assert m["settings"]["code"] == m["code"]["content"]  # the content of the files that count (issue 22)
    assert {k: v for k, v in m["status"].items() if k != "duration_s"} == {"state": "finished", "exit_code": 0, "signal": None}
    assert isinstance(m["status"]["duration_s"], float) and 0 <= m["status"]["duration_s"] < 60
    status = git(repo, "show", f"{tip}:{folder}/status")
    assert status.startswith("exit=0 signal=- duration=") and "finished=20" in status
    assert "hello from the job" in git(repo, "show", f"{tip}:{folder}/trainer.log")
    for key in (
        "schema",
        "id",
        "name",
        "note",
        "started",
        "finished",
        "host",
        "command",
        "code",
        "image",
        "seeds",
        "settings",
        "logs",
        "gpu",
        "data",
        "status",
        "replay_of",
    ):
        assert key in m


def test_second_run_has_previous_tip_as_first_parent_and_keeps_earlier_runs(repo: Path) -> None:
    assert ledger(repo, "run", "--", "true").returncode == 0
    first_tip = git(repo, "rev-parse", "experiments").strip()
    assert ledger(repo, "run", "--", "true").returncode == 0
    tip = git(repo, "rev-parse", "experiments").strip()
    parents = git(repo, "rev-list", "--parents", "-n1", tip).split()[1:]
    assert parents == [first_tip, git(repo, "rev-parse", "HEAD").strip()]
    ids = _run_ids(repo)
    assert len(ids) == 2
    files = git(repo, "ls-tree", "-r", "--name-only", tip)
    for rid in ids:
        assert f"runs/{rid[-4:-2]}/{rid}/manifest.yaml" in files


def test_head_index_and_worktree_are_untouched(repo: Path) -> None:
    (repo / "README.md").write_text("dirty\n")
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    (repo / "train.py").write_text("print('staged then edited')\n")
    git(repo, "add", "train.py")
    (repo / "train.py").write_text("print('edited again')\n")
    before = _snapshot(repo)
    r = ledger(repo, "run", "--", sys.executable, "-c", "print(1)")
    assert r.returncode == 0, r.stderr
    assert _snapshot(repo) == before
    tip = "experiments"
    assert git(repo, "show", f"{tip}:staged.txt") == "staged\n"  # staged new file is tracked
    assert git(repo, "show", f"{tip}:train.py") == "print('edited again')\n"  # the working tree's bytes
    assert git(repo, "status", "--porcelain") == before_status(repo)


def before_status(repo: Path) -> str:
    return git(repo, "status", "--porcelain")


def test_eight_parallel_runs_all_land(repo: Path) -> None:
    def one(i: int) -> int:
        return ledger(repo, "run", "--name", f"p{i}", "--", sys.executable, "-c", f"print({i})").returncode

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(one, range(8)))
    assert codes == [0] * 8
    ids = _run_ids(repo)
    assert len(ids) == 8 and len(set(ids)) == 8
    names = sorted(_manifest(repo, rid)["name"] for rid in ids)
    assert names == [f"p{i}" for i in range(8)]
    listed = ledger(repo, "list", "--json")
    assert listed.returncode == 0
    import json

    assert len(json.loads(listed.stdout)) == 8


@pytest.mark.parametrize(
    "argv, code",
    [
        ([sys.executable, "-c", "import sys; sys.exit(3)"], 3),
        ([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], 128 + 9),
        (["definitely-not-a-command-xyz"], 127),
        (["./not-executable.sh"], 126),
    ],
)
def test_exit_codes(repo: Path, argv: list[str], code: int) -> None:
    (repo / "not-executable.sh").write_text("echo hi\n")
    r = ledger(repo, "run", "--", *argv)
    assert r.returncode == code, r.stderr
    if code in (126, 127):
        assert "ledger: error:" in r.stderr and "Traceback" not in r.stderr
        assert git(repo, "branch", "--list", "experiments") == ""  # nothing ran: nothing recorded
        assert not any((repo / ".ledger" / "staging").iterdir())
    else:
        [rid] = _run_ids(repo)
        m = _manifest(repo, rid)
        assert m["status"]["exit_code"] == code
        assert m["status"]["state"] == ("failed" if code == 3 else "killed")


def test_sigterm_is_forwarded_and_recorded_as_killed(repo: Path) -> None:
    script = repo / "job.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "run", "--", sys.executable, str(script)],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "started"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    [rid] = _run_ids(repo)
    m = _manifest(repo, rid)
    assert m["status"]["state"] == "killed" and m["status"]["signal"] == "SIGTERM"


def test_sigkilled_ledger_is_recovered_as_lost(repo: Path) -> None:
    script = repo / "job.py"
    script.write_text("import time\nprint('step 1', flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "run", "--name", "crashy", "--", sys.executable, str(script)],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "step 1"
    time.sleep(0.3)
    proc.kill()
    proc.wait()
    staged = list((repo / ".ledger" / "staging").iterdir())
    assert len(staged) == 1
    time.sleep(1.1)
    before_recover = time.time()
    r = ledger(repo, "recover")
    assert r.returncode == 0, r.stderr
    [rid] = _run_ids(repo)
    m = _manifest(repo, rid)
    assert m["status"]["state"] == "lost" and m["name"] == "crashy"
    from ledger.timefmt import parse_iso

    finished = parse_iso(m["finished"])
    assert finished is not None and finished < before_recover  # when the job was last heard of, not now
    log = git(repo, "show", f"experiments:runs/{rid[-4:-2]}/{rid}/trainer.log")
    assert "step 1" in log
    assert not any((repo / ".ledger" / "staging").iterdir())
    # the orphaned job was stopped too
    time.sleep(0.5)
    assert subprocess.run(["pgrep", "-f", str(script)], stdout=subprocess.PIPE).returncode != 0


def test_bad_input_is_one_line_with_documented_codes(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    r = ledger(plain, "run", "--", "true")
    assert r.returncode == 125 and "not inside a git repository" in r.stderr and "Traceback" not in r.stderr
    r = ledger(plain, "list")
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    empty = make_repo(tmp_path / "empty", commit=False)
    r = ledger(empty, "run", "--", "true")
    assert r.returncode == 125 and "no commits" in r.stderr
    repo = make_repo(tmp_path / "r")
    r = ledger(repo, "run")
    assert r.returncode == 125 and "no command" in r.stderr
    r = ledger(repo, "show", "nope")
    assert r.returncode == 4 and "no run named 'nope'" in r.stderr
    git(repo, "branch", "experiments")  # a branch ledger did not make
    r = ledger(repo, "run", "--", "true")
    assert r.returncode == 125 and "not a ledger branch" in r.stderr
    assert not (repo / ".ledger" / "staging").exists() or not any((repo / ".ledger" / "staging").iterdir())


def test_any_failure_before_the_job_is_exit_125_with_one_line(repo: Path) -> None:
    """Not only ledger's own errors: an OSError while staging (the staging folder is a file)."""
    (repo / ".ledger").mkdir(exist_ok=True)
    shutil.rmtree(repo / ".ledger" / "staging", ignore_errors=True)
    (repo / ".ledger" / "staging").write_text("not a folder\n")
    marker = repo / "ran"
    r = ledger(repo, "run", "--", "touch", str(marker))
    assert r.returncode == 125, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("ledger: error: could not start the run:"), r.stderr
    assert "internal error" not in r.stderr and not marker.exists()
    assert git(repo, "branch", "--list", "experiments") == ""  # no run commit, not even the branch
