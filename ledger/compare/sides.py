"""The two sides of `ledger diff A B`: each run with its recorded replicas, and the noise section.

`find_sides` reads the branch: the runs' summaries, then the settings of only the runs that can be
replicas (finished, started within `diff: max_age_hours` of A or B unless `--any-age`), then the
full manifests of the few replays among them (a replay's step mapping is no setting). The answer
depends on the branch tip, so it is cached under the tip (`.git/ledger/replicas/`): a diff run
again on the same tip reads nothing but the two runs. `attach_noise` fills a report's `noise`
and `flags` from A, B and those replicas (`ledger.compare.noise`, `ledger.compare.flags`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import msgspec

from ledger.cache import LocalCache
from ledger.compare.diffcore import DiffReport, pauses_from_manifest
from ledger.compare.flags import RunFlag, degenerate_flags, groups_of
from ledger.compare.noise import ROLLOUT_AXIS, RunSeries, judge
from ledger.compare.replicas import Candidate, candidate, find_replicas, session_notes, within_age
from ledger.config import DEFAULTS
from ledger.metrics.store import load_metrics
from ledger.metrics.table import MetricsTable
from ledger.runrecord import ManifestError, RunRecord
from ledger.storage.git import Repo
from ledger.storage.listing import Listing, load_listing, parse_record
from ledger.storage.listrow import fast_settings, fields_of
from ledger.storage.store import RunEntry, read_file_at
from ledger.timefmt import parse_iso


class Sides(msgspec.Struct):
    """Replicas found for A and for B (entries, oldest first), and how they were looked for."""

    replicas_a: list[RunEntry] = msgspec.field(default_factory=list)
    replicas_b: list[RunEntry] = msgspec.field(default_factory=list)
    any_age: bool = False
    max_age_hours: float = DEFAULTS.diff.max_age_hours
    skipped: dict[str, str] = msgspec.field(default_factory=dict)  # runs not considered, and why (over a read limit, ...)

    def key(self) -> list[str]:
        """What a cached report depends on: every replica's folder tree."""
        return [f"{e.id}:{e.tree}" for e in (*self.replicas_a, *self.replicas_b)] + [f"any_age={self.any_age}"]


class Recorded(NamedTuple):
    """A run's manifest, read once: typed (`record`), and as the plain data the comparisons of
    settings and sessions (`ledger.compare.replicas`, `diffcore`) and the pages read (`data`)."""

    record: RunRecord
    data: Mapping[str, Any]


def recorded(repo: Repo, entry: RunEntry) -> Recorded:
    """A run's manifest (a folder without one: a record holding only its id)."""
    raw = read_file_at(repo, entry, "manifest.yaml")
    return Recorded(*parse_record(raw, entry.path)) if raw is not None else Recorded(RunRecord(id=entry.id), {"id": entry.id})


def _settings(repo: Repo, entry: RunEntry, summary: Mapping[str, Any]) -> Mapping[str, Any]:
    """A candidate's summary with its settings (settings.json, else the manifest), read through
    the read limits (`storage/limits.py`): ManifestError when refused."""
    if entry.settings_blob is not None:
        return {**summary, "settings": fast_settings(repo.read_blob(entry.settings_blob), f"{entry.path}/settings.json")}
    return {**summary, **recorded(repo, entry).data}


def find_sides(
    repo: Repo,
    tip: str,
    listing: Listing | None,
    ea: RunEntry,
    eb: RunEntry,
    manifest: Callable[[RunEntry], Recorded],
    ignore: Sequence[str],
    keys: Sequence[str],
    max_age_hours: float,
    any_age: bool,
    run_ignored: Callable[[Mapping[str, Any], str], set[str]] = lambda settings, run_id: set(),
) -> Sides:
    """The replicas of A and of B among the runs at `tip` (see the module docstring).

    `manifest` reads a run's full manifest (called for A and B only when the search is not cached);
    `run_ignored(settings, run id)` names a run's settings that are not settings (paths holding its id).
    """
    cache = LocalCache(repo.common_dir, "replicas")
    key = hashlib.sha256(json.dumps([tip, ea.tree, eb.tree, list(ignore), list(keys), max_age_hours, any_age]).encode()).hexdigest()
    cached = cache.read_pickle(key, Sides)
    if cached is not None:
        return cached
    listing = listing or load_listing(repo, tip)
    for entry in (ea, eb):
        listing.refuse_broken(entry.id)
    (ra, ma), (rb, mb) = manifest(ea), manifest(eb)
    times = [t for t in (parse_iso(ma.get("started")), parse_iso(mb.get("started"))) if t is not None]
    if any_age:
        rows = listing.ordered_entries()
    else:  # what the index says may be near, each checked here
        rows = listing.started_near(times, max_age_hours)
    near: list[tuple[Mapping[str, Any], RunEntry]] = []  # (listing fields, entry), oldest first
    for listed, entry in rows:
        row = fields_of(listed)
        if row.id in (ea.id, eb.id) or row.state != "finished":
            continue
        if any_age or within_age(ma, listed, max_age_hours) or within_age(mb, listed, max_age_hours):
            near.append((listed, entry))
    sides = Sides(any_age=any_age, max_age_hours=max_age_hours, skipped=dict(listing.broken))
    candidates: list[Candidate] = []  # read and prepared once for both sides
    entries: dict[str, RunEntry] = {}
    for summary, entry in near:
        try:
            fields = _settings(repo, entry, summary)
        except ManifestError as exc:
            sides.skipped[entry.id] = exc.message
            continue
        # its own output settings (paths holding its id) are no settings
        candidates.append(candidate(fields, run_ignored(fields.get("settings") or {}, entry.id)))
        entries[entry.id] = entry
    fetched: dict[str, RunRecord] = {}

    def replay_of(m: Mapping[str, Any]) -> tuple[Any, Any, Any]:
        """A replay's (source, mode, step mapping): a summary lacks the mapping, so its run's
        full manifest is read, once."""
        rid = str(m.get("id"))
        if "replay" in m:
            record = RunRecord.partial(m, rid)
        else:
            if rid not in fetched:
                try:
                    entry = entries.get(rid) or listing.entry(rid)
                    fetched[rid] = recorded(repo, entry).record if entry is not None else RunRecord()
                except ManifestError as exc:  # never a replica: its source is unknown
                    fetched[rid], sides.skipped[rid] = RunRecord(), exc.message
            record = fetched[rid]
        if record.replay is None:
            return record.replay_of, None, None
        return record.replay_of, record.replay.mode, record.replay.mapping

    for target, record, entry, out in ((ma, ra, ea, sides.replicas_a), (mb, rb, eb, sides.replicas_b)):
        own = sorted(run_ignored(record.settings, entry.id))
        found = find_replicas(target, candidates, [*ignore, *own], keys, max_age_hours, any_age, (ea.id, eb.id), replay_of)
        out.extend(entries[str(m.get("id"))] for m in found)
    cache.write_pickle(key, sides)
    return sides


