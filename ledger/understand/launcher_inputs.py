"""The files a launcher takes training flags from, found statically.

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

import os
import re
from collections.abc import Iterable
from pathlib import Path

from ledger.understand.launcher import without_comments

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


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def bash_inputs(launcher_path: Path, text: str, cwd: Path, root: Path) -> list[Path]:
    """What a bash launcher sources, and the model file a `model_args_utils.py NAME` call reads."""
    bases = (cwd, launcher_path.parent, root)
    values = {m.group(1): m.group(3) for m in _ASSIGN_RE.finditer(text)}
    code = without_comments(text)
    found = [_first_file(b / _path_word(m.group(1), values) for b in bases) for m in _SOURCE_RE.finditer(code)]
    for m in _MODEL_ARGS_RE.finditer(code):
        helper = _first_file(b / _path_word(m.group(1), values) for b in bases)
        found.append(helper)  # what it prints is flags: its effect is in the training command
        name = _path_word(m.group(2), values)
        above = [*(helper.parents if helper is not None else ()), cwd, root]
        found.append(_first_file(folder / "scripts" / "models" / f"{name}.py" for folder in above))
    return [f for f in found if f is not None]


def _module_files(name: str, bases: Iterable[str]) -> list[str]:
    """The files importing dotted `name` runs: each package's `__init__.py` and the module."""
    parts = name.split(".")
    for base in bases:
        files: list[str] = []
        folder = base
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            here = os.path.join(folder, part)
            package, module = os.path.join(here, "__init__.py"), here + ".py"
            if os.path.isfile(package):
                files.append(package)
            elif not (last and os.path.isfile(module)) and not os.path.isdir(here):
                files = []
                break
            if last and os.path.isfile(module):
                files.append(module)
            folder = here
        if files:
            return files
    return []


# `import a.b as c, d` and `from .x import (y, z)`, at any indentation. A regex, not `ast`: parsing
# the 300+ files a trainer imports took seconds before every run; a docstring line that reads like
# an import can only add a file of the checkout that exists under that name.
_IMPORT_RE = re.compile(r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)|import[ \t]+([^\n#;]+))", re.M)
_NAME_RE = re.compile(r"[A-Za-z_][\w.]*")
_IMPORTS_CACHE: dict[tuple[Path, int, int], list[tuple[int, str, list[str]]]] = {}


def _imported_names(path: Path) -> list[tuple[int, str, list[str]]]:
    """(level, module, names) of each import statement of a Python file (cached per version)."""
    try:
        st = path.stat()
        key = (path, st.st_mtime_ns, st.st_size)
        if key in _IMPORTS_CACHE:
            return _IMPORTS_CACHE[key]
        text = path.read_text(errors="replace")
    except OSError:
        return []
    found: list[tuple[int, str, list[str]]] = []
    for m in _IMPORT_RE.finditer(text):
        if m.group(3) is not None:  # import a.b as c, d
            for part in m.group(3).split(","):
                word = _NAME_RE.match(part.strip())
                if word:
                    found.append((0, word.group(0), []))
            continue
        dotted = m.group(1)
        level = len(dotted) - len(dotted.lstrip("."))
        names = [w.group(0) for part in m.group(2).strip("()").split(",") if (w := _NAME_RE.match(part.strip().strip("\\").strip()))]
        found.append((level, dotted.lstrip("."), names))
    _IMPORTS_CACHE[key] = found
    return found


class _Imports:
    """Resolves imports to checkout files, remembering each file's and each name's answer (one
    launcher's closure and the trainers' overlap almost entirely)."""

    def __init__(self, root: Path):
        self.root = str(root)
        self.prefix = self.root.rstrip("/") + "/"
        self.of_file: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        self.of_name: dict[tuple[str, tuple[str, ...]], list[str]] = {}

    def files(self, path: str, bases: tuple[str, ...]) -> list[str]:
        """The checkout files one Python file imports (absolute and relative imports)."""
        key = (path, bases)
        if key not in self.of_file:
            self.of_file[key] = self._files(path, bases)
        return self.of_file[key]

    def _files(self, path: str, bases: tuple[str, ...]) -> list[str]:
        found: list[str] = []
        for level, module, imported in _imported_names(Path(path)):
            here = bases
            if level:
                package = os.path.dirname(path)
                for _ in range(level - 1):
                    package = os.path.dirname(package)
                here = (package,)
            wanted = ([module] if module else []) + [f"{module}.{n}" if module else n for n in imported if n != "*"]
            for name in wanted:
                key = (name, here)
                if key not in self.of_name:
                    self.of_name[key] = [f for f in _module_files(name, here) if f.startswith(self.prefix)]
                found += self.of_name[key]
        return found

    def closure(self, start: Path, extra_bases: tuple[Path, ...] = ()) -> list[Path]:
        """`start` and every checkout file it imports, transitively (breadth first, in order)."""
        first = str(start.resolve())
        bases = tuple(dict.fromkeys(str(p.resolve()) for p in (start.parent, *extra_bases, Path(self.root))))
        seen: dict[str, None] = {first: None}
        queue = [first]
        while queue and len(seen) < _MAX_FILES:
            current = queue.pop(0)
            for found in self.files(current, bases):
                if found not in seen:
                    seen[found] = None
                    queue.append(found)
        return [Path(p) for p in seen]


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


def launcher_inputs(launcher_path: Path, text: str, cwd: Path, root: Path, entries: Iterable[Path] = ()) -> list[Path]:
    """The files (absolute, inside `root`) the launcher takes flags from, the launcher excluded.

    `entries` are the training scripts it may run: what they import is code the job runs, so it
    is never a launcher input.
    """
    root = root.resolve()
    launcher_path = launcher_path.resolve()
    found: dict[Path, None] = {}
    imports = _Imports(root)
    if launcher_path.suffix == ".py" or text.startswith("#!") and "python" in text.splitlines()[0]:
        closure = imports.closure(launcher_path, (cwd.resolve(),))
        found.update(dict.fromkeys(closure[1:]))
        for helper in [p for p in closure if p.name == MODEL_HELPER]:
            found.update(dict.fromkeys(_model_files(helper, root)))
    else:
        direct = bash_inputs(launcher_path, text, cwd, root)
        found.update(dict.fromkeys(direct))
        for path in direct:  # a sourced or named model file that is Python may import helpers
            if path.suffix == ".py":
                found.update(dict.fromkeys(imports.closure(path)[1:]))
    found.update(dict.fromkeys(delegated(list(found))))
    for entry in entries:
        if entry.is_file() and entry.suffix == ".py":
            for path in imports.closure(entry):
                found.pop(path, None)
    found.pop(launcher_path, None)
    return [p for p in found if _inside(p, root)]
