"""The caches `ledger diff` reads: an answer kept whole, the report, the replica search and the
parsed metrics tables. Each is a miss when the code that computes what it holds changes (a copy
of the package with one module changed, run as a real process), and the kept answer is a miss
when `.ledger.yaml` or the ledger branch changes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ledger, module_home, toy_repo

import ledger as ledger_package
from ledger.cache import tree_version

EMIT = """
import argparse, datetime
ap = argparse.ArgumentParser()
ap.add_argument("--scale", type=float, default=1.0)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--steps", type=int, default=8)
a = ap.parse_args()
t0 = datetime.datetime(2026, 11, 29, 10, 0, 0)
for step in range(a.steps):
    ts = (t0 + datetime.timedelta(seconds=10 * step)).strftime("%Y-%m-%d %H:%M:%S.000")
    rt = a.scale * (10.0 - step) + 0.01 * a.seed * (step % 3)
    print(f"[{ts} main] train.py:2 - perf {step}: {{'perf/rollout_time': {rt}, 'perf/step_time': {rt + 1.0}}}")
"""


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository with two recorded runs that differ in one setting (`scale`), and `quiet`,
    which differs from `a` in `steps` and logged no step (so it has no metrics.jsonl)."""
    with module_home(tmp_path_factory, "home-diff-caches"):
        repo = toy_repo(tmp_path_factory.mktemp("caches") / "proj", {"README.md": "x\n", "emit.py": EMIT}, init=False)
        for name, args in (("a", ["--scale", "1.0"]), ("b", ["--scale", "1.5"]), ("quiet", ["--scale", "1.0", "--steps", "0"])):
            r = ledger(repo, "run", "--name", name, "--no-debug-data", "--", sys.executable, "emit.py", *args)
            assert r.returncode == 0, r.stderr
        return repo


def _entries(repo: Path, kind: str) -> set[str]:
    folder = repo / ".git" / "ledger" / kind
    return {p.name for p in folder.iterdir() if not p.name.startswith(".")} if folder.is_dir() else set()


def _changed_copy(tmp_path: Path, module: str) -> Path:
    """A copy of the installed package with one line added to `module` (a path inside it)."""
    root = tmp_path / "pkg"
    shutil.copytree(Path(ledger_package.__file__).parent, root / "ledger", ignore=shutil.ignore_patterns("__pycache__"))
    with open(root / "ledger" / module, "a", encoding="utf-8") as f:
        f.write("\n# changed by the test\n")
    return root


def _diff_with(package: Path, repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(package)}
    return subprocess.run([sys.executable, "-m", "ledger", "diff", *args], cwd=repo, env=env, text=True, capture_output=True, timeout=120)


@pytest.mark.parametrize(
    ("kind", "module", "b"),
    [
        ("answers", "compare/render.py", "b"),  # the text kept whole
        ("diffs", "compare/noise.py", "b"),  # the verdicts a report holds
        ("replicas", "compare/replicas.py", "b"),  # which runs are replicas
        ("metrics", "metrics/logparse.py", "quiet"),  # the table parsed from the logs of a run without metrics.jsonl
    ],
)
def test_a_change_to_a_module_it_depends_on_is_a_miss(two_runs: Path, tmp_path: Path, kind: str, module: str, b: str) -> None:
    r = ledger(two_runs, "diff", "a", b, "--json")
    assert r.returncode == 0, r.stderr
    before = _entries(two_runs, kind)
    assert before, f"the diff kept nothing in {kind}"
    package = _changed_copy(tmp_path, module)
    changed = _diff_with(package, two_runs, "a", b, "--json")
    assert changed.returncode == 0, changed.stderr
    assert json.loads(changed.stdout) == json.loads(r.stdout)
    made = _entries(two_runs, kind) - before
    version = tree_version(package / "ledger")
    assert made and all(version in name for name in made), (made, version)  # computed again and kept under the new code


def test_a_repeated_diff_is_answered_before_the_comparison_code_is_imported(two_runs: Path) -> None:
    first = ledger(two_runs, "diff", "a", "b")
    assert first.returncode == 0, first.stderr
    probe = (
        "import sys\nfrom ledger.main import main\ncode = main(['diff', 'a', 'b'])\n"
        "heavy = sorted(m for m in ('pygit2', 'ledger.compare.diffcore', 'ledger.compare.noise', 'ledger.metrics.logparse') if m in sys.modules)\n"
        "print('IMPORTED', heavy, code)\n"
    )
    below = two_runs / "sub" / "deeper"  # git names the common folder relative to where it is asked
    below.mkdir(parents=True, exist_ok=True)
    for cwd in (two_runs, below):
        again = subprocess.run([sys.executable, "-c", probe], cwd=cwd, text=True, capture_output=True, timeout=120)
        assert again.returncode == 0, again.stderr
        text, _, tail = again.stdout.rpartition("IMPORTED ")
        assert tail.strip() == "[] 0", cwd
        assert text == first.stdout  # the git diff included, byte for byte


def test_a_kept_answer_is_a_miss_once_the_config_or_the_branch_changes(two_runs: Path) -> None:
    r = ledger(two_runs, "diff", "a", "b", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["changed"][0]["name"] == "scale"
    config = two_runs / ".ledger.yaml"
    saved = config.read_bytes() if config.exists() else None
    config.write_text("ignore: [scale]\n")
    try:
        ignored = ledger(two_runs, "diff", "a", "b", "--json")
        assert json.loads(ignored.stdout)["changed"] == []  # the new config is read, not the kept answer
    finally:
        if saved is None:
            config.unlink()
        else:
            config.write_bytes(saved)
    assert json.loads(ledger(two_runs, "diff", "a", "b", "--json").stdout) == json.loads(r.stdout)
    assert json.loads(r.stdout)["noise"]["replicas_a"] == [json.loads(r.stdout)["a"]]
    replica = ledger(two_runs, "run", "--name", "a2", "--no-debug-data", "--", sys.executable, "emit.py", "--scale", "1.0", "--seed", "2")
    assert replica.returncode == 0, replica.stderr
    after = json.loads(ledger(two_runs, "diff", "a", "b", "--json").stdout)  # a new tip: A has a replica now
    assert len(after["noise"]["replicas_a"]) == 2
