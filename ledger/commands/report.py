"""`ledger report [RUN...] --html FILE`: the runs table as one self-contained page."""

from __future__ import annotations

from pathlib import Path

import msgspec

from ledger.compare.changes import change_log
from ledger.compare.flags import groups_of
from ledger.errors import UsageError
from ledger.fsutil import write_atomic
from ledger.metrics.store import load_metrics
from ledger.opening import open_branch
from ledger.pages.html import ReportRow, report_page
from ledger.runref import resolve
from ledger.storage.listing import load_listing
from ledger.storage.listrow import fields_of
from ledger.textfmt import change_text, plural
from ledger.understand.settings import DEFAULT_IGNORE

DEFAULT_RUNS = 50  # without RUN arguments: the newest this many (curves read each run's metrics)


class ReportResult(msgspec.Struct):
    """The page written, how many runs it shows, and the runs left out as unreadable (id -> why)."""

    path: Path
    runs: int
    skipped: dict[str, str] = msgspec.field(default_factory=dict)


def write_report(start: Path, names: list[str], out: Path) -> ReportResult:
    """Write the runs table (newest first) with change sets, status, pauses and small curves."""
    repo, cfg, tip = open_branch(start)
    listing = load_listing(repo, tip, with_settings=True)
    ordered = listing.ordered()
    if not ordered:
        raise UsageError("no runs recorded yet", "record one with `ledger run -- CMD`")
    changes = dict(change_log(ordered, [*DEFAULT_IGNORE, *cfg.ignore]))
    runs = [(fields_of(m), m) for m in ordered]  # (listing fields, typed; the run's listed data with its settings)
    if names:
        wanted = {resolve(repo, tip, name, listing).id for name in names}
        chosen = [(who, m) for who, m in runs if who.id in wanted]
    else:
        chosen = runs[-DEFAULT_RUNS:]
    rows = []
    for who, m in reversed(chosen):  # newest first, as `ledger list`
        entry = listing.entries.get(who.id) or resolve(repo, tip, who.id, listing)
        # the change set as `ledger list --changed` writes it (short SHAs, long values cut)
        text = change_text([{"name": c.name, "a": c.a, "b": c.b} for c in changes.get(who.id, [])])
        groups = groups_of(m.get("settings"))
        fields = msgspec.structs.asdict(who)  # as `list --json` writes the run
        rows.append(ReportRow(fields, "(first run)" if m is ordered[0] else text, load_metrics(repo, entry), groups))
    heading = f"ledger: {plural(len(rows), 'run')}"
    write_atomic(out, report_page(rows, heading))
    return ReportResult(out, len(rows), dict(listing.broken))
