"""A repeated default `ledger list` is printed again from the listing kept whole
(`ledger.storage.listanswer`), before pygit2 or the listing code is imported; anything the
listing shows that changes (the branch, origin's branch, `.ledger.yaml`, a run in progress, the
kept file itself) makes it a miss, and the listing is made again from the branch."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ledger, module_home, toy_repo
from repos import git

import ledger as ledger_package
from ledger.cache import tree_version

EMIT = "print(\"[2026-12-06 10:00:00] train.py:9 - step 0: {'train/loss': 1.0}\")\n"
HEAVY = ("pygit2", "ledger.commands.listing", "ledger.storage.listing", "ledger.storage.listview")
PROBE = (
    "import sys\nfrom ledger.main import main\ncode = main(['list'])\nsys.stdout.flush()\n"
    f"heavy = sorted(m for m in {HEAVY!r} if m in sys.modules)\n"
    "print('IMPORTED', heavy, code)\n"
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository with two recorded runs, `a` then `b`."""
    with module_home(tmp_path_factory, "home-list-answer"):
        repo = toy_repo(tmp_path_factory.mktemp("listanswer") / "proj", {"README.md": "x\n", "emit.py": EMIT})
        for name in ("a", "b"):
            r = ledger(repo, "run", "--name", name, "--no-heat-guard", "--no-debug-data", "--", sys.executable, "emit.py")
            assert r.returncode == 0, r.stderr
        return repo


def _listed(cwd: Path) -> tuple[str, str, bool]:
    """`ledger list` in a process of its own: stdout, stderr, and whether the listing code was imported."""
    r = subprocess.run([sys.executable, "-c", PROBE], cwd=cwd, text=True, capture_output=True, timeout=120)
    text, _, tail = r.stdout.rpartition("IMPORTED ")
    assert r.returncode == 0 and tail.strip().endswith(" 0"), r.stderr
    return text, r.stderr, not tail.startswith("[]")


def test_a_repeated_list_is_printed_before_the_listing_code_is_imported(runs: Path) -> None:
    first = ledger(runs, "list")
    assert first.returncode == 0 and " a " in first.stdout and " b " in first.stdout, first.stderr
    below = runs / "sub" / "deeper"  # git names the common folder relative to where it is asked
    below.mkdir(parents=True, exist_ok=True)
    for cwd in (runs, below):
        text, err, imported = _listed(cwd)
        assert not imported, cwd
        assert (text, err) == (first.stdout, first.stderr)  # byte for byte


def test_a_new_tip_or_a_run_in_progress_is_a_miss(runs: Path) -> None:
    ledger(runs, "list")
    tagged = ledger(runs, "tag", "a", "kept-or-not")
    assert tagged.returncode == 0, tagged.stderr
    text, _, imported = _listed(runs)
    assert imported and "kept-or-not" in text  # the tag's commit is a new tip
    assert not _listed(runs)[2]  # and that listing is kept in turn
    staged = runs / ".ledger" / "staging" / "20261206-100000-abcd"
    staged.mkdir(parents=True)
    try:
        assert _listed(runs)[2]  # a run in progress is shown from the staging folder: never kept
    finally:
        staged.rmdir()
    assert not _listed(runs)[2]


def test_another_config_is_a_miss(runs: Path) -> None:
    ledger(runs, "list")
    config = runs / ".ledger.yaml"
    saved = config.read_bytes()
    assert b"\nbranch: experiments " in saved  # as `ledger init` wrote it
    config.write_bytes(saved.replace(b"\nbranch: experiments ", b"\nbranch: elsewhere "))
    try:
        text, _, imported = _listed(runs)
        assert imported and " a " not in text  # another branch, which holds no run
    finally:
        config.write_bytes(saved)
    text, _, imported = _listed(runs)
    assert not imported and " a " in text  # the same bytes again: the listing kept for them


def test_origin_s_branch_is_read_as_it_is_now(runs: Path) -> None:
    """The note that origin holds runs this clone lacks is kept with the listing, and a moved,
    new or removed `origin/<branch>` is a miss."""
    r = ledger(runs, "run", "--name", "c", "--no-heat-guard", "--no-debug-data", "--", sys.executable, "emit.py")
    assert r.returncode == 0, r.stderr
    tip = git(runs, "rev-parse", "experiments").strip()  # the commit of run `c`
    git(runs, "update-ref", "refs/heads/experiments", f"{tip}^1")  # as if `c` were only on origin
    try:
        ledger(runs, "list")
        git(runs, "update-ref", "refs/remotes/origin/experiments", tip)
        text, err, imported = _listed(runs)
        assert imported and "origin/experiments has 1 run not here" in err
        text2, err2, imported2 = _listed(runs)
        assert not imported2 and (text2, err2) == (text, err)  # the warning is printed again with it
        git(runs, "update-ref", "-d", "refs/remotes/origin/experiments")
        _, err3, imported3 = _listed(runs)
        assert imported3 and "not here" not in err3
    finally:
        git(runs, "update-ref", "refs/heads/experiments", tip)


def test_a_damaged_kept_listing_is_a_miss(runs: Path) -> None:
    first = ledger(runs, "list")
    kept = list((runs / ".git" / "ledger" / "answers").glob("list-*"))
    assert kept
    for path in kept:
        path.write_bytes(b"\x80\x04not a pickle")
    text, err, imported = _listed(runs)
    assert imported and (text, err) == (first.stdout, first.stderr)
    assert not _listed(runs)[2]  # written again


def test_a_change_to_ledger_s_code_is_a_miss(runs: Path, tmp_path: Path) -> None:
    """The kept listing is named by the version of the whole package: a new ledger lists again."""
    first = ledger(runs, "list")
    answers = runs / ".git" / "ledger" / "answers"
    before = {p.name for p in answers.glob("list-*")}
    package = tmp_path / "pkg"
    shutil.copytree(Path(ledger_package.__file__).parent, package / "ledger", ignore=shutil.ignore_patterns("__pycache__"))
    with open(package / "ledger" / "commands" / "listing.py", "a", encoding="utf-8") as f:
        f.write("\n# changed by the test\n")
    env = {**os.environ, "PYTHONPATH": str(package)}
    r = subprocess.run([sys.executable, "-c", PROBE], cwd=runs, env=env, text=True, capture_output=True, timeout=120)
    text, _, tail = r.stdout.rpartition("IMPORTED ")
    assert r.returncode == 0 and not tail.startswith("[]") and text == first.stdout, r.stderr
    after = {p.name for p in answers.glob("list-*")}
    version = tree_version(package / "ledger")
    assert after - before and all(version in name for name in after)  # kept for the new code; the old code's removed
