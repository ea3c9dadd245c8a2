"""ledger.globs answers exactly what `any(fnmatch.fnmatchcase(name, g) for g in globs)` answers."""

from __future__ import annotations

import fnmatch
import itertools

from ledger.globs import matcher, matches_any

GLOBS = ["*-dir", "save", "wandb-*", "?ort", "[!a]x", "a.b", "log[", "x|y", "(z)", "*[0-9]", "p+q", ""]
NAMES = [
    "save",
    "save-dir",
    "wandb-key",
    "port",
    "sort",
    "bx",
    "ax",
    "a.b",
    "aXb",
    "log[",
    "x|y",
    "x",
    "(z)",
    "z",
    "lr9",
    "p+q",
    "pq",
    "",
    "\n",
]


def test_every_name_against_every_list_of_up_to_two_globs_agrees_with_fnmatchcase() -> None:
    lists = [list(c) for n in range(3) for c in itertools.combinations(GLOBS, n)]
    for globs in lists:
        bound = matcher(globs)
        for name in NAMES:
            expected = any(fnmatch.fnmatchcase(name, g) for g in globs)
            assert matches_any(name, globs) is expected, (name, globs)
            assert bound(name) is expected, (name, globs)


def test_no_globs_match_nothing_and_case_matters() -> None:
    assert not matches_any("anything", [])
    assert matches_any("Save", ["Save"]) and not matches_any("save", ["Save"])
