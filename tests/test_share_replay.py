"""Runs shared across machines and replayed on identical samples (issue 5 acceptance).

Two (or four) clones of one bare git remote, with a DVC remote (a local folder, or S3 on
127.0.0.1 through moto), all real: git, DVC, the toy trainer, subprocesses.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import git, ledger, toy_repo, toy_train
from s3_server import S3Server, s3_server_fixture  # noqa: F401  (the fixture)

TRAIN = toy_train(rollout_batch_size=8, n_samples_per_prompt=4, seed=3, num_rollout=6)
HASH_RE = re.compile(r"trained on rollout (\d+): samples_sha256=([0-9a-f]{64})")


def _dvc(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=cwd, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _origin(tmp: Path, dvc_remote: str | None) -> Path:
    """A bare remote whose main holds the toy trainer, ledger init and the DVC remote config."""
    seed = toy_repo(tmp / "seed", {"README.md": "seed\n"})
    if dvc_remote is not None:
        assert _dvc(seed, "remote", "add", "-d", "storage", dvc_remote).returncode == 0
        git(seed, "commit", "-q", "-am", "the DVC remote")
    bare = tmp / "origin.git"
    git(tmp, "init", "-q", "--bare", str(bare))
    git(seed, "push", "-q", str(bare), "HEAD:refs/heads/main")
    return bare


def _clone(bare: Path, dest: Path) -> Path:
    git(bare.parent, "clone", "-q", str(bare), str(dest))
    return dest


def _hashes(text: str) -> dict[int, str]:
    return {int(m.group(1)): m.group(2) for m in HASH_RE.finditer(text)}


def _log(repo: Path, run: str) -> str:
    folder = ledger(repo, "path", run).stdout.strip()
    return git(repo, "show", f"experiments:{folder}/trainer.log")


@pytest.fixture
def shared(tmp_path: Path) -> tuple[Path, Path, Path]:
    storage = tmp_path / "dvc-storage"
    storage.mkdir()
    bare = _origin(tmp_path, str(storage))
    return bare, _clone(bare, tmp_path / "clone1"), _clone(bare, tmp_path / "clone2")


def test_record_push_pull_replay_on_identical_samples(shared: tuple[Path, Path, Path]) -> None:
    _bare, one, two = shared
    r = ledger(one, "run", "--name", "base", "--", *TRAIN)
    assert r.returncode == 0, r.stderr
    original = _hashes(_log(one, "base"))
    assert sorted(original) == list(range(6))
    r = ledger(one, "push")
    assert r.returncode == 0, r.stderr

    r = ledger(two, "pull", "origin", "base")
    assert r.returncode == 0, r.stderr
    r = ledger(two, "replay", "base", "--step", "3", "--name", "r3", "--yes")
    assert r.returncode == 0, r.stderr
    assert _hashes(_log(two, "r3")) == {0: original[3]}
    r = ledger(two, "replay", "base", "--steps", "2:5", "--name", "r25", "--yes")
    assert r.returncode == 0, r.stderr
    assert _hashes(_log(two, "r25")) == {0: original[2], 1: original[3], 2: original[4]}
    show = json.loads(ledger(two, "show", "r25", "--json").stdout)
    assert show["replay_of"] == json.loads(ledger(two, "show", "base", "--json").stdout)["id"]
    assert show["replay"]["mapping"] == {"0": 2, "1": 3, "2": 4}
    assert show["settings"]["num-rollout"] == 3 and show["settings"]["debug-train-only"] is True


def test_plain_git_worktree_and_dvc_pull_flow(shared: tuple[Path, Path, Path]) -> None:
    _bare, one, two = shared
    assert ledger(one, "run", "--name", "base", "--", *TRAIN).returncode == 0
    assert ledger(one, "push").returncode == 0
    original = _hashes(_log(one, "base"))
    git(two, "fetch", "-q", "origin", "experiments:experiments")
    exp = two.parent / "exp"
    # detached: with `experiments` checked out there, recording would move it under that worktree
    git(two, "worktree", "add", "-q", "--detach", str(exp), "experiments")
    folder = ledger(exp, "path", "base").stdout.strip()
    r = _dvc(exp, "pull", "-R", folder)
    assert r.returncode == 0, r.stderr
    assert (exp / folder / "data" / "rollout").is_dir()
    r = ledger(exp, "replay", "base", "--step", "1", "--name", "wt", "--yes")
    assert r.returncode == 0, r.stderr
    assert _hashes(_log(exp, "wt")) == {0: original[1]}


def test_replay_refuses_missing_unpulled_and_tampered_data(shared: tuple[Path, Path, Path]) -> None:
    _bare, one, two = shared
    assert ledger(one, "run", "--name", "base", "--", *TRAIN).returncode == 0
    assert ledger(one, "run", "--name", "nodata", "--no-debug-data", "--", *TRAIN).returncode == 0
    assert ledger(one, "push").returncode == 0
    git(two, "fetch", "-q", "origin", "experiments:experiments")
    # never pulled: says which command fetches it, runs nothing
    r = ledger(two, "replay", "base", "--step", "0")
    assert r.returncode == 5 and "ledger pull" in r.stderr and "Traceback" not in r.stderr
    # recorded without debug data
    r = ledger(two, "replay", "nodata")
    assert r.returncode == 5 and "no recorded rollout data" in r.stderr
    # tampered: pull into a worktree, change one byte of one file
    exp = two.parent / "exp"
    # detached: with `experiments` checked out there, recording would move it under that worktree
    git(two, "worktree", "add", "-q", "--detach", str(exp), "experiments")
    folder = ledger(exp, "path", "base").stdout.strip()
    assert _dvc(exp, "pull", "-R", folder).returncode == 0
    victim = sorted((exp / folder / "data" / "rollout").iterdir())[0]
    data = victim.read_bytes()
    victim.unlink()  # DVC may have linked it to the cache: replace, don't edit in place
    victim.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    before = git(exp, "rev-parse", "experiments")
    r = ledger(exp, "replay", "base")
    assert r.returncode == 5 and "does not match" in r.stderr
    assert git(exp, "rev-parse", "experiments") == before  # nothing ran, nothing recorded
    # dry run changes nothing
    r = ledger(one, "replay", "base", "--steps", "1:3", "--dry-run")
    assert r.returncode == 0 and "--debug-train-only" in r.stdout and "--num-rollout 2" in r.stdout


def test_four_clones_push_concurrently_and_every_run_lands_once(tmp_path: Path) -> None:
    storage = tmp_path / "dvc-storage"
    storage.mkdir()
    bare = _origin(tmp_path, str(storage))
    clones = [_clone(bare, tmp_path / f"c{i}") for i in range(4)]
    for i, c in enumerate(clones):
        for j in range(2):
            r = ledger(c, "run", "--name", f"c{i}-{j}", "--no-debug-data", "--", sys.executable, "-c", "print(1)")
            assert r.returncode == 0, r.stderr

    def push(c: Path) -> int:
        return ledger(c, "push").returncode

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(push, clones)) == [0, 0, 0, 0]
    check = _clone(bare, tmp_path / "check")
    git(check, "fetch", "-q", "origin", "experiments:experiments")
    names = sorted(r["name"] for r in json.loads(ledger(check, "list", "--json").stdout))
    assert names == sorted(f"c{i}-{j}" for i in range(4) for j in range(2))
    ids = git(check, "log", "--first-parent", "--format=%(trailers:key=Run-Id,valueonly)", "experiments").split()
    assert len(ids) == 8 and len(set(ids)) == 8


def test_unreachable_remote_keeps_runs(tmp_path: Path) -> None:
    storage = tmp_path / "dvc-storage"
    storage.mkdir()
    bare = _origin(tmp_path, str(storage))
    one = _clone(bare, tmp_path / "one")
    assert ledger(one, "run", "--name", "kept", "--", *TRAIN).returncode == 0
    git(one, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    shutil.rmtree(storage)
    (tmp_path / "dvc-storage").write_text("not a folder")  # the DVC remote is unusable too
    r = ledger(one, "push")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "kept" in ledger(one, "list").stdout


@pytest.mark.s3
def test_s3_remote_push_pull_replay(tmp_path: Path, s3_server: S3Server) -> None:
    bare = _origin(tmp_path, None)
    seed = _clone(bare, tmp_path / "seed2")
    s3_server.add_dvc_remote(seed, "s3store", "ledger-test")
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "s3 remote")
    git(seed, "push", "-q", "origin", "HEAD:main")
    one, two = _clone(bare, tmp_path / "one"), _clone(bare, tmp_path / "two")
    assert ledger(one, "run", "--name", "base", "--", *TRAIN).returncode == 0
    r = ledger(one, "push")
    assert r.returncode == 0, r.stderr
    assert s3_server.keys("ledger-test")
    original = _hashes(_log(one, "base"))
    r = ledger(two, "pull", "origin", "base")
    assert r.returncode == 0, r.stderr
    r = ledger(two, "replay", "base", "--steps", "2:4", "--name", "s3r", "--yes")
    assert r.returncode == 0, r.stderr
    assert _hashes(_log(two, "s3r")) == {0: original[2], 1: original[3]}


def test_replay_checks_the_environment_against_the_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    repo = toy_repo(tmp_path / "r")
    r = ledger(repo, "run", "--image", "ghost/miles:1", "--", *TRAIN[:-1], "3")
    assert r.returncode == 0, r.stderr
    git(repo, "commit", "-q", "--allow-empty", "-m", "later code")
    r = ledger(repo, "replay", "latest", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "the run used image ghost/miles:1" in r.stderr and "the code is at" in r.stderr
    r = ledger(repo, "replay", "latest", "--dry-run", "--strict")
    assert r.returncode == 1 and "the run used image ghost/miles:1" in r.stderr and "--strict" in r.stderr


def test_without_dvc_the_run_lands_and_replay_says_why(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path / "r", init=False)
    r = ledger(repo, "run", "--", *TRAIN)
    assert r.returncode == 0 and "not tracked" in r.stderr
    m = json.loads(ledger(repo, "show", "latest", "--json").stdout)
    rollout = [d for d in m["data"] if d["role"] == "rollout"][0]
    assert rollout["tracked"] is False and rollout["error"]
    kept = repo / ".ledger" / "untracked" / m["id"] / "rollout"
    assert "kept at" in r.stderr and len(list(kept.iterdir())) == 6  # never deleted with the staging area
    r = ledger(repo, "replay", "latest")
    assert r.returncode == 5 and "never tracked" in r.stderr and "ledger init" in r.stderr
