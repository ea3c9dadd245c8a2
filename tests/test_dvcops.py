"""DVC-tracked run data with real git, real DVC (library and CLI) and real remotes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import git
from s3_server import S3Server, s3_server_fixture  # noqa: F401 - fixture `s3_server`

from ledger.data.dvcfile import parse_dvc_text
from ledger.data.dvcops import DataRecord, checkout_data, status_data, track_outputs, verify_data
from ledger.data.dvcremote import fetch_data, push_data
from ledger.errors import DataError

RUN_ID = "20261129-111354-a3f9"
SHARD = RUN_ID[-4:-2]
RUN_PATH = f"runs/{SHARD}/{RUN_ID}"


def dvc(cwd: Path, *args: str) -> str:
    """Run the real DVC CLI; fail the test with its output when it fails."""
    proc = subprocess.run(
        [sys.executable, "-m", "dvc", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, f"dvc {' '.join(args)} failed:\n{proc.stdout}"
    return proc.stdout


@pytest.fixture(autouse=True)
def dvc_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """DVC's global and system config in tmp; the global one points core.site_cache_dir there."""
    site = tmp_path / "dvc-site"
    global_dir = tmp_path / "dvc-global"
    global_dir.mkdir()
    (global_dir / "config").write_text(f"[core]\n    site_cache_dir = {site}\n")
    (tmp_path / "dvc-system").mkdir()
    monkeypatch.setenv("DVC_GLOBAL_CONFIG_DIR", str(global_dir))
    monkeypatch.setenv("DVC_SYSTEM_CONFIG_DIR", str(tmp_path / "dvc-system"))
    monkeypatch.delenv("DVC_SITE_CACHE_DIR", raising=False)  # so the config is what counts
    return site


@dataclass
class Project:
    root: Path
    remote: Path
    staging: Path  # .ledger/staging/<id>/ (git-ignored)

    def stage(self, files: dict[str, bytes]) -> None:
        for rel, data in files.items():
            path = self.staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def init_project(root: Path, remote: Path) -> Project:
    """A git repo with DVC initialised and a default local-folder remote, all committed."""
    from dvc.repo import Repo

    root.mkdir(parents=True)
    git(root, "init", "-q")
    (root / ".gitignore").write_text(".ledger/\n")
    with Repo.init(str(root)) as repo, repo.config.edit("repo") as conf:
        conf["remote"]["local"] = {"url": str(remote)}
        conf["core"]["remote"] = "local"
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "dvc init")
    return Project(root, remote, root / ".ledger" / "staging" / RUN_ID)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return init_project(tmp_path / "proj", tmp_path / "remote")


ROLLOUT = {
    "data/rollout/0.pt": os.urandom(3000),
    "data/rollout/1.pt": os.urandom(5000),
    "data/rollout/2.pt": b"",
    "data/rollout/sub/extra.bin": b"nested\n",
}
EVENTS = {"data/events/events.jsonl": b'{"step": 1}\n{"step": 2}\n'}
RUN_FILES = {"manifest.yaml": b"schema: 1\n", "trainer.log": b"step 1\n"}


def track_rollout_and_events(project: Project) -> list[DataRecord]:
    project.stage({**ROLLOUT, **EVENTS, **RUN_FILES})
    outputs = [
        ("rollout", project.staging / "data/rollout"),
        ("events", project.staging / "data/events"),
    ]
    records = track_outputs(project.root, project.staging, outputs)
    assert [r.error for r in records] == [None, None]
    return records


def commit_run(project: Project) -> str:
    """Commit the staged run folder on an `experiments` branch (via a worktree); return its sha."""
    worktree = project.root.parent / "exp"
    if not worktree.exists():
        git(project.root, "worktree", "add", "-q", "-b", "experiments", str(worktree))
    shutil.copytree(project.staging, worktree / RUN_PATH)
    git(worktree, "add", "runs")
    git(worktree, "commit", "-q", "-m", f"run {RUN_ID}")
    return git(worktree, "rev-parse", "HEAD").strip()


def dvc_texts_from_git(repo: Path, rev: str) -> list[str]:
    names = git(repo, "ls-tree", "-r", "--name-only", rev, f"{RUN_PATH}/data").split()
    return [git(repo, "show", f"{rev}:{n}") for n in names if n.endswith(".dvc")]


