"""Shared fixtures: every test runs with its own HOME and git config, never the real ones."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import io
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import termios
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

import pytest
from repos import git, head, make_repo

__all__ = ["LEDGER", "REPO_ROOT", "TOY", "git", "head", "ledger", "make_repo", "module_home", "nvml_works", "toy_repo", "toy_train"]

REPO_ROOT = Path(__file__).resolve().parent.parent
TOY = REPO_ROOT / "examples" / "toy_grpo"
# the installed console script: `python -m ledger` would import a `ledger/` folder in the cwd first
_SCRIPT = Path(sys.executable).parent / "ledger"
LEDGER = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "ledger"]


# `make test TEST_WORKERS=N` runs the suite on N pytest-xdist workers with `--dist loadfile`: a
# module's tests stay on one worker, in order (its module-scoped fixtures are made once). Workers
# take modules in this order: the longest first, so they end together. Per-module seconds in
# `make test` (the sum of `--durations=0` per module, December 4, a loaded 2-core machine):
# ray_cluster 497, share_replay 179, miles_launchers 142, hostile_remote 124, hostile_tree 95,
# daily 93, secret_leaks 71, listindex 46, streamed 45, faults_input 44, diff_cli 42, then 38 and less.
LONGEST_FIRST = (
    "test_ray_cluster",
    "test_share_replay",
    "test_miles_launchers",
    "test_hostile_remote",
    "test_hostile_tree",
    "test_daily",
    "test_secret_leaks",
    "test_listindex",
    "test_streamed",
    "test_faults_input",
    "test_diff_cli",
    "test_faults_share",
    "test_ui",
    "test_demo",
    "test_dvcops",
    "test_pages",
    "test_hostile_pull",
    "test_heat_run",
    "test_one_change",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    # stable: a module keeps its order
    items.sort(key=lambda item: rank.get(Path(item.nodeid.split("::")[0]).stem, len(rank)))


def nvml_works() -> bool:
    """Whether NVML answers on this machine (a GPU machine): tests of the no-GPU path skip there."""
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - any failure means no NVML here
        return False
    return True


def isolate_home(home: Path, mp: pytest.MonkeyPatch) -> Path:
    """Point HOME, git's and DVC's user config at `home` (made here) and the venv's bin first on PATH.

    The one isolated home: the autouse fixture below, and module-scoped fixtures (which run before it)
    through `module_home`."""
    gitconfig = home / ".gitconfig"
    gitconfig.write_text(
        "[user]\n\tname = Test User\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
    )
    mp.setenv("HOME", str(home))
    mp.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
    mp.setenv("DVC_NO_ANALYTICS", "1")
    mp.setenv("DVC_SITE_CACHE_DIR", str(home / "dvc-site"))
    mp.delenv("GIT_DIR", raising=False)
    mp.delenv("GIT_WORK_TREE", raising=False)
    # a venv's bin first, so `ledger` and `python3` in subprocesses are this project's
    mp.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return home


@functools.cache
def _derived_catalogue(made: Path) -> Path | None:
    """ledger's catalogue cache file, derived under `made` once per test process."""
    from ledger.redact import catalogue

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(made))
        cached = catalogue._cache_file()
        if not cached.exists():
            catalogue._cached_entries()
    return cached if cached.exists() else None


def _warm_catalogue(home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`home` with ledger's detect-secrets catalogue cache in it (ledger/redact/catalogue.py), as a
    user has it after their first run: derived once per test process, then copied. A fresh home
    would derive it again on its first `ledger run` (importing every plugin, ~0.1-0.5 s). The cold
    path has its own tests (test_catalogue_cache.py)."""
    made = tmp_path_factory.getbasetemp() / "catalogue-cache"
    cached = _derived_catalogue(made)
    if cached is not None:
        into = home / ".cache" / cached.relative_to(made)
        into.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cached, into)
    return home


@contextlib.contextmanager
def module_home(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """The isolated home for a module-scoped fixture's set-up (it runs before `isolated_home`)."""
    with pytest.MonkeyPatch.context() as mp:
        yield _warm_catalogue(isolate_home(tmp_path_factory.mktemp(name), mp), tmp_path_factory)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    return _warm_catalogue(isolate_home(tmp_path_factory.mktemp("home"), monkeypatch), tmp_path_factory)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "proj", {"README.md": "hello\n", "train.py": "print('hi')\n"})


