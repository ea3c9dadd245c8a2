"""The code a module runs: its imports within `ledger`, followed to the end (`closure`).

A cache whose entries only these modules compute can be keyed by the bytes of these files alone
(`cache.code_version` with module names), so a new version of ledger that changed none of them
keeps its entries: a listing index of 100,000 runs is not read again from git because the heat
guard changed.

What counts as an import is read from the source, never from what a process happened to load:
`import ledger.x`, `from ledger.x import y` (and `y` itself where it is a module), relative
imports, imports inside functions and under `TYPE_CHECKING` alike, and every string constant that
names a ledger module (`"ledger.record.facts"`, `"ledger.commands.run:run_job"`), which is how the
package imports lazily by name. The packages above each module are in it too (their `__init__`
runs first). Missing one import would let a cache lie, so the rule errs the other way: a name
that might be an import is one.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping

PACKAGE = "ledger"
_NAMED = re.compile(rf"{PACKAGE}(?:\.\w+)+(?=$|:)")  # a module named in a string, maybe `:attribute` after it


def closure(sources: Mapping[str, bytes], roots: Iterable[str]) -> set[str]:
    """The modules `roots` run, as names (`ledger.storage.listing`), from `sources`: every module
    of the package by name (a package by its own name, its `__init__.py`'s bytes)."""
    seen: set[str] = set()
    packages = _packages(sources)
    todo = [m for root in roots for m in _with_parents(_module(root, sources))]
    while todo:
        name = todo.pop()
        if name in seen or name not in sources:
            continue
        seen.add(name)
        for found in _imports(name, sources[name], name in packages):
            todo.extend(_with_parents(_module(found, sources)))
    return seen


def _packages(sources: Mapping[str, bytes]) -> set[str]:
    return {name.rsplit(".", 1)[0] for name in sources if "." in name}


def _module(name: str, sources: Mapping[str, bytes]) -> str:
    """The longest prefix of `name` that is a module (`ledger.x.f` where `f` is a function of x)."""
    while name not in sources and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _imports(name: str, source: bytes, is_package: bool) -> set[str]:
    """Every ledger module name `source` (the module `name`) may import."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                up = parts[: len(parts) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (named := _NAMED.match(node.value)):
            found.add(named.group(0))
    return {f for f in found if f == PACKAGE or f.startswith(PACKAGE + ".")}
