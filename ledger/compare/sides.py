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
from dataclasses import dataclass, field
from typing import Any

from ledger.cache import LocalCache
from ledger.compare.diffcore import DiffReport, pauses_from_manifest
from ledger.compare.flags import RunFlag, degenerate_flags, groups_of
from ledger.compare.noise import ROLLOUT_AXIS, RunSeries, judge
from ledger.compare.replicas import find_replicas, session_notes, within_age
from ledger.config import DEFAULTS
from ledger.metrics.store import load_metrics
from ledger.metrics.table import MetricsTable
from ledger.runrecord import ManifestError, RunRecord
from ledger.storage.git import Repo
from ledger.storage.listing import Listing, load_listing, parse_manifest
from ledger.storage.listrow import fast_settings
from ledger.storage.store import RunEntry, read_file_at


@dataclass
class Sides:
    """Replicas found for A and for B (entries, oldest first), and how they were looked for."""

    replicas_a: list[RunEntry] = field(default_factory=list)
    replicas_b: list[RunEntry] = field(default_factory=list)
    any_age: bool = False
    max_age_hours: float = DEFAULTS.max_age_hours
    skipped: dict[str, str] = field(default_factory=dict)  # runs not considered, and why (over a read limit, ...)

    def key(self) -> list[str]:
        """What a cached report depends on: every replica's folder tree."""
        return [f"{e.id}:{e.tree}" for e in (*self.replicas_a, *self.replicas_b)] + [f"any_age={self.any_age}"]


def _manifest(repo: Repo, entry: RunEntry) -> dict[str, Any]:
    raw = read_file_at(repo, entry, "manifest.yaml")
    return parse_manifest(raw, entry.path) if raw is not None else {"id": entry.id}


def _settings(repo: Repo, entry: RunEntry, summary: Mapping[str, Any]) -> dict[str, Any]:
    """A candidate's summary with its settings (settings.json, else the manifest), read through
    the read limits (`storage/limits.py`): ManifestError when refused."""
    if entry.settings_blob is not None:
        return {**summary, "settings": fast_settings(repo.read_blob(entry.settings_blob), f"{entry.path}/settings.json")}
    return {**summary, **_manifest(repo, entry)}


