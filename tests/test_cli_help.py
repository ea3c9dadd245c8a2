"""Every command documents itself, and usage errors are one line with exit 2."""

from __future__ import annotations

from pathlib import Path

from conftest import ledger

from ledger.cli import app
from ledger.main import main


def test_every_command_has_help() -> None:
    assert set(app.commands) >= {
        "init",
        "run",
        "list",
        "log",
        "show",
        "diff",
        "replay",
        "push",
        "pull",
        "recover",
        "heat",
        "path",
        "report",
    }
    for name, command in app.commands.items():
        assert command.help and len(command.help.strip()) > 20, f"`ledger {name}` has no help text"
        assert main([name, "--help"]) == 0


def test_usage_errors_are_one_line(repo: Path) -> None:
    r = ledger(repo, "diff", "only-one")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("ledger: error:")
    r = ledger(repo, "replay", "latest", "--set", "lr=1")
    assert r.returncode == 4 and "no runs recorded yet" in r.stderr
    assert ledger(repo, "run", "--no-debug-data", "--", "python3", "train.py").returncode == 0
    r = ledger(repo, "replay", "latest", "--set", "novalue")
    assert r.returncode == 2 and "has no '='" in r.stderr and r.stderr.count("\n") == 1
