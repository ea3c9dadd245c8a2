"""The code-weight figures of docs/development.md, measured on `ledger/`.

    .venv/bin/python tools/code_figures.py [PACKAGE_DIR]

- blocks (functions, methods, classes) graded C or worse by radon's cyclomatic complexity, as a
  share of all blocks;
- modules over 450 lines;
- function-level imports (an `import` inside a function body, found by an AST walk);
- lines that say `dict[str, Any]`;
- the package's lines in all.

radon is a development tool (the `test` extra), never imported by ledger itself.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from radon.complexity import cc_rank, cc_visit

LONG_MODULE = 450


def _imports_in_functions(tree: ast.AST) -> int:
    seen: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    seen.add(id(inner))
    return len(seen)


def figures(package: Path) -> dict[str, object]:
    blocks = graded_c = lines = dict_any = imports = 0
    long_modules: list[tuple[str, int]] = []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text()
        n = text.count("\n")
        lines += n
        if n > LONG_MODULE:
            long_modules.append((str(path.relative_to(package.parent)), n))
        dict_any += sum("dict[str, Any]" in line for line in text.splitlines())
        imports += _imports_in_functions(ast.parse(text))
        for block in cc_visit(text):
            blocks += 1
            graded_c += cc_rank(block.complexity) not in ("A", "B")
    return {
        "lines": lines,
        "blocks": blocks,
        "graded C or worse": graded_c,
        "share C or worse": f"{100 * graded_c / max(blocks, 1):.1f}%",
        "modules over 450 lines": len(long_modules),
        "long modules": sorted(long_modules, key=lambda m: -m[1]),
        "function-level imports": imports,
        "lines with dict[str, Any]": dict_any,
    }


def main() -> None:
    package = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "ledger")
    for key, value in figures(package).items():
        if isinstance(value, list):
            for name, n in value:
                print(f"    {name}: {n}")
        else:
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
