"""Fault suite, issue 11: a `.ledger.yaml` that is not even valid YAML is refused before the job
in one line that says what is wrong and on which line (was: "while constructing a mapping", the
context line of ruamel's message, naming neither the duplicate key nor where it is)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_faults_input import _refused


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("logs:\n  extra: []\nlogs:\n  git_max_mb: 1\n", ['duplicate key "logs"', "line 3"]),  # a section twice
        ("logs:\n  extra: [a.log\n", ["expected ',' or ']'", "line 3"]),  # an unclosed list
        ("heat_guard:\n\tenabled: false\n", ["cannot start any token", "line 2"]),  # a tab indent
    ],
)
def test_invalid_yaml_is_refused_naming_the_problem_and_line(repo: Path, text: str, expect: list[str]) -> None:
    (repo / ".ledger.yaml").write_text(text)
    line = _refused(repo)
    assert ".ledger.yaml is not valid YAML" in line
    for part in expect:
        assert part in line, line


def test_an_unreadable_config_is_refused_in_one_line(repo: Path) -> None:
    """A folder named .ledger.yaml: one line and exit 125, nothing run (was: internal error)."""
    (repo / ".ledger.yaml").mkdir()
    line = _refused(repo)
    assert "cannot read .ledger.yaml" in line and "readable file" in line
