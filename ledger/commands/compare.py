"""`ledger compare RUN RUN [RUN...]`: the settings that differ across runs (only those) and their
summary metrics side by side; `--html FILE` overlays every logged metric (`compare/comparepage.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ledger.compare.changes import changed_settings
from ledger.errors import UsageError
from ledger.fsutil import write_atomic
from ledger.globs import matcher
from ledger.metrics.table import MetricsTable
from ledger.opening import open_branch
from ledger.runref import resolve
from ledger.storage.listing import listing_at
from ledger.storage.listrow import ListFields, fields_of
from ledger.storage.summary import MetricSummary
from ledger.textfmt import ABSENT, is_absent, note_cell, show_value
from ledger.understand.settings import DEFAULT_IGNORE


class ComparedRun(msgspec.Struct, frozen=True):
    """One run's column: who it is (its listing fields), its settings and its summary metrics."""

    who: ListFields
    settings: dict[str, object]  # setting name -> whatever JSON value the run recorded
    metrics: Mapping[str, MetricSummary]

    @classmethod
    def of(cls, record: dict[str, Any]) -> ComparedRun:
        """The column of a run read by `Listing.record_of` (its listing fields, settings, metrics)."""
        settings: dict[str, object] = record.get("settings") or {}
        metrics: Mapping[str, MetricSummary] = record.get("metrics") or {}
        return cls(fields_of(record), settings, metrics)

    @property
    def label(self) -> str:
        """The column head: the run's name, else its id."""
        return str(self.who.name or self.who.id)

    def to_json(self) -> dict[str, object]:
        """Who the run is, as `--json` writes it (id, name, state, start, tags, note, tracker links)."""
        w = self.who
        return {"id": w.id, "name": w.name, "state": w.state, "started": w.started, "tags": w.tags, "note": w.note, "trackers": w.trackers}


class CompareResult(msgspec.Struct):
    """Runs in the order named, the settings that differ (one value per run), their summary metrics."""

    runs: list[ComparedRun]
    settings: dict[str, list[Any]]  # only the settings that are not the same in every run
    metrics: dict[str, list[MetricSummary | None]]  # per metric, per run: last/min/max and steps
    tables: list[MetricsTable | None] = msgspec.field(default_factory=list)  # per-step metrics, for --html

    def to_json(self) -> dict[str, object]:
        return {
            "runs": [r.to_json() for r in self.runs],
            "settings": {k: [None if is_absent(v) else v for v in vs] for k, vs in self.settings.items()},
            "metrics": self.metrics,
        }


def compare_runs(start: Path, names: list[str], metric_globs: tuple[str, ...] = (), with_tables: bool = False) -> CompareResult:
    """Resolve every run first, then read their settings and summary metrics (and per-step tables)."""
    if len(names) < 2:
        raise UsageError("compare needs at least two runs", "ledger compare RUN RUN [RUN...]")
    repo, cfg, tip = open_branch(start)
    listing = listing_at(repo, tip)  # the named runs are read, never the whole ledger
    entries = [resolve(repo, tip, n, listing) for n in names]
    if len({e.id for e in entries}) < len(entries):
        raise UsageError("the same run is named twice", "name each run once")
    runs = [ComparedRun.of(listing.record_of(e)) for e in entries]
    differ = _differing([r.settings for r in runs], [*DEFAULT_IGNORE, *cfg.ignore])
    result = CompareResult(
        runs=runs,
        settings={k: [r.settings.get(k, ABSENT) for r in runs] for k in sorted(differ)},
        metrics={n: [r.metrics.get(n) for r in runs] for n in _metric_names(runs, metric_globs)},
    )
    if with_tables:
        from ledger.metrics.store import load_metrics

        result.tables = [load_metrics(repo, e) for e in entries]
    return result


def _metric_names(runs: list[ComparedRun], globs: tuple[str, ...]) -> list[str]:
    """The summary metrics any of the runs has, those the globs name (every one without globs)."""
    names = sorted({k for r in runs for k in r.metrics})
    return list(filter(matcher(globs), names)) if globs else names


def _differing(settings: list[dict[str, object]], ignore: list[str]) -> list[str]:
    """The settings that are not the same in every run (each run against the first)."""
    differ: list[str] = []
    for other in settings[1:]:
        for change in changed_settings(settings[0], other, ignore):
            if change.name not in differ:
                differ.append(change.name)
    return differ


def _num(value: Any) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:.4g}"


def render_compare(result: CompareResult) -> str:
    """Two tables: differing settings, then summary metrics (last, and min/max under it)."""
    labels = [r.label for r in result.runs]
    rows: list[list[str]] = [["", *labels], ["id", *(r.who.id for r in result.runs)]]
    if any(r.who.note for r in result.runs):
        rows.append(["note", *(note_cell(r.who.note) for r in result.runs)])
    if result.settings:
        rows.append(["settings that differ:", *[""] * len(labels)])
        rows += [[f"  {k}", *(show_value(v, 40) for v in vs)] for k, vs in result.settings.items()]
    else:
        rows.append(["(every setting is the same)", *[""] * len(labels)])
    if result.metrics:
        rows.append(["metrics (last; min..max):", *[""] * len(labels)])
        for name, per_run in result.metrics.items():
            rows.append([f"  {name}", *(_num(s.get("last")) if s else "-" for s in per_run)])
            rows.append(["", *(f"{_num(s.get('min'))}..{_num(s.get('max'))}" if s else "" for s in per_run)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows) + "\n"


def write_compare_page(result: CompareResult, out: Path, metric_globs: tuple[str, ...] = (), group_by: str | None = None) -> None:
    """`--html`: every logged metric (or those the globs name) of the runs, one chart each."""
    from ledger.pages.comparepage import CompareRun, compare_page, metric_names

    if group_by is not None and not any(group_by in r.settings for r in result.runs):
        raise UsageError(
            f"--group-by: no run has a setting '{group_by}'", "name a setting the runs have (`ledger compare` lists those that differ)"
        )
    tables = result.tables or [None] * len(result.runs)
    runs = [CompareRun(r.label, r.who.id, r.settings, t, r.who.trackers, r.who.note) for r, t in zip(result.runs, tables)]
    names = metric_names(runs)
    if metric_globs:
        names = list(filter(matcher(metric_globs), names))
    write_atomic(out, compare_page(runs, names, result.settings, group_by))