def clone_experiments(project: Project, dest: Path) -> Path:
    git(
        project.root.parent,
        "clone",
        "-q",
        "--branch",
        "experiments",
        str(project.root),
        str(dest),
    )
    return dest


# ---------------------------------------------------------------------------------------------
# track


def test_track_writes_what_dvc_add_writes_and_links_into_the_cache(project: Project, dvc_config: Path) -> None:
    project.stage({**ROLLOUT, **RUN_FILES})
    model = project.root.parent / "elsewhere" / "model.pt"
    model.parent.mkdir()
    model.write_bytes(os.urandom(2048))

    records = track_outputs(
        project.root,
        project.staging,
        [("rollout", project.staging / "data/rollout"), ("model", model)],
    )

    rollout, model_rec = records
    assert (rollout.tracked, rollout.error, rollout.path, rollout.nfiles) == (
        True,
        None,
        "data/rollout",
        4,
    )
    assert rollout.size == sum(len(v) for v in ROLLOUT.values())
    assert model_rec.tracked and model_rec.hash is not None and not model_rec.hash.endswith(".dir")
    assert not (project.staging / "data/model").exists()  # tracked where it is, not copied
    assert (project.staging / "data/.gitignore").read_text() == "/rollout\n/model\n"

    # The real `dvc add` on identical data in the workspace writes byte-identical .dvc files.
    cmp = project.root / "cmp"
    shutil.copytree(project.staging / "data/rollout", cmp / "rollout")
    shutil.copy(model, cmp / "model")
    dvc(project.root, "add", "-q", "cmp/rollout", "cmp/model")
    assert (project.staging / "data/rollout.dvc").read_text() == (cmp / "rollout.dvc").read_text()
    assert (project.staging / "data/model.dvc").read_text() == (cmp / "model.dvc").read_text()
    assert rollout.dvc_text == (cmp / "rollout.dvc").read_text()

    # The staged files were hard-linked into the cache, not copied.
    staged = project.staging / "data/rollout/0.pt"
    cached = project.root / ".dvc/cache/files/md5" / _md5_path(ROLLOUT["data/rollout/0.pt"])
    assert staged.stat().st_ino == cached.stat().st_ino
    # An output outside the run folder is copied: a later run rewriting it in place must not
    # alter this run's cached object.
    cached_model = project.root / ".dvc/cache/files/md5" / _md5_path(model.read_bytes())
    assert cached_model.read_bytes() == model.read_bytes()
    assert cached_model.stat().st_ino != model.stat().st_ino
    assert os.access(model, os.W_OK) and model.stat().st_mode & 0o200
    assert dvc_config.is_dir()  # DVC's site cache went where core.site_cache_dir says
    assert status_data(project.root, rollout.dvc_text or "") == "cached"


def _md5_path(data: bytes) -> str:
    import hashlib

    digest = hashlib.md5(data).hexdigest()
    return f"{digest[:2]}/{digest[2:]}"


def test_track_failures_land_in_the_records(project: Project, tmp_path: Path) -> None:
    project.stage({**EVENTS})
    outputs = [
        ("events", project.staging / "data/events"),
        ("gone", tmp_path / "does-not-exist"),
        ("../escape", project.staging / "data/events"),
        ("events", project.staging / "data/events"),
    ]
    records = track_outputs(project.root, project.staging, outputs)
    assert [r.tracked for r in records] == [True, False, False, False]
    assert "does not exist" in (records[1].error or "")
    assert "not a plain name" in (records[2].error or "")
    assert "given twice" in (records[3].error or "")
    assert (project.staging / "data/.gitignore").read_text() == "/events\n"

    # An output whose data/<role> slot holds something else is refused, not overwritten.
    other = tmp_path / "other"
    other.mkdir()
    (other / "x").write_text("x")
    (clash,) = track_outputs(project.root, project.staging, [("events", other)])
    assert not clash.tracked and "exists and is not the output" in (clash.error or "")

    # Not a DVC repository: every output fails, nothing raises.
    plain = tmp_path / "plain"
    plain.mkdir()
    git(plain, "init", "-q")
    (failed,) = track_outputs(plain, project.staging, [("events", project.staging / "data/events")])
    assert not failed.tracked and "not a DVC repository" in (failed.error or "")


# ---------------------------------------------------------------------------------------------
# push, then restore with DVC's own CLI in a clone


