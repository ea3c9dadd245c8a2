"""`ledger run`'s command line, as click reads it: options before the command, the command
passed on as given (its own `--flags` and `--` included), misspelt options refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger.cli.run import run as run_verb

READ = [
    (["--", "true"], {}, ("true",)),
    (["true"], {}, ("true",)),
    (["python3", "train.py", "--lr", "1e-6"], {}, ("python3", "train.py", "--lr", "1e-6")),
    (["--name", "lr-3e-6", "--", "bash", "run.sh"], {"name": "lr-3e-6"}, ("bash", "run.sh")),
    (["--name=lr-3e-6", "--note", "a b c", "bash", "run.sh", "--", "x"], {"name": "lr-3e-6", "note": "a b c"}, ("bash", "run.sh", "--", "x")),
    (["--image", "miles:latest", "--no-heat-guard", "--", "python3", "-c", "pass"], {"image": "miles:latest", "no_heat_guard": True}, ("python3", "-c", "pass")),
    (["--data", "out/a", "--data=out/b", "--", "sh", "-c", "exit 3"], {"data_paths": ("out/a", "out/b")}, ("sh", "-c", "exit 3")),
    (["--debug-data", "--", "true"], {"debug_data": True}, ("true",)),
    (["--no-debug-data", "--name", "", "--", "true"], {"debug_data": False, "name": ""}, ("true",)),
    (["--name", "x", "sh", "-c", "echo --name y"], {"name": "x"}, ("sh", "-c", "echo --name y")),
    (["--name", "-x", "--", "true"], {"name": "-x"}, ("true",)),  # a dash word as a value (the name check refuses it)
]  # fmt: skip
DEFAULTS: dict[str, Any] = {"name": None, "note": None, "image": None, "no_heat_guard": False, "data_paths": (), "debug_data": None}


def _click_reads(args: list[str]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The options click hands `ledger run`, and the command (a leading `--` dropped, as `cli.run` does)."""
    with run_verb.make_context("run", list(args)) as ctx:
        params = dict(ctx.params)
    words = params.pop("command")
    return params, tuple(words[1:] if words[:1] == ("--",) else words)


@pytest.mark.parametrize(("args", "options", "command"), READ, ids=[" ".join(r[0]) for r in READ])
def test_a_command_line_is_read_into_options_and_the_command(args: list[str], options: dict[str, Any], command: tuple[str, ...]) -> None:
    assert _click_reads(args) == ({**DEFAULTS, **options}, command)


def test_a_misspelt_option_is_refused_before_the_job(repo: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "ledger", "run", "--nmae", "x", "--", "true"], cwd=repo, capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.strip() == (
        "ledger: error: ledger run has no option --nmae (did you mean --name? ledger's options go before `--`, the job's command after it)"
    )
