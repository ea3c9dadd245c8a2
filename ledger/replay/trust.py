"""What a replay takes from a record made elsewhere: runs pulled from a remote are data, never code.

A run recorded in another clone is someone else's input. Its command is shown and needs a yes
(`--yes` without a terminal); the environment variables it recorded are shown too, and those that
make a program load code (`LD_PRELOAD`, `PYTHONSTARTUP`, `BASH_ENV`, ...) are never taken from
the record unless the user passes `--trust-env`. `PYTHONPATH` (Miles' runtime env sets it to
Megatron's checkout) is taken only when every entry is an absolute path outside the pulled data.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import msgspec

from ledger import yamlio
from ledger.configload import load_config
from ledger.errors import DataError
from ledger.runref import own_runs
from ledger.storage.git import Repo
from ledger.storage.store import RunEntry, commit_of_run
from ledger.understand.settings import split_training_command

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


class EnvChoice(msgspec.Struct):
    """The recorded variables a replay sets, and those it leaves out (with why)."""

    taken: dict[str, str] = msgspec.field(default_factory=dict)
    dropped: dict[str, str] = msgspec.field(default_factory=dict)  # name -> reason


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
        why = _left_out(name, value, places, trust)
        if why is None:
            out.taken[name] = value
        else:
            out.dropped[name] = why
    return out


def _left_out(name: str, value: str, places: list[Path], trust: bool) -> str | None:
    """Why the replay leaves a recorded variable out (None: it sets it)."""
    if name == "PYTHONPATH":  # never, even with --trust-env: pulled data is not put on an import path
        return _import_path_problem(value, places)
    if _into_pulled(value, places):  # never, even with --trust-env
        return "it names a path inside this checkout's pulled data"
    if name in PYTHON_DATA or not CODE_LOADING.match(name) or trust:
        return None
    return "it can make a program load code (--trust-env takes it)"


def _import_path_problem(value: str, places: list[Path]) -> str | None:
    """Why a PYTHONPATH is left out: an entry that is relative or inside pulled data (None: none is)."""
    entries = [e for e in value.split(os.pathsep) if e]
    bad = [e for e in entries if not os.path.isabs(e) or _inside_any(Path(e), places)]
    return f"{bad[0]} is relative or inside this checkout's pulled data" if bad else None


def _into_pulled(value: str, places: list[Path]) -> bool:
    """Whether a value names (among its words, `:`-separated parts, `=` values) a path inside pulled data."""
    for word in re.split(r"[\s:;,=]+", value):
        if word.startswith("/") and _inside_any(Path(word), places):
            return True
    return False


class CodePaths(msgspec.Struct, frozen=True):
    """Where a replay runs and what it executes, resolved in this checkout and checked."""

    cwd: Path
    script: Path | None  # the training script, resolved (None for `-m`, `-c` or no python)
    module: str | None  # `-m MODULE`: imported from `cwd` first


def dvc_outputs(repo: Repo) -> list[Path]:
    """The folders and files the user's own `.dvc` files track in this checkout: data, not code."""
    listed = repo.git("ls-files", "-z", "--", "*.dvc", check=False).stdout.decode("utf-8", "surrogateescape")
    outs: list[Path] = []
    for rel in filter(None, listed.split("\0")):
        try:
            doc = yamlio.loads((repo.root / rel).read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        for out in (doc.get("outs") or []) if isinstance(doc, dict) else []:
            path = out.get("path") if isinstance(out, dict) else None
            if isinstance(path, str) and path:
                outs.append((repo.root / rel).parent / path)
    return outs


@functools.cache
def data_places(repo: Repo) -> tuple[Path, ...]:
    """Every place of this checkout that holds data, never code: pulled data and the user's own
    DVC outputs (read once per Repo: one `git ls-files` and the `.dvc` files, for all the checks)."""
    return (*pulled_places(repo), *dvc_outputs(repo))


def upload_excludes(repo: Repo, working_dir: Path) -> list[str]:
    """Ray `excludes` (gitignore syntax, from `working_dir`) for every pulled place and DVC output
    inside `working_dir`: a replay's working_dir upload carries this checkout's code, never its
    pulled data, git objects or DVC cache."""
    base = Path(os.path.realpath(working_dir))
    out: list[str] = []
    for place in data_places(repo):
        real = Path(os.path.realpath(place))
        if real != base and base in real.parents:
            out.append("/" + real.relative_to(base).as_posix())
    return sorted(set(out))


def check_runtime_paths(repo: Repo, runtime_env: dict[str, object], cwd: Path, run_id: str) -> None:
    """The recorded runtime env's code paths (`working_dir`, `py_modules`), as the replay submits
    them: each local one inside this checkout and outside all pulled data (a remote URI, such as
    `s3://...zip`, is Ray's to fetch). Raises DataError naming the path."""
    places = list(data_places(repo))
    root = Path(os.path.realpath(repo.root))
    modules = runtime_env.get("py_modules")
    paths = [runtime_env.get("working_dir"), *(modules if isinstance(modules, list) else [])]
    for value in paths:
        if not isinstance(value, str) or re.match(r"^[a-z][a-z0-9+.-]*://", value):
            continue
        path = Path(os.path.realpath(cwd / value))
        if _inside_any(path, places) or not (path == root or root in path.parents):
            raise DataError(
                f"run {run_id}'s Ray runtime env loads code from {value!r} ({path}), outside this checkout or inside pulled data",
                "ledger never runs code that came with a record; refusing to replay it",
            )


# what a refusal to run code that came with a record says
REFUSE = "ledger never runs code that came with a record; refusing to replay it"


def check_code_paths(repo: Repo, argv: list[str], cwd_rel: str, run_id: str, in_image: bool = False) -> CodePaths:
    """Every path the replay executes or imports from (the working directory, which is `sys.path[0]`
    for `-m` and `-c`; each file the program part names; the script, whose folder is `sys.path[0]`)
    resolved from the recorded working directory: inside this checkout, outside all pulled data.

    A script outside the checkout (an absolute path, as in an image's `/root/miles/train.py`) is
    taken only with `in_image`, where it names the image's file. Raises DataError naming the path.
    """
    root = Path(os.path.realpath(repo.root))
    places = list(data_places(repo))
    cwd = _checked_cwd(repo, root, cwd_rel, run_id, places)
    bad = _program_problem(argv, cwd, places)
    if bad is not None:
        raise DataError(f"run {run_id}'s command runs {bad!r}, a file inside pulled data", REFUSE)
    prefix, script, _ = split_training_command(argv)
    if script is None or prefix[-1:] == ["-m"]:
        found = _module_file(cwd, script) if script is not None else None
        if found is not None and _inside_any(found, places):
            raise DataError(f"run {run_id}'s command imports -m {script} from {found}, inside pulled data", REFUSE)
        return CodePaths(cwd, None, script)
    path = Path(os.path.realpath(cwd / script))
    if _inside_any(path, places):
        raise DataError(f"run {run_id}'s script {script} is {path}, inside pulled data", REFUSE)
    if root not in path.parents and not in_image:
        raise DataError(
            f"run {run_id}'s script {script} is {path}, outside this checkout",
            "replay from the checkout that holds it, or add --in-image to run the image's copy",
        )
    return CodePaths(cwd, path, None)


def _checked_cwd(repo: Repo, root: Path, cwd_rel: str, run_id: str, places: list[Path]) -> Path:
    """The recorded working directory in this checkout: inside it, outside all pulled data."""
    if os.path.isabs(cwd_rel) or ".." in Path(cwd_rel).parts:
        raise DataError(f"run {run_id} records a working directory outside the repository ({cwd_rel!r})", REFUSE)
    cwd = repo.root / cwd_rel
    real_cwd = Path(os.path.realpath(cwd))
    if not (real_cwd == root or root in real_cwd.parents) or _inside_any(cwd, places):
        raise DataError(f"run {run_id} records a working directory inside pulled data ({cwd_rel})", REFUSE)
    return cwd


def _module_file(cwd: Path, module: str) -> Path | None:
    """The file `python -m MODULE` would run from `cwd` (its first place on `sys.path`), if there."""
    parts = module.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    base = cwd.joinpath(*parts)
    for candidate in (base.with_name(base.name + ".py"), base / "__main__.py", base / "__init__.py", base):
        if candidate.exists():
            return candidate
    return None


def _program_problem(argv: list[str], cwd: Path, places: list[Path]) -> str | None:
    """The first argument of the program part (the interpreter, its options, the script: all before
    the first `--flag`) that names a file inside pulled data, resolved from `cwd`, if any."""
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
    return load_config(repo.root, repo.common_dir).branch


def identity(repo: Repo, tip: str, entry: RunEntry) -> str:
    """Who made the run commit, as git says (author, and committer when another)."""
    commit = commit_of_run(repo, tip, entry.id)
    if commit is None:
        return "unknown (no run commit on the branch)"
    author, committer = repo.commit_identity(commit)
    return author if author == committer else f"{author}, committed by {committer}"
