"""Terminal output: colour and progress only on a terminal (a real pty here), never when piped or
with NO_COLOR; "1 run"; short SHAs in change sets; nearest names for a typo; a clone that never
pulled the experiments branch is told `ledger pull` would show its runs."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import TextIO

import pytest
from conftest import LEDGER, drawn_on_a_terminal, git, head, ledger

from ledger.commands.listing import change_text
from ledger.termstyle import paint_lines, progress
from ledger.textfmt import plural


def _two_runs(repo: Path) -> None:
    for lr in ("1", "2"):
        r = ledger(repo, "run", "--no-debug-data", "--name", f"lr{lr}", "--", "python3", "train.py", "--lr", lr)
        assert r.returncode == 0, r.stderr


def _in_pty(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """The output of `ledger ARGS` with stdout and stderr on a pseudo-terminal."""
    master, slave = pty.openpty()
    full = dict(os.environ)
    full.pop("NO_COLOR", None)
    full.update({"TERM": "xterm", **(env or {})})
    proc = subprocess.Popen([*LEDGER, *args], cwd=cwd, env=full, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def test_colour_on_a_terminal_only(repo: Path) -> None:
    _two_runs(repo)
    shown = _in_pty(repo, "diff", "lr1", "lr2")
    assert "\x1b[1mmanifest diff:" in shown and "\x1b[32m+" in shown and "\x1b[31m-" in shown
    assert "\x1b[" not in _in_pty(repo, "diff", "lr1", "lr2", env={"NO_COLOR": "1"})
    piped = ledger(repo, "diff", "lr1", "lr2", env={"TERM": "xterm"})
    assert piped.returncode == 0 and "manifest diff:" in piped.stdout and "\x1b[" not in piped.stdout + piped.stderr


def test_paint_rules() -> None:
    text = "refused: 2 settings differ\nwarning: x\n+++ b/f\n+added\n--- a/f\n-removed\nplain"
    painted = paint_lines(text).split("\n")
    assert painted[0].startswith("\x1b[1;31m") and painted[1].startswith("\x1b[33m")
    assert painted[2] == "+++ b/f" and painted[3].startswith("\x1b[32m")
    assert painted[4] == "--- a/f" and painted[5].startswith("\x1b[31m") and painted[6] == "plain"


def _pushing(stream: TextIO | None = None) -> None:
    report = progress("pushing data", stream)
    for done in range(0, 11):
        report(done, 10)


def test_progress_bar_only_on_a_terminal() -> None:
    piped = io.StringIO()
    _pushing(piped)
    assert piped.getvalue() == ""
    shown = drawn_on_a_terminal(_pushing)
    assert "ledger: pushing data" in shown and "10/10" in shown


def test_progress_bar_on_a_terminal_of_no_size_is_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pty never given a window size (0 columns: `script`, some CI runners) as stderr: tqdm would
    fit the bar to 0 columns and draw an empty line; it is drawn 80 wide instead."""

    def on_stderr(terminal: TextIO) -> None:
        with monkeypatch.context() as m:
            m.setattr(sys, "stderr", terminal)
            _pushing()

    shown = drawn_on_a_terminal(on_stderr)
    assert "ledger: pushing data" in shown and "10/10" in shown, shown


def test_plural_and_short_shas() -> None:
    assert plural(1, "run") == "1 run" and plural(0, "run") == "0 runs" and plural(3, "run") == "3 runs"
    text = change_text(
        [
            {"name": "code.commit", "a": "a" * 40, "b": "b" * 40},
            {"name": "code.patch", "a": None, "b": "c" * 64},
            {"name": "tag", "a": "abc", "b": "d" * 12},
        ]
    )
    assert text == "code.commit: aaaaaaaaaa -> bbbbbbbbbb, code.patch: null -> cccccccccc, tag: abc -> dddddddddddd"


