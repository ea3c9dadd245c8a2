"""`ledger compare RUN RUN [RUN...]`: the settings that differ across runs (only those) and their
summary metrics side by side; `--html FILE` overlays every logged metric (`compare/comparepage.py`)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.compare.changes import changed_settings
from ledger.errors import UsageError
from ledger.fsutil import write_atomic
from ledger.metrics.table import MetricsTable
from ledger.opening import open_branch
from ledger.runref import resolve
from ledger.storage.listing import listing_at
from ledger.textfmt import ABSENT, is_absent, note_cell, show_value
from ledger.understand.settings import DEFAULT_IGNORE


@dataclass
class CompareResult:
    """Runs in the order named, the settings that differ (one value per run), their summary metrics."""

    runs: list[dict[str, Any]]  # id, name, state, started, tags, note
    settings: dict[str, list[Any]]  # only the settings that are not the same in every run
    metrics: dict[str, list[dict[str, Any] | None]]  # per metric, per run: last/min/max and steps
    tables: list[MetricsTable | None] = field(default_factory=list)  # per-step metrics, for --html
    all_settings: list[dict[str, Any]] = field(default_factory=list)  # for --group-by

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
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
    ms = [listing.record_of(e) for e in entries]
    settings = [m.get("settings") or {} for m in ms]
    differ = _differing(settings, [*DEFAULT_IGNORE, *cfg.ignore])
    names_metrics = _metric_names(ms, metric_globs)
    result = CompareResult(
        runs=[_run_info(m) for m in ms],
        settings={k: [s.get(k, ABSENT) for s in settings] for k in sorted(differ)},
        metrics={n: [(m.get("metrics") or {}).get(n) for m in ms] for n in names_metrics},
        all_settings=settings,
    )
    if with_tables:
        from ledger.metrics.store import load_metrics

        result.tables = [load_metrics(repo, e) for e in entries]
    return result


def _metric_names(ms: list[dict[str, Any]], globs: tuple[str, ...]) -> list[str]:
    """The summary metrics any of the runs has, those the globs name (every one without globs)."""
    names = sorted({k for m in ms for k in (m.get("metrics") or {})})
    return [n for n in names if any(fnmatch.fnmatchcase(n, g) for g in globs)] if globs else names


def _differing(settings: list[dict[str, Any]], ignore: list[str]) -> list[str]:
    """The settings that are not the same in every run (each run against the first)."""
    differ: list[str] = []
    for other in settings[1:]:
        for change in changed_settings(settings[0], other, ignore):
            if change.name not in differ:
                differ.append(change.name)
    return differ


def _run_info(m: dict[str, Any]) -> dict[str, Any]:
    """A run's column: who it is (id, name, state, start, tags, note, tracker links)."""
    return {
        "id": m["id"],
        "name": m.get("name"),
        "state": (m.get("status") or {}).get("state"),
        "started": m.get("started"),
        "tags": m.get("tags") or [],
        "note": m.get("note"),
        "trackers": m.get("trackers"),
    }


def _num(value: Any) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:.4g}"


def run_label(run: dict[str, Any]) -> str:
    """A run's column head: its name, else its id."""
    return str(run.get("name") or run["id"])


def render_compare(result: CompareResult) -> str:
    """Two tables: differing settings, then summary metrics (last, and min/max under it)."""
    labels = [run_label(r) for r in result.runs]
    rows: list[list[str]] = [["", *labels], ["id", *(r["id"] for r in result.runs)]]
    if any(r.get("note") for r in result.runs):
        rows.append(["note", *(note_cell(r.get("note")) for r in result.runs)])
    if result.settings:
        rows.append(["settings that differ:", *[""] * len(labels)])
        rows += [[f"  {k}", *(show_value(v, 40) for v in vs)] for k, vs in result.settings.items()]
    else:
        rows.append(["(every setting is the same)", *[""] * len(labels)])
    if result.metrics:
        rows.append(["metrics (last; min..max):", *[""] * len(labels)])
        for name, per_run in result.metrics.items():
            rows.append([f"  {name}", *(_num((s or {}).get("last")) if s else "-" for s in per_run)])
            rows.append(["", *(f"{_num(s.get('min'))}..{_num(s.get('max'))}" if s else "" for s in per_run)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows) + "\n"


def write_compare_page(result: CompareResult, out: Path, metric_globs: tuple[str, ...] = (), group_by: str | None = None) -> None:
    """`--html`: every logged metric (or those the globs name) of the runs, one chart each."""
    from ledger.pages.comparepage import CompareRun, compare_page, metric_names

    if group_by is not None and not any(group_by in s for s in result.all_settings):
        raise UsageError(
            f"--group-by: no run has a setting '{group_by}'", "name a setting the runs have (`ledger compare` lists those that differ)"
        )
    tables = result.tables or [None] * len(result.runs)
    runs = [
        CompareRun(run_label(r), r["id"], s, t, r.get("trackers"), r.get("note"))
        for r, s, t in zip(result.runs, result.all_settings, tables)
    ]
    names = metric_names(runs)
    if metric_globs:
        names = [n for n in names if any(fnmatch.fnmatchcase(n, g) for g in metric_globs)]
    write_atomic(out, compare_page(runs, names, result.settings, group_by))
