"""`ledger run`'s command line read without click (`ledger.record.options.plain_args`, the start-up
path) gives what click gives, and leaves every other shape to click."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledger.cli import app
from ledger.record.options import OPTIONS, RunArgs, plain_args

PLAIN = [
    ["--", "true"],
    ["true"],
    ["python3", "train.py", "--lr", "1e-6"],
    ["--name", "lr-3e-6", "--", "bash", "run.sh"],
    ["--name=lr-3e-6", "--note", "a b c", "bash", "run.sh", "--", "x"],
    ["--image", "miles:latest", "--no-heat-guard", "--", "python3", "-c", "pass"],
    ["--data", "out/a", "--data=out/b", "--data", "", "--", "sh", "-c", "exit 3"],
    ["--debug-data", "--", "true"],
    ["--no-debug-data", "--name", "", "--", "true"],
    ["--note=", "--", "true"],
    ["--name", "x", "sh", "-c", "echo --name y"],
]

LEFT_TO_CLICK = [
    [],
    ["--"],
    ["--help"],
    ["-h", "--", "true"],
    ["--nmae", "x", "--", "true"],
    ["--name"],
    ["--name", "--note", "x", "--", "true"],
    ["--name", "a", "--name", "b", "--", "true"],
    ["--debug-data", "--no-debug-data", "--", "true"],
    ["--no-heat-guard=yes", "--", "true"],
    ["--", "-x"],
    ["--", "--", "true"],
    ["--name", "a", "--"],
]


def _click_reads(args: list[str]) -> RunArgs:
    """What click's `ledger run` hands its function (a leading `--` dropped, as `cli.run` does)."""
    with app.commands["run"].make_context("run", list(args)) as ctx:
        params = dict(ctx.params)
    words = params.pop("command")
    return RunArgs(tuple(words[1:] if words[:1] == ("--",) else words), **params)


@pytest.mark.parametrize("args", PLAIN, ids=" ".join)
def test_a_plain_command_line_is_read_as_click_reads_it(args: list[str]) -> None:
    read = plain_args(args)
    assert read is not None
    assert read == _click_reads(args)


@pytest.mark.parametrize("args", LEFT_TO_CLICK, ids=lambda a: " ".join(a) or "(none)")
def test_any_other_shape_is_left_to_click(args: list[str]) -> None:
    assert plain_args(args) is None


def test_clicks_options_are_the_declared_ones() -> None:
    """`ledger run --help` (and docs/cli.md) show exactly the options `OPTIONS` declares."""
    run = app.commands["run"]
    opts = {p.name: (p.opts, p.secondary_opts, p.multiple, getattr(p, "is_flag", False)) for p in run.params if p.name != "command"}
    want = {o.dest: ([o.flag], [o.off] if o.kind == "switch" else [], o.kind == "values", o.kind in ("flag", "switch")) for o in OPTIONS}
    assert opts == want


def test_a_plain_run_never_imports_click(repo: Path) -> None:
    code = (
        "import sys\n"
        "sys.argv = ['ledger', 'run', '--no-debug-data', '--name', 'quick', '--', 'true']\n"
        "from ledger.main import main\n"
        "rc = main()\n"
        "print(rc, 'click' in sys.modules)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, check=True)
    assert res.stdout.split() == ["0", "False"]
    assert "recorded run" in res.stderr and "(quick)" in res.stderr


def test_a_misspelt_option_still_gets_clicks_answer(repo: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "ledger", "run", "--nmae", "x", "--", "true"], cwd=repo, capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.strip() == (
        "ledger: error: ledger run has no option --nmae (did you mean --name? ledger's options go before `--`, the job's command after it)"
    )


def test_click_still_takes_a_dash_word_as_an_options_value() -> None:
    """Left to click, `--name -x` names the run `-x` (which the name check then refuses), as before
    the options were made from their declaration: an explicit `is_flag=False` would change it."""
    assert plain_args(["--name", "-x", "--", "true"]) is None
    assert _click_reads(["--name", "-x", "--", "true"]) == RunArgs(("true",), name="-x")
