"""The default `ledger list` table, made from each run's kept cells alone (`default_table`), is
byte for byte the table the general path renders (`render_list`) for the same runs: every subset
of runs with tags (one tagged `-`, which reads like an empty cell), a note, a replay, an archived
run, and none."""

from __future__ import annotations

import itertools

import pytest

from ledger.commands.listing import ListResult, default_table, render_list
from ledger.storage.listrow import FullRow, ListFields, table_cells
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
