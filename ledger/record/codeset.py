"""The `code` setting: the content of the files that count as code.

Two runs compare by what their code *is*, never by commit id: a commit that only touches a README,
`.dvc/config` or `.ledger.yaml` changes no experiment. The value of the `code` setting is the git
tree id of the run's code snapshot (HEAD plus uncommitted changes to tracked files) with every
file that does not count left out:

- documentation and ledger's/DVC's bookkeeping (`LEFT_OUT`): `*.md`, `*.rst`, `LICENSE*`,
  `.gitignore`, `.dvcignore` at any depth; `.ledger.yaml`, `docs/`, `.dvc/`, `.github/`, `runs/`
  at the top of the repository;
- the globs of `code: ignore:` in `.ledger.yaml` (a glob without `/` matches a file name at any
  depth, one ending in `/` a folder, any other the path from the repository root);
- when the training command was found: the launcher and its launcher inputs
  (`ledger.understand.launcher_inputs`), whose effect is in the recorded command.

The same rule decides, at comparison time, which changed files name a code change and which are
only "ignored files" (`changed_code_files`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

import msgspec

from ledger.runrecord import Code, Command, RunRecord, replace
from ledger.storage.git import CodeSnapshot, Repo

# never code, whatever `.ledger.yaml` says (docs/diff.md lists them)
LEFT_OUT: tuple[str, ...] = (
    "*.md",
    "*.rst",
    "LICENSE*",
    ".gitignore",
    ".dvcignore",
    "/.ledger.yaml",
    "/docs/",
    "/.dvc/",
    "/.github/",
    "/runs/",
)


def _matches(path: str, pattern: str) -> bool:
    """Whether repository path `path` matches one left-out pattern (rules in the module doc)."""
    anchored = pattern.startswith("/")
    pattern = pattern.lstrip("/")
    if pattern.endswith("/"):
        folder = pattern.rstrip("/")
        parts = path.split("/")[:-1]
        if anchored or "/" in folder:
            return path.startswith(folder + "/") or fnmatchcase("/".join(parts[: folder.count("/") + 1]), folder)
        return any(fnmatchcase(part, folder) for part in parts)
    if "/" in pattern or anchored:
        return fnmatchcase(path, pattern)
    return fnmatchcase(path.rsplit("/", 1)[-1], pattern)


def counts(path: str, ignore: Sequence[str] = ()) -> bool:
    """True when the file at repository path `path` counts as code (not left out, not ignored)."""
    return not any(_matches(path, p) for p in (*LEFT_OUT, *ignore))


class CodeContent(msgspec.Struct, frozen=True):
    """What `record_code` found: the counted tree with and without the launcher's files."""

    tree: str  # every counted file
    without_launcher: str | None  # the same, the launcher and its inputs left out (None: no launcher)
    launcher_inputs: list[str]
    ignore: list[str] = msgspec.field(default_factory=list)  # the `code: ignore:` globs applied
    launcher_path: str | None = None  # the launcher, from the repository root (None: none, or outside it)
    has_launcher: bool = False
    warning: str | None = None  # the launcher's inputs could not be read

    def code(self, code: Code) -> Code:
        """The `code` section with `content`, `ignore` (and `content_without_launcher`) set."""
        code = replace(code, content=self.tree, ignore=list(self.ignore))
        return replace(code, content_without_launcher=self.without_launcher) if self.without_launcher is not None else code

    def command(self, command: Command) -> Command:
        """The `command` section with `launcher_inputs` and `launcher_path` set (a launcher run)."""
        if not self.has_launcher:
            return command
        command = replace(command, launcher_inputs=list(self.launcher_inputs))
        return replace(command, launcher_path=self.launcher_path) if self.launcher_path is not None else command


def counted_tree(repo: Repo, tree: str, ignore: Sequence[str] = (), also_left_out: Iterable[str] = ()) -> str:
    """`tree` with every file that does not count removed (plus the paths `also_left_out`)."""
    extra = set(also_left_out)
    edits: dict[str, tuple[str, int] | None] = {
        path: None for path, _, _ in repo.walk_blobs(tree) if path in extra or not counts(path, ignore)
    }
    return repo.tree_with_edits(tree, edits) if edits else tree