def test_push_then_dvc_pull_in_a_clone_restores_identical_files(project: Project, tmp_path: Path) -> None:
    track_rollout_and_events(project)
    rev = commit_run(project)
    tracked_in_git = git(project.root, "ls-tree", "-r", "--name-only", rev, RUN_PATH).split()
    assert sorted(tracked_in_git) == sorted(
        f"{RUN_PATH}/{p}"
        for p in [
            "manifest.yaml",
            "trainer.log",
            "data/.gitignore",
            "data/rollout.dvc",
            "data/events.dvc",
        ]
    )

    seen: list[tuple[int, int]] = []
    result = push_data(
        project.root,
        dvc_texts_from_git(project.root, rev),
        progress=lambda d, t: seen.append((d, t)),
    )
    assert result.failed == []
    assert result.pushed == 7  # 5 files + 2 folder listings
    assert seen[-1] == (7, 7)
    again = push_data(project.root, dvc_texts_from_git(project.root, rev))
    assert (again.pushed, again.failed) == (0, [])

    clone = clone_experiments(project, tmp_path / "clone")
    assert status_data(clone, dvc_texts_from_git(clone, "HEAD")[0]) == "missing"
    dvc(clone, "pull", "-q", "-R", RUN_PATH)
    for rel, data in {**ROLLOUT, **EVENTS}.items():
        assert (clone / RUN_PATH / rel).read_bytes() == data, rel
    assert {status_data(clone, t) for t in dvc_texts_from_git(clone, "HEAD")} == {"cached"}
    # DVC's own `dvc status` reads the .dvc files ledger wrote: workspace and remote both in step
    assert "up to date" in dvc(clone, "status", "-R", RUN_PATH)
    assert "in sync" in dvc(clone, "status", "--cloud", "-R", RUN_PATH)


def test_fetch_checkout_and_verify_detects_tampered_and_missing_files(project: Project, tmp_path: Path) -> None:
    records = track_rollout_and_events(project)
    assert push_data(project.root, records).ok
    clone = _plain_clone(project, tmp_path)  # a fresh clone: empty DVC cache
    rollout_text = records[0].dvc_text or ""

    with pytest.raises(DataError, match="not all in the local DVC cache"):
        checkout_data(clone, rollout_text, tmp_path / "out" / "rollout")
    fetched = fetch_data(clone, [rollout_text])
    assert (fetched.fetched, fetched.failed) == (5, [])  # 4 files + the listing
    assert status_data(clone, rollout_text) == "cached"

    dest = tmp_path / "out" / "rollout"
    checkout_data(clone, rollout_text, dest)
    for rel, data in ROLLOUT.items():
        assert (dest / rel.removeprefix("data/rollout/")).read_bytes() == data
    assert verify_data(dest, rollout_text, clone) == []
    assert verify_data(dest, rollout_text) == []

    (dest / "1.pt").chmod(0o644)
    (dest / "1.pt").write_bytes(b"tampered")
    (dest / "sub/extra.bin").unlink()
    (dest / "stray.txt").write_text("?")
    problems = verify_data(dest, rollout_text, clone)
    assert problems[0] == "missing: rollout/sub/extra.bin"
    assert problems[1].startswith("hash mismatch: rollout/1.pt (recorded md5 ")
    assert problems[2] == "unexpected file: rollout/stray.txt"
    assert len(problems) == 3
    (whole,) = verify_data(dest, rollout_text)  # no cache: the folder as a whole
    assert whole.startswith("hash mismatch: rollout ")
    assert verify_data(tmp_path / "nowhere", rollout_text) == ["missing: rollout"]


def _plain_clone(project: Project, tmp_path: Path) -> Path:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(project.root), str(clone))
    return clone


def test_status_partial_and_push_of_incomplete_cache(project: Project) -> None:
    records = track_rollout_and_events(project)
    text = records[0].dvc_text or ""
    cache_file = project.root / ".dvc/cache/files/md5" / _md5_path(ROLLOUT["data/rollout/1.pt"])
    cache_file.unlink()
    assert status_data(project.root, text) == "partial"

    result = push_data(project.root, records)
    assert [f.what for f in result.failed] == ["rollout/1.pt"]
    assert result.failed[0].reason == "not in the local DVC cache"
    # The other files went up, but not the folder listing (as `dvc push` does).
    assert result.pushed == 3 + 2  # rollout's 3 present files, events' file and listing
    assert status_data(project.root, records[1].dvc_text or "") == "cached"

    listing = project.root / ".dvc/cache/files/md5" / (records[0].hash or "")[:2] / (records[0].hash or "")[2:]
    listing.unlink()
    assert status_data(project.root, text) == "missing"