def _compared_steps(table_a: Any, table_b: Any) -> set[int] | None:
    if table_a is None or table_b is None:
        return None
    common = set(table_a.rows) & set(table_b.rows)
    return common or None


Side = tuple[RunEntry, Recorded, MetricsTable | None]  # a run, its manifest and its metrics


def attach_noise(report: DiffReport, repo: Repo, sides: Sides, runs: tuple[Side, Side]) -> None:
    """Fill `report.noise` (every timing and learning metric judged) and `report.flags`; `runs`:
    A and B, each with its manifest and metrics (as the report was built from)."""
    if report.refused:
        return
    repeat = report.repeat
    (ea, ma, table_a), (eb, mb, table_b) = runs
    runs_a = [(ea, ma, table_a), *_readable(repo, [] if repeat else sides.replicas_a, report)]
    runs_b = [(eb, mb, table_b), *_readable(repo, [] if repeat else sides.replicas_b, report)]
    side_a = [RunSeries(e.id, table, pauses_from_manifest(m.data)) for e, m, table in runs_a]
    side_b = [RunSeries(e.id, table, pauses_from_manifest(m.data)) for e, m, table in runs_b]
    metrics = [(t.metric, ROLLOUT_AXIS) for t in report.timing] + [(r.metric, r.axis) for r in report.learning]
    noise = judge(metrics, side_a, side_b, repeat=repeat)
    noise.any_age, noise.max_age_hours = sides.any_age, sides.max_age_hours
    others = [("B", mb.data)] + [(f"A's replica {e.id}", m.data) for e, m, _ in runs_a[1:]]
    others += [(f"B's replica {e.id}", m.data) for e, m, _ in runs_b[1:]]
    noise.session = session_notes(ma.data, others)
    report.noise = noise
    steps = _compared_steps(side_a[0].table, side_b[0].table)
    flags: list[RunFlag] = []
    for series, (_entry, m, _table) in zip((*side_a, *side_b), (*runs_a, *runs_b)):
        flags += degenerate_flags(series.run, series.table, steps, groups_of(m.record.settings))
    report.flags = flags


def _readable(repo: Repo, replicas: list[RunEntry], report: DiffReport) -> list[Side]:
    """The replicas with their manifests and metrics; one whose record is refused (over a read
    limit) is left out, with a warning naming it."""
    out: list[Side] = []
    for entry in replicas:
        try:
            out.append((entry, recorded(repo, entry), load_metrics(repo, entry)))
        except ManifestError as exc:
            report.warnings.append(f"replica {entry.id} left out: {exc.message}")
    return out


def baseline_session(repo: Repo, listing: Listing | None, tip: str, report: DiffReport, mb: Mapping[str, Any]) -> None:
    """For a refused diff: whether the suggested baseline ran in another session than B."""
    rid = report.suggested_baseline
    if not rid:
        return
    listing = listing or load_listing(repo, tip)
    entry = listing.entry(rid)
    if entry is not None:
        report.baseline_session = session_notes(mb, [(f"suggested baseline {rid}", recorded(repo, entry).data)], "B")


def replica_tables(repo: Repo, report: DiffReport, listing: Listing) -> tuple[list[MetricsTable | None], list[MetricsTable | None]]:
    """The metrics of every run of each side (A or B first), for the diff page's replica bands."""
    if report.noise is None:
        return [], []
    out: tuple[list[MetricsTable | None], list[MetricsTable | None]] = ([], [])
    for ids, tables in ((report.noise.replicas_a, out[0]), (report.noise.replicas_b, out[1])):
        for rid in ids:
            entry = listing.entry(rid)
            tables.append(load_metrics(repo, entry) if entry is not None else None)
    return out
