"""What a replay takes from a record made elsewhere: runs pulled from a remote are data, never code.

A run recorded in another clone is someone else's input. Its command is shown and needs a yes
(`--yes` without a terminal); the environment variables it recorded are shown too, and those that
make a program load code (`LD_PRELOAD`, `PYTHONSTARTUP`, `BASH_ENV`, ...) are never taken from
the record unless the user passes `--trust-env`. `PYTHONPATH` (Miles' runtime env sets it to
Megatron's checkout) is taken only when every entry is an absolute path outside the pulled data.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ledger.runref import own_runs
from ledger.storage.git import Repo
from ledger.storage.store import RunEntry, commit_of_run

# Variables through which a program (the dynamic loader, Python, a shell, node, perl, ruby, git,
# CUDA, NCCL plugins...) loads code or a library from a path the variable names.
CODE_LOADING = re.compile(
    r"^(LD_\w*|DYLD_\w*|PYTHON\w*|BASH_ENV|ENV|BASH_FUNC_.*|SHELLOPTS|BASHOPTS|PS4|PROMPT_COMMAND|IFS|PATH"
    r"|NODE_\w+|PERL\w*|RUBY\w+|GEM_\w+|JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|JDK_JAVA_OPTIONS|CLASSPATH"
    r"|GIT_\w+|GCONV_PATH|LOCPATH|NLSPATH|HOSTALIASES|RES_OPTIONS|OPENSSL_\w+|SSLKEYLOGFILE"
    r"|CUDA_INJECTION\w*|\w+_PLUGIN|\w+_PLUGIN_PATH|TORCH_EXTENSIONS_DIR|TRITON_\w*_PATH|LUA_\w+|TCLLIBPATH"
    r"|R_PROFILE\w*|R_LIBS\w*|MANPAGER|PAGER|EDITOR|VISUAL|LESSOPEN|LESSCLOSE|XDG_CONFIG_\w+|HOME)$"
)
# Python variables a trainer needs that load no code (PYTHONPATH is checked on its own).
PYTHON_DATA = {"PYTHONUNBUFFERED", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONFAULTHANDLER", "PYTHONIOENCODING", "PYTHONUTF8"}


@dataclass
class EnvChoice:
    """The recorded variables a replay sets, and those it leaves out (with why)."""

    taken: dict[str, str] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)  # name -> reason


def pulled_places(repo: Repo) -> list[Path]:
    """Where data that came from a remote can sit in this checkout."""
    return [repo.root / ".ledger", repo.root / ".dvc", repo.root / "runs", repo.common_dir, repo.git_dir]


def _inside_any(path: Path, roots: list[Path]) -> bool:
    real = Path(os.path.realpath(path))
    for root in roots:
        for r in {root, Path(os.path.realpath(root))}:
            if real == r or r in real.parents:
                return True
    return False


def choose_env(repo: Repo, recorded: dict[str, str], trust: bool) -> EnvChoice:
    """Split the recorded environment into what the replay sets and what it leaves out."""
    out = EnvChoice()
    places = pulled_places(repo)
    for name, value in recorded.items():
        if name == "PYTHONPATH":
            entries = [e for e in value.split(os.pathsep) if e]
            bad = [e for e in entries if not os.path.isabs(e) or _inside_any(Path(e), places)]
            if bad:
                # never, even with --trust-env: pulled data is not put on an import path
                out.dropped[name] = f"{bad[0]} is relative or inside this checkout's pulled data"
                continue
            out.taken[name] = value
        elif _into_pulled(value, places):  # never, even with --trust-env
            out.dropped[name] = "it names a path inside this checkout's pulled data"
        elif name in PYTHON_DATA or not CODE_LOADING.match(name) or trust:
            out.taken[name] = value
        else:
            out.dropped[name] = "it can make a program load code (--trust-env takes it)"
    return out


def _into_pulled(value: str, places: list[Path]) -> bool:
    """Whether a value names (among its words, `:`-separated parts, `=` values) a path inside pulled data."""
    for word in re.split(r"[\s:;,=]+", value):
        if word.startswith("/") and _inside_any(Path(word), places):
            return True
    return False


def argv_problem(repo: Repo, argv: list[str], cwd: Path) -> str | None:
    """The first argument of the program part (the interpreter, its options, the script: all before
    the first `--flag`) that names a file inside pulled data, if any."""
    places = pulled_places(repo)
    for arg in argv:
        if arg.startswith("--"):
            break
        candidate = arg.split("=", 1)[-1] if arg.startswith("-") else arg
        if not candidate or "\0" in candidate:
            continue
        path = Path(candidate) if os.path.isabs(candidate) else cwd / candidate
        if ("/" in candidate or os.path.exists(path)) and _inside_any(path, places):
            return arg
    return None


def own_run(repo: Repo, run_id: str) -> bool:
    """Whether this clone recorded the run (see `runref.own_runs`)."""
    return run_id in own_runs(repo, branch_of(repo))


def branch_of(repo: Repo) -> str:
    """The ledger branch of this repository (`branch:` of .ledger.yaml)."""
    from ledger.configload import load_config

    return load_config(repo.root, repo.common_dir).branch


def identity(repo: Repo, tip: str, entry: RunEntry) -> str:
    """Who made the run commit, as git says (author, and committer when another)."""
    commit = commit_of_run(repo, tip, entry.id)
    if commit is None:
        return "unknown (no run commit on the branch)"
    author, committer = repo.commit_identity(commit)
    return author if author == committer else f"{author}, committed by {committer}"
