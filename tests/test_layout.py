"""The layout rules of docs/ARCHITECTURE.md that a grep can check: commands are one kind of thing
(no command imports another; shared helpers live in the library)."""

from __future__ import annotations

import ast
from pathlib import Path

COMMANDS = Path(__file__).resolve().parent.parent / "ledger" / "commands"


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_no_command_imports_another_command() -> None:
    offenders = {
        path.name: sorted(n for n in _imported(path) if n.startswith("ledger.commands"))
        for path in sorted(COMMANDS.glob("*.py"))
        if path.name != "__init__.py"
    }
    assert {k: v for k, v in offenders.items() if v} == {}
    assert len(offenders) >= 6  # the check really read the command modules
