"""Shared fixtures: every test runs with its own HOME and git config, never the real ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from repos import git, head, make_repo

__all__ = ["LEDGER", "REPO_ROOT", "TOY", "git", "head", "ledger", "make_repo", "nvml_works"]

REPO_ROOT = Path(__file__).resolve().parent.parent
TOY = REPO_ROOT / "examples" / "toy_grpo"
# the installed console script: `python -m ledger` would import a `ledger/` folder in the cwd first
_SCRIPT = Path(sys.executable).parent / "ledger"
LEDGER = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "ledger"]


def nvml_works() -> bool:
    """Whether NVML answers on this machine (a GPU machine): tests of the no-GPU path skip there."""
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - any failure means no NVML here
        return False
    return True


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    gitconfig = home / ".gitconfig"
    gitconfig.write_text(
        "[user]\n\tname = Test User\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    monkeypatch.setenv("DVC_SITE_CACHE_DIR", str(home / "dvc-site"))
    monkeypatch.delenv("GIT_DIR", raising=False)
    monkeypatch.delenv("GIT_WORK_TREE", raising=False)
    # a venv's bin first, so `ledger` and `python3` in subprocesses are this project's
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return home


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "proj", {"README.md": "hello\n", "train.py": "print('hi')\n"})


def ledger(
    cwd: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the real `ledger` CLI in a subprocess."""
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
