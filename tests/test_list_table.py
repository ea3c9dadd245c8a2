"""The default `ledger list` table, made from each run's kept cells alone (`default_table`), is
byte for byte the table the general path renders (`render_list`) for the same runs: every subset
of runs with tags (one tagged `-`, which reads like an empty cell), a note, a replay, an archived
run, and none."""

from __future__ import annotations

import itertools
import json

import pytest

from ledger.commands.listing import ListResult, render_list
from ledger.storage.listrow import FullRow, ListFields, table_cells
from ledger.storage.listtable import default_table
from ledger.storage.listtables import pack
from ledger.storage.listview import TableRow

RUNS = [
    ListFields("20261201-000000-aaaa", name="plain", state="finished", exit_code=0, duration_s=1.5, started="2026-12-01T00:00:00Z"),
    ListFields("20261201-000001-bbbb", name="tagged", state="failed", exit_code=1, started="2026-12-01T00:00:01Z", tags=["best", "x"]),
    ListFields("20261201-000002-cccc", name=None, state="finished", exit_code=0, started="2026-12-01T00:00:02Z", tags=["-"]),
    ListFields("20261201-000003-dddd", name="noted", state="finished", started="2026-12-01T00:00:03Z", note="why\nand more"),
    ListFields("20261201-000004-eeee", name="again", state="finished", started="2026-12-01T00:00:04Z", replay_of="aaaa", fidelity="close"),
    ListFields("20261201-000005-ffff", name="old\tname", state="finished", started="2026-12-01T00:00:05Z", archived=True, note="hidden"),
]


def _general(runs: list[ListFields]) -> str:
    """What `list_runs` renders for the default filter through the general path (`-n` and the like)."""
    kept = [f for f in runs if not f.archived]
    rows = [FullRow(f, {}, {}) for f in reversed(kept)]
    result = ListResult(rows, {}, cells={f.id: table_cells(f) for f in kept})
    result.filtered = len(kept) < len(runs)
    return render_list(result)


@pytest.mark.parametrize("size", range(len(RUNS) + 1))
def test_the_default_table_is_the_general_table(size: int) -> None:
    for runs in itertools.combinations(RUNS, size):
        rows = [TableRow(table_cells(f), f.tags, f.note, f.replay_of, f.archived) for f in runs]
        assert default_table(rows, len(rows)) == _general(list(runs)), [f.id for f in runs]


def test_list_json_writes_a_lone_surrogate_escaped_and_every_line_parses() -> None:
    """`list --json` encodes the listing fields with msgspec, which refuses a lone surrogate (a
    pulled record's "\\ud800" in its name): that object is written by json, escaped, as before."""
    plain, odd = RUNS[0], ListFields("20261201-000009-9999", name="bad\ud800name", started="2026-12-01T00:00:09Z")
    texts = {f.id: (pack({"lr": 1e-6}), pack({})) for f in (plain, odd)}
    result = ListResult([FullRow(odd, {}, {}), FullRow(plain, {}, {})], {}, with_settings=True, texts=texts)
    lines = list(result.json_lines())
    assert [json.loads(line)["name"] for line in lines] == ["bad\ud800name", "plain"]
    assert all(json.loads(line)["settings"] == {"lr": 1e-6} for line in lines)
    assert b"\\ud800" in lines[0]
