"""Notes where people look (issue 34, item 2): `ledger note RUN TEXT` is shown by `show`, `list`,
`compare` and on the diff, compare and report pages, escaped like every other value; and two of
item 6: `list --archived` marks the archived rows, a name differing only in case is suggested first."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import ledger, make_repo

EMIT = """
import argparse
ap = argparse.ArgumentParser()
ap.add_argument("--scale", type=float, default=1.0)
a = ap.parse_args()
for step in range(3):
    print(f"[2026-11-29 10:00:{step:02d}.000 main] train.py:2 - perf {step}: "
          f"{{'train/loss': {a.scale * (3 - step)}, 'perf/step_time': {1.5 + step}}}")
"""
# a note as people write them, with the characters a page must escape
NOTE = 'the <b>flag</b> was wrong & "lr" too'
ESCAPED = "the &lt;b&gt;flag&lt;/b&gt; was wrong &amp; &quot;lr&quot; too"


@pytest.fixture(scope="module")
def noted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Runs a (noted, tagged) and b (scale 2, no note), and c (archived)."""
    home = tmp_path_factory.mktemp("home-notes")
    (home / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@e.com\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
        repo = make_repo(tmp_path_factory.mktemp("notes") / "proj", {"README.md": "x\n", "emit.py": EMIT})
        ids = {}
        for name, scale in (("a", "1"), ("b", "2"), ("c", "3")):
            proc = ledger(
                repo, "run", "--name", name, "--no-debug-data", "--no-heat-guard", "--", sys.executable, "emit.py", "--scale", scale
            )
            assert proc.returncode == 0, proc.stderr
            ids[name] = ledger(repo, "path", "latest").stdout.strip().rsplit("/", 1)[-1]
        for args in (("note", "a", NOTE), ("tag", "a", "baseline"), ("archive", "c")):
            proc = ledger(repo, *args)
            assert proc.returncode == 0, proc.stderr
    return repo, ids


def test_show_leads_with_the_note(noted: tuple[Path, dict[str, str]]) -> None:
    repo, ids = noted
    shown = ledger(repo, "show", "a")
    assert shown.returncode == 0, shown.stderr
    head = shown.stdout.splitlines()[:6]
    assert head[1:6] == ["meta:", "  tags:", "  - baseline", f"  note: {NOTE}", "  archived: false"], head
    assert "id: " + ids["a"] in shown.stdout  # the record follows, unchanged
    data = json.loads(ledger(repo, "show", "a", "--json").stdout)
    assert data["meta"] == {"tags": ["baseline"], "note": NOTE, "archived": False}
    assert data["id"] == ids["a"] and data["note"] is None  # the record's own --note stays as recorded
    assert "meta" not in json.loads(ledger(repo, "show", "b", "--json").stdout)


def test_list_has_a_note_column_and_marks_archived_runs(noted: tuple[Path, dict[str, str]]) -> None:
    repo, ids = noted
    table = ledger(repo, "list").stdout.splitlines()
    assert table[0].split()[-1] == "NOTE"
    row_a = next(line for line in table if line.startswith(ids["a"]))
    assert row_a.endswith('the <b>flag</b> was wrong & "lr" too')  # (the terminal is no page: as written)
    assert next(line for line in table if line.startswith(ids["b"])).endswith(" -")
    assert not any(line.startswith(ids["c"]) for line in table)
    archived = ledger(repo, "list", "--archived").stdout
    row_c = next(line for line in archived.splitlines() if line.startswith(ids["c"]))
    assert "finished (archived)" in row_c
    assert "(archived)" not in next(line for line in archived.splitlines() if line.startswith(ids["b"]))


def test_a_long_note_is_cut_in_the_table_and_whole_in_show() -> None:
    from ledger.textfmt import note_cell

    long = "x" * 60
    assert note_cell(long) == "x" * 39 + "…"
    assert note_cell("first line\nsecond") == "first line…"
    assert note_cell(None) == "-"


def test_the_diff_page_shows_the_note_escaped(noted: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    repo, _ = noted
    page = tmp_path / "diff.html"
    proc = ledger(repo, "diff", "a", "b", "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    assert f"note on A: {ESCAPED}" in html
    assert "<b>flag" not in html and "note on B" not in html


def test_compare_and_its_page_show_the_note(noted: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    repo, _ = noted
    text = ledger(repo, "compare", "a", "b").stdout
    assert [line.split(None, 1)[1] for line in text.splitlines() if line.startswith("note ")] == [f"{NOTE}  -"]
    page = tmp_path / "compare.html"
    proc = ledger(repo, "compare", "a", "b", "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    assert f'<tr><th>note</th><td data-kind="note">{ESCAPED}</td><td data-kind="note">-</td></tr>' in html
    assert "<b>flag" not in html


def test_the_report_page_shows_the_note(noted: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    repo, ids = noted
    page = tmp_path / "report.html"
    proc = ledger(repo, "report", "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    assert "<th>note</th>" in html
    row_a = html[html.index(f'<tr data-run="{ids["a"]}">') :].split("</tr>", 1)[0]
    assert f"<td>{ESCAPED}</td>" in row_a
    assert "<b>flag" not in html


def test_a_name_that_differs_only_in_case_is_suggested_first() -> None:
    from ledger.runref import RunRef, _not_found
    from ledger.storage.listing import Listing

    names = {"1": "cfga-s2", "2": "CfgA-s1", "3": "cfgb-s1"}
    listing = Listing(manifests={rid: {"id": rid, "name": name, "started": rid} for rid, name in names.items()})
    err = _not_found(listing, RunRef.parse("cfga-s1"))  # item 6: `show cfga-s1` with a run named CfgA-s1
    assert err.hint is not None and err.hint.startswith("did you mean CfgA-s1 or ")