def test_push_and_fetch_failures_are_returned_not_raised(project: Project, tmp_path: Path) -> None:
    records = track_rollout_and_events(project)

    unknown = push_data(project.root, records, remote="nope")
    assert unknown.pushed == 0 and [f.what for f in unknown.failed] == ["remote"]

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    from dvc.repo import Repo

    with Repo(str(project.root)) as repo, repo.config.edit("repo") as conf:
        conf["remote"]["broken"] = {"url": str(blocker / "remote")}
    broken = push_data(project.root, records, remote="broken")
    assert not broken.ok and broken.pushed == 0
    assert any("a-file" in f.reason or "directory" in f.reason.lower() for f in broken.failed), broken

    bad = push_data(project.root, ["not: [a dvc file"])
    assert [f.what for f in bad.failed] == [".dvc file"]

    # Nothing was pushed to the default remote: fetching into a clone finds nothing there.
    clone = _plain_clone(project, tmp_path)
    missing = fetch_data(clone, [r.dvc_text or "" for r in records])
    assert missing.fetched == 0
    assert sorted(f.what for f in missing.failed) == [
        "events (folder listing)",
        "rollout (folder listing)",
    ]
    assert {f.reason for f in missing.failed} == {"not on the remote"}


def test_verify_single_file_output(project: Project, tmp_path: Path) -> None:
    model = tmp_path / "model.pt"
    model.write_bytes(os.urandom(1000))
    (record,) = track_outputs(project.root, project.staging, [("model", model)])
    text = record.dvc_text or ""
    assert verify_data(model, text) == verify_data(model, text, project.root) == []
    model.write_bytes(b"other")
    (problem,) = verify_data(model, text)
    assert problem.startswith("hash mismatch: model (recorded md5 ")
    assert verify_data(tmp_path / "absent.pt", text) == ["missing: model"]


def test_parse_dvc_text_rejects_what_it_cannot_use() -> None:
    (out,) = parse_dvc_text(f"outs:\n- md5: {'ab' * 16}.dir\n  size: 3\n  nfiles: 1\n  hash: md5\n  path: rollout\n")
    assert (out.path, out.isdir, out.nfiles) == ("rollout", True, 1)
    with pytest.raises(DataError, match="legacy hash"):
        parse_dvc_text("outs:\n- md5: abc\n  path: x\n")
    with pytest.raises(DataError, match="no `outs` list"):
        parse_dvc_text("deps: []\n")
    # the md5 names a cache path: a pulled record's `../..` would leave the cache
    with pytest.raises(DataError, match="md5 that is not one"):
        parse_dvc_text("outs:\n- md5: ../../../../etc/x.dir\n  hash: md5\n  path: rollout\n")


# ---------------------------------------------------------------------------------------------
# S3 (moto on loopback)


@pytest.mark.slow
@pytest.mark.s3
def test_s3_remote_push_fetch_and_dvc_pull(project: Project, tmp_path: Path, s3_server: S3Server) -> None:
    prefix = f"store-{tmp_path.name}"
    s3_server.add_dvc_remote(project.root, "s3", prefix)
    git(project.root, "commit", "-q", "-am", "s3 remote")
    records = track_rollout_and_events(project)
    rev = commit_run(project)

    result = push_data(project.root, dvc_texts_from_git(project.root, rev))
    assert (result.pushed, result.failed) == (7, [])
    assert len(s3_server.keys(prefix)) == 7

    clone = clone_experiments(project, tmp_path / "clone")
    fetched = fetch_data(clone, [records[0].dvc_text or ""], remote="s3")
    assert (fetched.fetched, fetched.failed) == (5, [])
    dest = tmp_path / "out" / "rollout"
    checkout_data(clone, records[0].dvc_text or "", dest)
    assert verify_data(dest, records[0].dvc_text or "", clone) == []

    dvc(clone, "pull", "-q", "-R", RUN_PATH)
    for rel, data in {**ROLLOUT, **EVENTS}.items():
        assert (clone / RUN_PATH / rel).read_bytes() == data, rel
