"""The one set of helpers that build temporary git repositories for tests.

Git here never reads the real user's or system configuration: the autouse `isolated_home`
fixture (conftest.py) points GIT_CONFIG_GLOBAL at a test file, and where a session-scoped fixture
runs before it, `/dev/null` is used instead. Author and committer are fixed, so commits work
without any configuration.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

_IDENTITY = {
    "GIT_AUTHOR_NAME": "Test User",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test User",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


def git_env() -> dict[str, str]:
    """os.environ with git isolated from the machine's configuration."""
    env = {**os.environ, **_IDENTITY, "GIT_CONFIG_NOSYSTEM": "1"}
    env.setdefault("GIT_CONFIG_GLOBAL", os.devnull)
    return env


def git(cwd: Path, *args: str) -> str:
    """Run git in `cwd`; its stdout. A failure fails the test with git's message."""
    proc = subprocess.run(["git", *args], cwd=cwd, env=git_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def make_repo(path: Path, files: dict[str, str] | None = None, commit: bool = True) -> Path:
    """A git repository (branch `main`) at `path` with `files` committed, in one call."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for rel, text in (files or {"README.md": "hello\n"}).items():
        f = path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    if commit:
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "initial")
    return path


def head(path: Path) -> str:
    """The commit id of HEAD."""
    return git(path, "rev-parse", "HEAD").strip()
