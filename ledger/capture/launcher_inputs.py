"""The files a launcher takes training flags from, found statically (issue 22, item 2).

A launcher's flags come from more files than the launcher itself. Whatever those files say ends
up in the training command ledger records, so they are *launcher inputs*: they leave the `code`
setting (`ledger.record.codeset`) like the launcher does, and are listed in
`command.launcher_inputs`. Found from the launcher's text and the repository only, never by
running anything:

- bash: every `source FILE` / `. FILE` (literal `NAME=value` variables expanded, a leading
  `${SCRIPT_DIR}/`-style variable resolved against the launcher's folder, the cwd and the root);
- bash: a `python3 .../model_args_utils.py NAME` call reads `scripts/models/NAME.py` (Miles' bash
  launchers since August 2026, radixark/miles fe30593dd);
- Python: every `import` / `from ... import` that resolves to a file inside the checkout
  (searched from the launcher's folder, then the repository root, as `sys.path` has them for
  `python3 scripts/run_x.py` with Miles installed in editable mode), transitively;
- a model file reads its flags in-process: a launcher that reaches `model_args_utils.py` (Miles'
  Python launchers, through `miles.utils.external_utils.command_utils`) picks its model file by a
  value computed at run time, so every `scripts/models/*.py` beside the helper is an input;
- a variant model file delegates to a sibling (`load_sibling_model_args(__file__, "qwen3-4B")`,
  tau-bench's `qwen3-4B-Instruct-2507.py`): the sibling is an input too.

Files the training entry point itself imports are not launcher inputs even when the launcher
imports them too: they change what the job does, not only its flags.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

MODEL_HELPER = "model_args_utils.py"
_SOURCE_RE = re.compile(r"^\s*(?:source|\.)\s+(\S+)", re.M)
_MODEL_ARGS_RE = re.compile(r"""(\S*model_args_utils\.py)["']?\s+["']?([^\s"')]+)""")
# `NAME=literal` lines, so `source "${ROOT}/scripts/models/${MODEL_TYPE}.sh"` can be resolved
_ASSIGN_RE = re.compile(r"""^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(["']?)([^"'$`\s;|&()]+)\2\s*$""", re.M)
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_LEADING_VAR_RE = re.compile(r"^(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\$\([^)]*\))/")
_SIBLING_RE = re.compile(r"""load_sibling_model_args\(\s*__file__\s*,\s*["']([^"']+)["']""")
_MAX_FILES = 2000  # a launcher importing more than this from the checkout is not read further


def _path_word(word: str, values: dict[str, str]) -> str:
    """A path as the launcher wrote it, literal variables expanded, a leading unknown one
    (`${SCRIPT_DIR}/`, `$(dirname ...)/`) dropped so the rest resolves against a base folder."""
    word = _VAR_RE.sub(lambda m: values.get(m.group(1) or m.group(2), m.group(0)), word.strip("\"'"))
    return _LEADING_VAR_RE.sub("", word)


def _first_file(candidates: Iterable[Path]) -> Path | None:
    return next((c.resolve() for c in candidates if c.is_file()), None)


def _without_comments(text: str) -> str:
    from ledger.data.outputs import without_comments

    return without_comments(text)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def bash_inputs(launcher_path: Path, text: str, cwd: Path, root: Path) -> list[Path]:
    """What a bash launcher sources, and the model file a `model_args_utils.py NAME` call reads."""
    bases = (cwd, launcher_path.parent, root)
    values = {m.group(1): m.group(3) for m in _ASSIGN_RE.finditer(text)}
    code = _without_comments(text)
    found = [_first_file(b / _path_word(m.group(1), values) for b in bases) for m in _SOURCE_RE.finditer(code)]
    for m in _MODEL_ARGS_RE.finditer(code):
        helper = _first_file(b / _path_word(m.group(1), values) for b in bases)
        found.append(helper)  # what it prints is flags: its effect is in the training command
        name = _path_word(m.group(2), values)
        above = [*(helper.parents if helper is not None else ()), cwd, root]
        found.append(_first_file(folder / "scripts" / "models" / f"{name}.py" for folder in above))
    return [f for f in found if f is not None]


def _module_files(name: str, bases: Iterable[Path]) -> list[Path]:
    """The files importing dotted `name` runs: each package's `__init__.py` and the module."""
    parts = name.split(".")
    for base in bases:
        files: list[Path] = []
        folder = base
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            package, module = folder / part / "__init__.py", folder / f"{part}.py"
            if package.is_file():
                files.append(package)
            elif not (last and module.is_file()) and not (folder / part).is_dir():
                files = []
                break
            if last and module.is_file():
                files.append(module)
            folder = folder / part
        if files:
            return files
    return []


def _imports(path: Path, root: Path, bases: tuple[Path, ...]) -> list[Path]:
    """The checkout files one Python file imports (absolute and relative imports)."""
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, OSError):
        return []
    names: list[tuple[str, tuple[Path, ...]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(alias.name, bases) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            here: tuple[Path, ...] = bases
            module = node.module or ""
            if node.level:
                package = path.parent
                for _ in range(node.level - 1):
                    package = package.parent
                here = (package,)
            if module:
                names.append((module, here))
            prefix = f"{module}." if module else ""
            names += [(prefix + alias.name, here) for alias in node.names if alias.name != "*"]
    found: list[Path] = []
    for name, where in names:
        found += [f.resolve() for f in _module_files(name, where) if _inside(f.resolve(), root)]
    return found


def python_closure(start: Path, root: Path, extra_bases: tuple[Path, ...] = ()) -> list[Path]:
    """`start` and every checkout file it imports, transitively (breadth first, in order)."""
    bases = (start.parent, *extra_bases, root)
    seen: dict[Path, None] = {start.resolve(): None}
    queue = [start.resolve()]
    while queue and len(seen) < _MAX_FILES:
        current = queue.pop(0)
        for found in _imports(current, root, bases):
            if found not in seen:
                seen[found] = None
                queue.append(found)
    return list(seen)


def _model_files(helper: Path, root: Path) -> list[Path]:
    """Every model file a `model_args_utils.py` helper may read: `scripts/models/*.py` of the
    checkout the helper sits in (Miles: three folders above it) and of the repository root."""
    folders = {p / "scripts" / "models" for p in (*helper.parents, root) if _inside(p, root)}
    return sorted(f.resolve() for folder in folders if folder.is_dir() for f in folder.glob("*.py"))


def delegated(model_files: Iterable[Path]) -> list[Path]:
    """The siblings variant model files delegate to, transitively."""
    out: dict[Path, None] = {}
    queue = list(model_files)
    while queue:
        path = queue.pop(0)
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for m in _SIBLING_RE.finditer(text):
            sibling = (path.parent / f"{m.group(1)}.py").resolve()
            if sibling.is_file() and sibling not in out:
                out[sibling] = None
                queue.append(sibling)
    return list(out)


def launcher_inputs(launcher_path: Path, text: str, cwd: Path, root: Path,
                    entries: Iterable[Path] = ()) -> list[Path]:
    """The files (absolute, inside `root`) the launcher takes flags from, the launcher excluded.

    `entries` are the training scripts it may run: what they import is code the job runs, so it
    is never a launcher input.
    """
    root = root.resolve()
    launcher_path = launcher_path.resolve()
    found: dict[Path, None] = {}
    if launcher_path.suffix == ".py" or text.startswith("#!") and "python" in text.splitlines()[0]:
        closure = python_closure(launcher_path, root, (cwd.resolve(),))
        found.update(dict.fromkeys(closure[1:]))
        for helper in [p for p in closure if p.name == MODEL_HELPER]:
            found.update(dict.fromkeys(_model_files(helper, root)))
    else:
        direct = bash_inputs(launcher_path, text, cwd, root)
        found.update(dict.fromkeys(direct))
        for path in direct:  # a sourced or named model file that is Python may import helpers
            if path.suffix == ".py":
                found.update(dict.fromkeys(python_closure(path, root)[1:]))
    found.update(dict.fromkeys(delegated(list(found))))
    for entry in entries:
        if entry.is_file() and entry.suffix == ".py":
            for path in python_closure(entry, root):
                found.pop(path, None)
    found.pop(launcher_path, None)
    return [p for p in found if _inside(p, root)]