def test_a_short_sha_that_reads_as_a_number_is_shown_unquoted() -> None:
    # `0262844e66` parses as a float: the flaky report test failed when a random commit began so
    sha = "0262844e66" + "f" * 30
    text = change_text([{"name": "code.commit", "a": sha, "b": "1" * 40}, {"name": "tag", "a": "1e5", "b": "x"}])
    assert text == "code.commit: 0262844e66 -> 1111111111, tag: '1e5' -> x"  # a string setting that reads as a number keeps its quotes


def test_a_typo_suggests_the_nearest_names(repo: Path) -> None:
    _two_runs(repo)
    r = ledger(repo, "show", "lr3")
    assert r.returncode != 0 and "no run named 'lr3'" in r.stderr and "did you mean lr" in r.stderr
    assert "lr1" in r.stderr and "lr2" in r.stderr
    r = ledger(repo, "show", "latest~5")
    assert "only 2 runs recorded" in r.stderr
    r = ledger(repo, "show", "lr3~1")  # the typo of an older run's name too
    assert r.returncode == 4 and "no run named 'lr3'" in r.stderr and "did you mean lr2 or lr1?" in r.stderr
    r = ledger(repo, "show", "lr1~1")
    assert r.returncode == 4 and "'lr1~1': only 1 run named 'lr1'" in r.stderr


def test_limit_keeps_the_newest_n_and_refuses_zero(repo: Path) -> None:
    _two_runs(repo)
    assert [line.split()[1] for line in ledger(repo, "list", "-n", "1").stdout.splitlines()] == ["NAME", "lr2"]
    for command in ("list", "log"):
        r = ledger(repo, command, "-n", "0")  # was: every run
        assert r.returncode == 2 and "0 is not in the range x>=1" in r.stderr


def test_report_page_writes_change_sets_as_list_does(repo: Path, tmp_path: Path) -> None:
    first = head(repo)
    assert ledger(repo, "run", "--no-debug-data", "--name", "one", "--", "python3", "train.py").returncode == 0
    (repo / "train.py").write_text("print('changed')\n")
    git(repo, "commit", "-qam", "change the code")
    second = head(repo)
    assert ledger(repo, "run", "--no-debug-data", "--name", "two", "--", "python3", "train.py").returncode == 0
    listed = ledger(repo, "list", "--changed").stdout
    trees = [json.loads(ledger(repo, "show", name, "--json").stdout)["settings"]["code"] for name in ("one", "two")]
    assert first != second and f"code: {trees[0][:10]} -> {trees[1][:10]}" in listed
    page = tmp_path / "runs.html"
    r = ledger(repo, "report", "--html", str(page))
    assert r.returncode == 0 and "(2 runs)" in r.stderr
    html = page.read_text()
    assert f"code: {trees[0][:10]} -&gt; {trees[1][:10]}" in html and trees[1] not in html  # was: full SHAs


def test_list_says_pull_would_show_the_remotes_runs(repo: Path, tmp_path: Path) -> None:
    _two_runs(repo)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    r = ledger(clone, "list")
    assert r.returncode == 0
    assert "origin/experiments has 2 runs not here; `ledger pull` would show them" in r.stderr
    assert "ledger pull" not in ledger(repo, "list").stderr  # the recording repo has them all


def test_the_manifest_and_the_code_diff_each_under_its_own_heading(repo: Path) -> None:
    run = ["run", "--no-debug-data", "--", "python3", "train.py", "--lr", "1"]
    assert ledger(repo, *run).returncode == 0
    (repo / "train.py").write_text("print('changed')\n")
    git(repo, "commit", "-qam", "change the code")
    assert ledger(repo, *run).returncode == 0
    r = ledger(repo, "diff", "latest~1", "latest")
    assert r.returncode == 0, r.stderr
    manifest, code = r.stdout.split("\nmanifest diff:\n")[1].split("\ncode diff:\n")
    assert manifest.startswith("diff --git a/runs/") and "/manifest.yaml b/runs/" in manifest
    assert "-  code: " in manifest and "+  code: " in manifest
    assert " train.py | 2 +-" in code and "+print('changed')" in code and "runs/" not in code
