"""Every command documents itself, `ledger --help` lists them without importing them, and usage
errors are one line with exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from conftest import ledger

from ledger.cli import VERBS, app
from ledger.main import main


def _commands() -> dict[str, click.Command]:
    with click.Context(app, info_name="ledger") as ctx:
        found = {name: app.get_command(ctx, name) for name in app.list_commands(ctx)}
    assert all(found.values()), f"verbs without a command: {[n for n, c in found.items() if c is None]}"
    return {name: c for name, c in found.items() if c is not None}


def test_every_command_has_help() -> None:
    commands = _commands()
    assert set(commands) >= {
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
    for name, command in commands.items():
        assert command.name == name, f"`ledger {name}` resolves to the command {command.name!r}"
        assert command.help and len(command.help.strip()) > 20, f"`ledger {name}` has no help text"
        assert main([name, "--help"]) == 0


def test_each_summary_in_the_table_is_its_commands_first_paragraph() -> None:
    for name, command in _commands().items():
        assert command.help is not None
        first = " ".join(command.help.split("\n\n")[0].split())
        assert VERBS[name].summary == first, f"VERBS[{name!r}].summary differs from `ledger {name}`'s docstring"


@pytest.mark.parametrize("width", [60, 80, 200])
def test_the_listing_is_clicks_own(width: int) -> None:
    """`ledger --help` from the table reads exactly as click's listing of the imported commands."""
    with click.Context(app, info_name="ledger", terminal_width=width, max_content_width=width) as ctx:
        ours, clicks = ctx.make_formatter(), ctx.make_formatter()
        app.format_commands(ctx, ours)
        click.Group.format_commands(app, ctx, clicks)
    assert ours.getvalue() == clicks.getvalue()
    assert "run " in ours.getvalue() and "unarchive " in ours.getvalue()


def _modules_after(argv: list[str], cwd: Path) -> set[str]:
    """The ledger modules a `ledger ARGV` process has imported by its end."""
    code = (
        "import sys\n"
        "from ledger.main import main\n"
        f"rc = main({argv!r})\n"
        "print(rc, ' '.join(m for m in sys.modules if m.startswith('ledger.')), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=True).stderr.splitlines()[-1].split()
    assert out[0] == "0", out
    return set(out[1:])


def test_help_imports_no_verb(tmp_path: Path) -> None:
    loaded = _modules_after(["--help"], tmp_path)
    assert "ledger.cli" in loaded
    assert not {m for m in loaded if m.startswith("ledger.commands")}, sorted(loaded)
    assert not loaded & {target.split(":")[0] for target in (v.target for v in VERBS.values())}


def test_ledger_run_imports_only_the_run_verb(repo: Path) -> None:
    """`ledger run` loads its own verb's modules, not list's, compare's or the web server's."""
    loaded = _modules_after(["run", "--no-debug-data", "--", "true"], repo)
    assert {"ledger.cli.run", "ledger.commands.run"} <= loaded
    verb_modules = {v.target.split(":")[0] for v in VERBS.values()} - {"ledger.cli.run"}
    assert not loaded & verb_modules, sorted(loaded & verb_modules)
    assert not loaded & {"ledger.commands.listing", "ledger.commands.compare", "ledger.commands.diff", "ledger.ui"}


def test_usage_errors_are_one_line(repo: Path) -> None:
    r = ledger(repo, "diff", "only-one")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("ledger: error:")
    r = ledger(repo, "replay", "latest", "--set", "lr=1")
    assert r.returncode == 4 and "no runs recorded yet" in r.stderr
    assert ledger(repo, "run", "--no-debug-data", "--", "python3", "train.py").returncode == 0
    r = ledger(repo, "replay", "latest", "--set", "novalue")
    assert r.returncode == 2 and "has no '='" in r.stderr and r.stderr.count("\n") == 1
    r = ledger(repo, "lsit")
    assert r.returncode == 2 and "No such command 'lsit'" in r.stderr and r.stderr.count("\n") == 1
