"""Helpers shared by the benchmarks: timing, scratch repositories, report lines."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Bytecode written, as an installed ledger has it: with PYTHONDONTWRITEBYTECODE set in the caller's
# environment, every process a bench starts would compile each ledger module edited since the last
# `make install` (its `compileall`), and a bench run straight from a checkout would time that.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def timeit(fn: Callable[[], object], repeat: int = 5) -> float:
    """Median wall time of `fn` over `repeat` calls."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def timed(argv: list[str], cwd: Path) -> float:
    """Wall time of one run of `argv` in `cwd` (output discarded, a failure raised)."""
    t = time.perf_counter()
    sh(argv, cwd=cwd)
    return time.perf_counter() - t


# a real short job: N Miles-shaped step lines (`bench_shortjob.py`, `bench_caches.py`)
SHORT_JOB = """import sys
for i in range(int(sys.argv[1])):
    print(f"[2026-12-03 10:00:00] train.py:88 - step {i}: {{'train/loss': {1 / (i + 1):.4f}, 'train/grad_norm': 1.1}}")
"""


def short_job_repo(name: str) -> Path:
    """A scratch repository with `job.py` (SHORT_JOB) committed and `ledger init` done."""
    repo = scratch_repo(name)
    (repo / "job.py").write_text(SHORT_JOB)
    sh(ledger_argv("init"), cwd=repo)
    sh(["git", "add", "-A"], cwd=repo)
    sh(["git", "commit", "-q", "-m", "job"], cwd=repo)
    return repo


def sh(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None, stdout: int | None = subprocess.DEVNULL) -> None:
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=stdout, stderr=subprocess.DEVNULL)


def scratch_repo(name: str) -> Path:
    """A fresh git repository with one commit, in a temp folder, isolated from user git config."""
    base = Path(tempfile.mkdtemp(prefix=f"ledger-bench-{name}-"))
    home = base / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Bench\n\temail = bench@example.com\n")
    os.environ["HOME"] = str(home)
    os.environ["GIT_CONFIG_GLOBAL"] = str(home / ".gitconfig")
    repo = base / "repo"
    repo.mkdir()
    sh(["git", "init", "-q", "-b", "main"], cwd=repo)
    (repo / "README.md").write_text("bench\n")
    sh(["git", "add", "-A"], cwd=repo)
    sh(["git", "commit", "-q", "-m", "init"], cwd=repo)
    return repo


def ledger_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "ledger", *args]


# runs ledger's entry point, then writes the names of the modules it imported to argv[1]
_RECORD_IMPORTS = """import atexit, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write("\\n".join(sorted(sys.modules))))
sys.argv[0] = "ledger"
from ledger.main import entry
entry()
"""

# imports each module named in argv[1] that imports alone (a few, like `__main__`, do not)
_IMPORT_ALL = """import importlib, sys
for name in open(sys.argv[1]).read().split():
    try:
        importlib.import_module(name)
    except Exception:
        pass
"""


def imported_by(args: list[str], cwd: Path, out: Path) -> Path:
    """Run `ledger *args` in `cwd` once and write the names of every module it imported to `out`."""
    sh([sys.executable, "-c", _RECORD_IMPORTS, str(out), *args], cwd=cwd)
    return out


def importing(modules: Path) -> list[str]:
    """A fresh interpreter that only imports the modules named in `modules` (from `imported_by`):
    what a command pays before it does anything, the floor under its time."""
    return [sys.executable, "-c", _IMPORT_ALL, str(modules)]


def import_floor(modules: Path, cwd: Path) -> float:
    """Wall time of `importing(modules)` in `cwd`."""
    return timed(importing(modules), cwd)


def report(title: str, rows: list[tuple[str, str]]) -> None:
    print(f"\n## {title}")
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k.ljust(width)}  {v}")
    sys.stdout.flush()