def find_sides(
    repo: Repo,
    tip: str,
    listing: Listing | None,
    ea: RunEntry,
    eb: RunEntry,
    manifest: Callable[[RunEntry], Mapping[str, Any]],
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
    ma, mb = manifest(ea), manifest(eb)
    near = [
        m
        for m in listing.ordered()  # oldest first, the runs listings skip left out
        if m["id"] not in (ea.id, eb.id)
        and (m.get("status") or {}).get("state") == "finished"
        and (any_age or within_age(ma, m, max_age_hours) or within_age(mb, m, max_age_hours))
    ]
    sides = Sides(any_age=any_age, max_age_hours=max_age_hours, skipped=dict(listing.broken))
    candidates = []
    for m in near:
        try:
            candidates.append(_settings(repo, listing.entries[m["id"]], m))
        except ManifestError as exc:
            sides.skipped[m["id"]] = exc.message
    replays: dict[str, Any] = {}

    def replay_of(m: Mapping[str, Any]) -> tuple[Any, Any, Any]:
        if "replay" not in m:  # a summary: the step mapping is in the full manifest
            rid = str(m.get("id"))
            if rid not in replays:
                try:
                    replays[rid] = _manifest(repo, listing.entries[rid]) if rid in listing.entries else {}
                except ManifestError as exc:  # never a replica: its source is unknown
                    replays[rid], sides.skipped[rid] = {}, exc.message
            m = replays[rid]
        record = RunRecord.partial(m, str(m.get("id")))
        if record.replay is None:
            return record.replay_of, None, None
        return record.replay_of, record.replay.mode, record.replay.mapping

    # each candidate's own output settings (paths holding its id), found once for both sides
    extras = [sorted(run_ignored(m.get("settings") or {}, str(m["id"]))) for m in candidates]
    for target, entry, out in ((ma, ea, sides.replicas_a), (mb, eb, sides.replicas_b)):
        own = sorted(run_ignored(target.get("settings") or {}, entry.id))
        for m, extra in zip(candidates, extras):
            if find_replicas(target, [m], [*ignore, *own, *extra], keys, max_age_hours, any_age, (ea.id, eb.id), replay_of):
                out.append(listing.entries[str(m["id"])])
    cache.write_pickle(key, sides)
    return sides


def _compared_steps(table_a: Any, table_b: Any) -> set[int] | None:
    if table_a is None or table_b is None:
        return None
    common = set(table_a.rows) & set(table_b.rows)
    return common or None


def attach_noise(
    report: DiffReport,
    repo: Repo,
    sides: Sides,
    runs: tuple[tuple[RunEntry, Mapping[str, Any], MetricsTable | None], tuple[RunEntry, Mapping[str, Any], MetricsTable | None]],
) -> None:
    """Fill `report.noise` (every timing and learning metric judged) and `report.flags`; `runs`:
    A and B, each with its manifest and metrics (as the report was built from)."""
    if report.refused:
        return
    repeat = report.repeat
    (ea, ma, table_a), (eb, mb, table_b) = runs
    runs_a = [(ea, ma, table_a), *_readable(repo, [] if repeat else sides.replicas_a, report)]
    runs_b = [(eb, mb, table_b), *_readable(repo, [] if repeat else sides.replicas_b, report)]
    side_a = [RunSeries(e.id, table, pauses_from_manifest(m)) for e, m, table in runs_a]
    side_b = [RunSeries(e.id, table, pauses_from_manifest(m)) for e, m, table in runs_b]
    metrics = [(t.metric, ROLLOUT_AXIS) for t in report.timing] + [(r.metric, r.axis) for r in report.learning]
    noise = judge(metrics, side_a, side_b, repeat=repeat)
    noise.any_age, noise.max_age_hours = sides.any_age, sides.max_age_hours
    others = [("B", mb)] + [(f"A's replica {e.id}", m) for e, m, _ in runs_a[1:]] + [(f"B's replica {e.id}", m) for e, m, _ in runs_b[1:]]
    noise.session = session_notes(ma, others)
    report.noise = noise
    steps = _compared_steps(side_a[0].table, side_b[0].table)
    flags: list[RunFlag] = []
    for series, (_entry, m, _table) in zip((*side_a, *side_b), (*runs_a, *runs_b)):
        flags += degenerate_flags(series.run, series.table, steps, groups_of(m.get("settings")))
    report.flags = flags


def _readable(repo: Repo, replicas: list[RunEntry], report: DiffReport) -> list[tuple[RunEntry, Mapping[str, Any], MetricsTable | None]]:
    """The replicas with their manifests and metrics; one whose record is refused (over a read
    limit) is left out, with a warning naming it."""
    out: list[tuple[RunEntry, Mapping[str, Any], MetricsTable | None]] = []
    for entry in replicas:
        try:
            out.append((entry, _manifest(repo, entry), load_metrics(repo, entry)))
        except ManifestError as exc:
            report.warnings.append(f"replica {entry.id} left out: {exc.message}")
    return out


def baseline_session(repo: Repo, listing: Listing | None, tip: str, report: DiffReport, mb: Mapping[str, Any]) -> None:
    """For a refused diff: whether the suggested baseline ran in another session than B."""
    rid = report.suggested_baseline
    if not rid:
        return
    listing = listing or load_listing(repo, tip)
    entry = listing.entries.get(rid)
    if entry is not None:
        report.baseline_session = session_notes(mb, [(f"suggested baseline {rid}", _manifest(repo, entry))], "B")


def replica_tables(repo: Repo, report: DiffReport, listing: Listing) -> tuple[list[MetricsTable | None], list[MetricsTable | None]]:
    """The metrics of every run of each side (A or B first), for the diff page's replica bands."""
    if report.noise is None:
        return [], []
    out: tuple[list[MetricsTable | None], list[MetricsTable | None]] = ([], [])
    for ids, tables in ((report.noise.replicas_a, out[0]), (report.noise.replicas_b, out[1])):
        for rid in ids:
            entry = listing.entries.get(rid)
            tables.append(load_metrics(repo, entry) if entry is not None else None)
    return out