def _relative(paths: Iterable[Path], root: Path) -> list[str]:
    out = []
    for path in paths:
        try:
            out.append(path.resolve().relative_to(root).as_posix())
        except ValueError:
            continue  # outside the repository: not part of the code snapshot
    return out


def training_entries(cwd: Path, root: Path, patterns: Sequence[str]) -> list[Path]:
    """The training scripts a launcher may run, found before it runs: `*.py` files in the cwd and
    the repository root whose name matches the training patterns (Miles: train.py, train_async.py)."""
    found: dict[Path, None] = {}
    for folder in (cwd, root):
        for path in sorted(folder.glob("*.py")):
            if any(re.search(p, path.name) for p in patterns):
                found[path.resolve()] = None
    return list(found)


def record_code(
    repo: Repo,
    code: CodeSnapshot,
    ignore: Sequence[str],
    launcher_path: Path | None,
    launcher_text: str | None,
    cwd: Path,
    patterns: Sequence[str],
    left_out: Sequence[str] = (),
) -> CodeContent:
    """What `code.content` (and `code.content_without_launcher`, `code.ignore`) and
    `command.launcher_inputs` / `command.launcher_path` record for a run about to start.

    `left_out`: a replay's, the files its source run's `code` left out as launcher files (the
    replay reruns the command they shaped, without them): left out of its own `code` as well, so
    a replay and its source at the same commit have the same `code`."""
    from ledger.understand.launcher_inputs import launcher_inputs

    full = counted_tree(repo, code.tree, ignore)
    if launcher_path is None:
        without = counted_tree(repo, code.tree, ignore, left_out) if left_out else None
        return CodeContent(full, without, [], list(ignore))
    warning, inputs = None, []
    try:
        entries = training_entries(cwd, repo.root, patterns)
        inputs = _relative(launcher_inputs(launcher_path, launcher_text or "", cwd, repo.root, entries), repo.root)
    except (OSError, ValueError, RecursionError) as exc:  # never a reason not to run the job
        warning = f"the launcher's inputs could not be read ({exc}): only the launcher leaves `code`"
    own = _relative([launcher_path], repo.root)
    without = counted_tree(repo, code.tree, ignore, [*own, *inputs])
    return CodeContent(full, without, inputs, list(ignore), own[0] if own else None, True, warning)


def left_out_of_run(record: RunRecord) -> tuple[list[str], set[str]]:
    """(ignore globs, files the run's `code` setting leaves out beyond the globs) of one record."""
    code, command = record.code, record.command
    extra: set[str] = set()
    if code.content_without_launcher and record.settings.get("code") == code.content_without_launcher:
        extra.update(command.launcher_inputs or [])
        if command.launcher_path:
            extra.add(command.launcher_path)
        if record.replay is not None:  # a replay: its source's launcher files
            extra.update(record.replay.code_left_out or [])
    return list(code.ignore or []), extra


class CodeFiles(msgspec.Struct, frozen=True):
    """Files that differ between two runs' code snapshots, split by the code rule."""

    counted: list[str]  # files that count as code for either run
    launcher_inputs: list[str]  # launcher files and inputs (their effect is in the settings)
    ignored: list[str]  # documentation, bookkeeping, `code: ignore:` globs


def split_files(paths: Iterable[str], ra: RunRecord, rb: RunRecord) -> CodeFiles:
    """Sort changed `paths` by the code rule of both runs (a file counts when it counts for one)."""
    rules = [left_out_of_run(ra), left_out_of_run(rb)]
    counted, inputs, ignored = [], [], []
    for path in sorted(paths):
        if any(counts(path, globs) and path not in extra for globs, extra in rules):
            counted.append(path)
        elif any(path in extra for _, extra in rules):
            inputs.append(path)
        else:
            ignored.append(path)
    return CodeFiles(counted, inputs, ignored)


def changed_code_files(repo: Repo, commit_a: str, commit_b: str, ra: RunRecord, rb: RunRecord) -> CodeFiles:
    """The files that differ between two run commits' code (outside `runs/`), by the code rule."""
    out = repo.git("diff", "--no-renames", "--name-only", "-z", commit_a, commit_b, "--", ".", ":(exclude)runs", check=False).stdout.decode(
        "utf-8", "surrogateescape"
    )
    return split_files([p for p in out.split("\0") if p], ra, rb)
