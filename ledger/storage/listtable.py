"""The default `ledger list` table, from each run's kept cells (`commands/listing.py` prints it):
made whole (`default_table`), or after new runs from the table kept for the tree before
(`patched_table`); `layout` lays out any listing table, `render_list`'s too."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter, itemgetter

from ledger.storage.listview import TableRow
from ledger.termstyle import printable_cell

BASE_HEADER = ("ID", "NAME", "STATE", "EXIT", "TIME", "PAUSED", "STARTED")
NO_MATCH = "no runs match (`ledger list --archived` shows archived runs too)\n"
NO_RUNS = "no runs recorded yet (record one with `ledger run -- CMD`)\n"


def default_table(rows: list[TableRow], total: int) -> str:
    """`render_list` of a listing with no option but `--where` and no run in progress (the runs
    of `rows` not archived, newest first) from each run's kept cells alone (`Listing.table_rows`
    or `passing_table`, oldest first); `total`: how many readable runs there are."""
    shown = [r for r in reversed(rows) if not r.archived]
    if not shown:
        return NO_MATCH if total else NO_RUNS
    tags, note = any(r.tags for r in shown), any(r.note for r in shown)
    header = [*BASE_HEADER, *(["TAGS"] if tags else []), *(["NOTE"] if note else [])]
    lines = _picked(shown, tags, note)
    return layout(header, lines, any(r.replay_of for r in shown))


def _picked(rows: list[TableRow], tags: bool, note: bool) -> list[tuple[str, ...]]:
    """Each row's cells the table shows: the first 7, then TAGS and NOTE (a run's cells 7 and 8)
    where the table has those columns (one `itemgetter` a table: 66,670 rows in ~30 ms)."""
    pick = itemgetter(*range(7), *(7,) * tags, *(8,) * note)
    return list(map(pick, map(attrgetter("cells"), rows)))


def patched_table(kept: str, added: list[TableRow]) -> str | None:
    """`default_table` of the runs of `kept` (a default table) and `added` (oldest first, each
    newer than every run `kept` shows), made by putting the added runs' lines on top of `kept`:
    what a new run or a pull of new runs changes. None where the added lines would change the
    layout (a cell wider than its column, a TAGS or NOTE column or the replays' footnote that
    `kept` lacks): then the table is made whole."""
    shown = [r for r in reversed(added) if not r.archived]
    if not shown:
        return kept
    header, _nl, body = kept.partition("\n")
    names = header.split()
    tags, note = "TAGS" in names, "NOTE" in names
    if tuple(names) != (*BASE_HEADER, *(["TAGS"] if tags else []), *(["NOTE"] if note else [])):
        return None  # NO_RUNS, NO_MATCH, or not a table of this layout
    if (any(r.tags for r in shown) and not tags) or (any(r.note for r in shown) and not note):
        return None
    if any(r.replay_of for r in shown) and not kept.endswith(f"\n{REPLAY_NOTE}\n"):
        return None
    starts, pos = [], 0
    for name in names:
        pos = header.index(name, pos)
        starts.append(pos)
        pos += len(name)
    widths = [b - a - 2 for a, b in zip(starts, starts[1:])]
    lines = _picked(shown, tags, note)
    if any(len(cell) > width for line in lines for cell, width in zip(line, widths)):
        return None
    return "\n".join([header, *_lines(widths, lines), body])


REPLAY_NOTE = "* a replay of another run (with how its training matched: bitwise, close or diverged)"


def layout(header: list[str], lines: Sequence[Sequence[str]], replays: bool) -> str:
    """The table: the header, then a line a run (printable cells), each column as wide as its
    widest cell but the last; the replays' footnote under it."""
    table = [tuple(printable_cell(c) for c in header), *lines]
    columns = min(map(len, table))  # as a transposition would: the shortest row's count
    widths = [max(map(len, map(itemgetter(i), table))) for i in range(columns - 1)]
    out = _lines(widths, table)
    if replays:
        out.append(REPLAY_NOTE)
    return "\n".join(out) + "\n"


def _lines(widths: list[int], rows: Sequence[Sequence[str]]) -> list[str]:
    """Each row as a table line: every cell but the last padded to its column's width, two
    spaces between columns (%-formatting: half of str.format's time a line)."""
    pads = "  ".join(f"%-{w}s" for w in widths) + "  %s"
    return list(map(str.rstrip, map(pads.__mod__, map(tuple, rows))))  # in C: no Python call a line
