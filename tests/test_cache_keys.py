"""The caches of `ledger run` and `ledger list` are misses once the code that computes what they
hold changes: a copy of the package with one module changed, run as a real process, computes the
entry again and keeps it under the new code's version, beside the old one. A change to code they
never run keeps every entry. (The caches of `ledger diff` have the same test in
test_diff_caches.py; the compiled scanner database is keyed by its patterns and Hyperscan's
version, test_scanner_cache.py.)"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ledger, module_home, toy_repo

import ledger as ledger_package
from ledger.cache import tree_version
from ledger.storage.manifestcache import LISTING_CODE

EMIT = "for i in range(3):\n    print(f\"[2026-12-04 10:00:0{i}] train.py:9 - step {i}: {{'train/loss': {1 / (i + 1)}}}\")\n"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A repository with one recorded run, listed once; and the home whose caches it filled."""
    with module_home(tmp_path_factory, "home-cache-keys") as home:
        repo = toy_repo(tmp_path_factory.mktemp("keys") / "proj", {"README.md": "x\n", "emit.py": EMIT})
        r = ledger(repo, "run", "--name", "one", "--no-heat-guard", "--no-debug-data", "--", sys.executable, "emit.py")
        assert r.returncode == 0, r.stderr
        assert ledger(repo, "list").returncode == 0
        return repo, home


def _files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


def _tables(repo: Path) -> set[str]:
    db = sqlite3.connect(repo / ".git" / "ledger" / "manifests.sqlite")
    try:
        return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        db.close()


# kind -> (a module whose code computes what the cache holds, found through the module that
# keys the cache, the verb that fills it, what it holds, whether the old code's entries stay: the
# manifests database keeps one code's tables)
CASES: dict[str, tuple[str, tuple[str, ...], str, Callable[[Path, Path], set[str]], bool]] = {
    "config": ("config.py", ("ledger.configload",), "list", lambda repo, home: _files(repo / ".git" / "ledger" / "config"), True),
    "host": (
        "capture/hostfacts.py",
        ("ledger.capture.hostfacts",),
        "run",
        lambda repo, home: _files(repo / ".git" / "ledger" / "host"),
        True,
    ),
    "catalogue": (
        "redact/gitleaks.py",
        ("ledger.redact.catalogue",),
        "run",
        lambda repo, home: _files(home / ".cache" / "ledger" / "catalogue"),
        True,
    ),
    # textfmt: imported by listrow through termstyle, it writes the table's cells the index keeps
    "manifests and listing index": ("textfmt.py", LISTING_CODE, "list", lambda repo, home: _tables(repo), False),
    # the default table kept per `runs/` tree: laid out by code the listing never imports
    "listing index, its kept table": ("storage/listtable.py", LISTING_CODE, "list", lambda repo, home: _tables(repo), False),
}
# a module none of those caches' code runs (the heat guard's): changing it is no miss
ELSEWHERE = "heat/guard.py"


@pytest.mark.parametrize("kind", list(CASES))
def test_a_change_to_a_module_it_depends_on_is_a_miss(recorded: tuple[Path, Path], tmp_path: Path, kind: str) -> None:
    repo, home = recorded
    module, keyed_by, verb, entries, keeps_old = CASES[kind]
    before = entries(repo, home)
    assert before, f"nothing was kept in the {kind} cache"
    package = _changed_copy(tmp_path, module)
    _run(repo, home, package, verb)
    made = entries(repo, home) - before
    version = tree_version(package / "ledger", modules=keyed_by)
    assert version != tree_version(Path(ledger_package.__file__).parent, modules=keyed_by)
    assert made and all(version in name for name in made), (kind, made, version)
    after = entries(repo, home)
    assert before <= after if keeps_old else not before & after  # left for the old code, or dropped


def test_a_change_to_code_the_caches_never_run_keeps_every_entry(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    """A new ledger that only changed the heat guard reads the entries the old one kept: a team's
    year of runs is listed from the index it had, not read again from git."""
    repo, home = recorded
    package = _changed_copy(tmp_path, ELSEWHERE)
    installed = Path(ledger_package.__file__).parent
    assert tree_version(package / "ledger") != tree_version(installed)  # another ledger all the same
    for kind, (_module, keyed_by, verb, entries, _keeps) in CASES.items():
        version = tree_version(installed, modules=keyed_by)
        assert tree_version(package / "ledger", modules=keyed_by) == version
        listed = ledger(repo, "list").stdout  # by this ledger: its index now holds every run
        before = entries(repo, home)
        r = _run(repo, home, package, verb)
        made = entries(repo, home) - before
        # nothing under another version (a host entry may be new: its key is the interpreter's state)
        assert all(version in name for name in made), (kind, made, version)
        if verb == "list":
            assert not made and r.stdout == listed, kind  # the index's tables read as they were


def _changed_copy(tmp_path: Path, module: str) -> Path:
    """A copy of the package with `module` changed (a comment added)."""
    package = tmp_path / "pkg"
    shutil.copytree(Path(ledger_package.__file__).parent, package / "ledger", ignore=shutil.ignore_patterns("__pycache__"))
    with open(package / "ledger" / module, "a", encoding="utf-8") as f:
        f.write("\n# changed by the test\n")
    return package


def _run(repo: Path, home: Path, package: Path, verb: str) -> subprocess.CompletedProcess[str]:
    argv = ["list"] if verb == "list" else ["run", "--no-heat-guard", "--no-debug-data", "--", sys.executable, "emit.py"]
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(package)}
    r = subprocess.run([sys.executable, "-m", "ledger", *argv], cwd=repo, env=env, text=True, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r
