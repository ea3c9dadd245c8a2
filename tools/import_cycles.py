"""List the imports between ledger's modules (module-level and inside functions) and find cycles.

    python tools/import_cycles.py            # cycles (strongly connected components), exit 1 if any
    python tools/import_cycles.py --edges    # every edge: importer -> imported  [module|function]

Static: reads the source with `ast`, so it sees imports that run only when a function is called
(import-linter sees those too; Python's import machinery only trips over module-level ones).
`from ledger.x import name` counts as an edge to `ledger.x.name` when that is a module, else to `ledger.x`.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "ledger"


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name."""
    found: dict[str, Path] = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([target] if target else []))


def edges(known: dict[str, Path]) -> list[tuple[str, str, str]]:
    """(importer, imported, "module" or "function") for each import of a ledger module."""
    out: list[tuple[str, str, str]] = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node, where in _imports(tree, "module"):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_package, node.level, node.module)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in known else base)
            for target in targets:
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target.startswith(PACKAGE + ".") and target != name:
                    out.append((name, target, where))
    return sorted(set(out))


def _imports(node: ast.AST, where: str) -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    """Import statements under node; "function" once inside a def or lambda (runs only when called)."""
    found: list[tuple[ast.Import | ast.ImportFrom, str]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            found.append((child, where))
        inner = "function" if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else where
        found.extend(_imports(child, inner))
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    result.append(sorted(component))
    return result


def main(argv: list[str]) -> int:
    known = modules()
    found = edges(known)
    if "--edges" in argv:
        for importer, imported, where in found:
            print(f"{importer} -> {imported}  [{where}]")
        return 0
    graph: dict[str, set[str]] = {name: set() for name in known}
    for importer, imported, _ in found:
        graph[importer].add(imported)
    loops = cycles(graph)
    kinds = {(a, b): w for a, b, w in found}
    for component in loops:
        members = set(component)
        print(f"cycle of {len(component)} modules:")
        for a in component:
            for b in sorted(graph[a] & members):
                print(f"  {a} -> {b}  [{kinds[(a, b)]}]")
    print(f"{len(known)} modules, {len(found)} imports, {len(loops)} cycles")
    return 1 if loops else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