def toy_train(**flags: object) -> list[str]:
    """The bundled toy trainer's command, a `--flag value` per keyword in the order given
    (`toy_train(seed=3, num_rollout=6)`: `python3 examples/toy_grpo/train.py --seed 3 --num-rollout 6`)."""
    argv = ["python3", "examples/toy_grpo/train.py"]
    for name, value in flags.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    return argv


def drawn_on_a_terminal(draw: Callable[[TextIO], None], columns: int = 0) -> str:
    """What `draw` writes to a pseudo-terminal given to it as a text stream (`columns`: a window
    of that width; 0: a pty never given a size, as `script` makes one)."""
    master, slave = pty.openpty()
    if columns:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    with os.fdopen(slave, "w") as terminal:
        draw(terminal)
    chunks = []
    while select.select([master], [], [], 0.5)[0]:
        try:
            chunks.append(os.read(master, 65536))
        except OSError:  # EIO: everything written was read and the terminal is closed
            break
    os.close(master)
    return b"".join(chunks).decode()


def toy_repo(path: Path, files: dict[str, str] | None = None, init: bool = True) -> Path:
    """A repository with `files` (a README by default) and the toy trainer committed, after
    `ledger init` unless `init=False` (its `.ledger.yaml` and `.dvc/` are committed with the toy)."""
    repo = make_repo(path, files or {"README.md": "x\n"})
    # not the bytecode a run of the checkout's own toy left beside it: a later run rewrites it, which
    # would make the committed code dirty
    shutil.copytree(TOY, repo / "examples" / "toy_grpo", ignore=shutil.ignore_patterns("__pycache__"))
    if init:
        r = ledger(repo, "init")
        assert r.returncode == 0, r.stderr
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "toy")
    return repo


# Verbs run in this process (ledger.main.main with the cwd, environment and standard streams a
# subprocess would have): they read or write the repository and return. Every other verb (`run`,
# `replay`, `recover`, `tail`, `push`, `pull`, `heat`, ...) execs a job, follows one, talks to a
# remote through git or DVC, installs signal handlers or depends on process state: a real subprocess.
# LEDGER_TEST_SUBPROCESS=1 runs them all as subprocesses.
IN_PROCESS = frozenset({"diff", "init", "list", "log", "path", "report", "show"})


def ledger(
    cwd: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the `ledger` CLI: in this process for the verbs of IN_PROCESS, else the real console script."""
    if args and args[0] in IN_PROCESS and not os.environ.get("LEDGER_TEST_SUBPROCESS"):
        return _in_process(cwd, list(args), env or {}, input)
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [*LEDGER, *args],
        cwd=cwd,
        env=full_env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=timeout,
        input=input,
    )


def _in_process(cwd: Path, args: list[str], env: dict[str, str], input: str | None) -> subprocess.CompletedProcess[str]:
    """`ledger ARGS` through ledger.main.main: cwd, environment and stdin/stdout/stderr swapped in, then restored."""
    from ledger.main import main

    def stream(data: bytes = b"") -> io.TextIOWrapper:
        return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape", write_through=True)

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    out, err = stream(), stream()
    try:
        os.environ.update(env)
        os.chdir(cwd)
        sys.stdin, sys.stdout, sys.stderr = stream((input or "").encode()), out, err
        try:
            code = main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception:  # LEDGER_DEBUG=1 re-raises: a subprocess would print the traceback and exit 1
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)

    def text(s: io.TextIOWrapper) -> str:
        return s.buffer.getvalue().decode("utf-8", "replace")  # type: ignore[attr-defined]

    return subprocess.CompletedProcess([*LEDGER, *args], code, text(out), text(err))
