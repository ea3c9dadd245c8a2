"""`ledger diff A B` computed: one changed setting, its git diff, and step-aligned timing.

The verb, `ledger.commands.diff`, asks the kept answers first (`ledger.compare.answer`); this
module is imported only when there is none, since its imports are most of a repeated diff's
time. It sits in its own layer just below the commands (it reads what `record/` and `pages/`
offer, as a command does), so that the verb importing it is no command importing another."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.cache import LocalCache
from ledger.compare.answer import DiffOutput, GitDiff, Kept, Question, git_diff_text, keep, with_git_diff
from ledger.compare.diffcore import DiffReport, build_report
from ledger.compare.render import render_text
from ledger.compare.replicas import replica_globs
from ledger.compare.sides import Recorded, Sides, attach_noise, baseline_session, find_sides, replica_tables
from ledger.config import CONFIG_NAME
from ledger.errors import EXIT_OK, EXIT_REFUSED, LedgerError, RunNotFound, UsageError
from ledger.fsutil import write_atomic
from ledger.manifest import ManifestError
from ledger.metrics.store import load_metrics
from ledger.opening import open_branch
from ledger.runrecord import RunRecord
from ledger.runref import RunRef, resolve
from ledger.storage.answers import config_fingerprint, repository
from ledger.storage.git import Repo, has_object, merge_base
from ledger.storage.listing import Listing, load_listing, parse_record, with_meta
from ledger.storage.store import RunEntry, branch_ref, commit_of_run, read_file_at
from ledger.understand.settings import DEFAULT_IGNORE, ignored_settings

if TYPE_CHECKING:  # a diff of two recorded runs, the common case, never needs these modules
    from ledger.record.live import LiveRun


CODE_SETTINGS = ("code", "code.commit", "code.patch", "code.tree")


def _git_diffs(repo: Repo, tip: str, ea: RunEntry, eb: RunEntry, code_files: list[str] | None) -> list[GitDiff]:
    """The manifests' diff, plus the code diff of `code_files` (None: every file outside runs/)."""
    out: list[GitDiff] = [("manifest diff:\n", ["diff", "--no-color", f"{tip}:{ea.path}/manifest.yaml", f"{tip}:{eb.path}/manifest.yaml"])]
    if code_files is None or code_files:
        ca, cb = commit_of_run(repo, tip, ea.id), commit_of_run(repo, tip, eb.id)
        paths = [f":(literal){p}" for p in code_files] if code_files else [".", ":(exclude)runs"]
        if ca and cb:
            out.append(("\ncode diff:\n", ["diff", "--no-color", "--stat", "-p", ca, cb, "--", *paths]))
    return out


def _code_facts(repo: Repo, tip: str, ea: RunEntry, eb: RunEntry, ra: RunRecord, rb: RunRecord, report: DiffReport) -> None:
    """Name the files behind a `code` change; say in one line when only files that are not code
    (documentation, bookkeeping, `code: ignore:`, launcher inputs) differ."""
    from ledger.record.codeset import changed_code_files

    ca, cb = commit_of_run(repo, tip, ea.id), commit_of_run(repo, tip, eb.id)
    if not ca or not cb:
        return
    files = changed_code_files(repo, ca, cb, ra, rb)
    if any(c.name == "code" for c in report.changed):
        report.code_files = files.counted
        return
    notes = []
    if files.ignored:
        notes.append(f"only files that are not code differ ({_names(files.ignored)}): not a difference")
    if files.launcher_inputs:
        notes.append(
            f"launcher inputs differ ({_names(files.launcher_inputs)}): their effect is in the settings; --code-diff shows their diff"
        )
    report.code_note = "; ".join(notes) or None


def _names(paths: list[str]) -> str:
    return ", ".join(paths[:5]) + (f", +{len(paths) - 5} more" if len(paths) > 5 else "")


class _EarlierRuns:
    """The runs started before B, with their settings: read only if the diff is refused (to
    suggest a baseline), since reading every run's settings is the slow part at 10,000 runs."""

    def __init__(self, repo: Repo, tip: str | None, skip: tuple[str, str], before: str):
        self.repo, self.tip, self.skip, self.before = repo, tip, skip, before

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        listing = load_listing(self.repo, self.tip, with_settings=True)
        return iter([m for m in listing.ordered() if m.get("id") not in self.skip and (m.get("started") or "") <= self.before])


def _report_key(ea: RunEntry, eb: RunEntry, *options: Any) -> str:
    """Everything a comparison depends on: both run folders (their tree ids name every byte of
    them, metrics included) and the options; the cache names each entry by the code's version."""
    text = json.dumps([ea.tree, eb.tree, *options], default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _cached_report(repo: Repo, key: str) -> DiffReport | None:
    return LocalCache(repo.common_dir, "diffs").read_pickle(key, DiffReport)


def _store_report(repo: Repo, key: str, report: DiffReport) -> None:
    LocalCache(repo.common_dir, "diffs").write_pickle(key, report)


def _full_manifest(repo: Repo, entry: RunEntry) -> Recorded:
    raw = read_file_at(repo, entry, "manifest.yaml")
    if raw is None:
        raise ManifestError(f"run {entry.id} has no manifest.yaml", "the record is damaged")
    return Recorded(*parse_record(raw, entry.path))


def _resolve_recorded(repo: Repo, tip: str | None, name: str, listing: Listing | None, partial: bool = False) -> RunEntry | LiveRun:
    """`resolve`, and a run still in progress is named as such (a diff compares records), or,
    with `partial`, returned as it is so far."""
    try:
        return resolve(repo, tip, name, listing)
    except RunNotFound:
        from ledger.record.live import find_running

        live = find_running(repo.root, name)
        if live is None:
            raise
        if partial:
            return live
        at = "" if live.step is None else f", at step {live.step}"
        raise RunNotFound(
            f"run {live.id} ('{name}') is still running{at}: a diff compares recorded runs",
            f"wait for it to end (`ledger tail {name} -f` follows it), then diff again; --partial compares the steps so far",
        ) from None


def _partial_diff(
    repo: Repo,
    cfg: Any,
    tip: str | None,
    sides: list[RunEntry | LiveRun],
    metrics: list[str],
    force: bool,
    steps_metric: str | None,
    ignore: list[str] | None,
    html: Path | None,
) -> DiffOutput:
    """`--partial`: a running run's steps so far (`ledger.record.live.partial_run`) against the
    other run, on the common steps; no replicas, no cache, no git diff (its record is not written)."""
    from ledger.record.live import partial_run

    manifests: list[Mapping[str, Any]] = []
    records: list[RunRecord] = []
    tables, running, incomplete = [], [], []
    for side, entry in zip("AB", sides):
        if isinstance(entry, RunEntry):
            recorded = _full_manifest(repo, entry)
            records.append(recorded.record)
            manifests.append(recorded.data)
            tables.append(load_metrics(repo, entry))
            continue
        part = partial_run(entry, cfg)
        records.append(RunRecord.partial(part.manifest))  # our own staged record
        manifests.append(part.manifest)
        tables.append(part.table)
        steps = len(part.table.rows) if part.table is not None else 0
        running.append(f"{side} ({entry.id}) is still running, {steps} step(s) logged so far")
        if not part.settings_complete:
            incomplete.append(side)
    ma, mb = manifests
    ra, rb = records
    if ra.id == rb.id:
        raise UsageError(f"'{ra.id}' is named twice", "name two different runs")
    all_ignore = [*DEFAULT_IGNORE, *cfg.ignore, *(ignore or [])]
    all_ignore += sorted(ignored_settings(ra.settings, ra.id) | ignored_settings(rb.settings, rb.id))
    all_ignore += _env_unknown_while_running(records, sides)
    report = build_report(
        ma,
        mb,
        tables[0],
        tables[1],
        ignore=all_ignore,
        metrics=metrics,
        force=force or bool(incomplete),
        max_age_hours=cfg.diff.max_age_hours,
        steps_metric=steps_metric,
        replica_keys=replica_globs(cfg.diff.replica_keys),
    )
    banner = "PARTIAL comparison: " + "; ".join(running) + ": the comparison covers the common steps so far"
    note = None
    if incomplete:
        note = f"settings of {' and '.join(incomplete)} are incomplete (its training command has not shown yet): compared as known so far"
    text = banner + "\n" + (note + "\n" if note else "") + render_text(report, None, show_steps=steps_metric is not None)
    data = {**report.to_json_dict(), "partial": True, "running": [e.id for e in sides if not isinstance(e, RunEntry)]}
    data["settings_incomplete"] = incomplete
    out = DiffOutput(text, data, report.refused, EXIT_REFUSED if report.refused else EXIT_OK, None)
    if html is not None:
        from ledger.pages.html import DiffPageInput, diff_page

        page = DiffPageInput(report, render_text(report, None, show_steps=False), ma, mb, tables[0], tables[1], partial=banner)
        write_atomic(html, diff_page(page).encode())
        out.html_path = html
    return out


def _env_unknown_while_running(records: list[RunRecord], sides: list[RunEntry | LiveRun]) -> list[str]:
    """`env.*` settings a recorded side has and a running side lacks. A record also takes them
    from ledger's own environment when the job ends, which no other process can read while it
    runs: unknown, so not a difference (a variable both sides show still compares)."""
    settings = [r.settings for r in records]
    running = [s for s, e in zip(settings, sides) if not isinstance(e, RunEntry)]
    recorded = [s for s, e in zip(settings, sides) if isinstance(e, RunEntry)]
    return sorted({k for r in recorded for k in r if k.startswith("env.") and any(k not in s for s in running)})


def _resolved(repo: Repo, tip: str | None, names: tuple[str, str], partial: bool) -> tuple[list[RunEntry | LiveRun], Listing | None]:
    """Both runs by name, and the listing when a name needed it (ids and latest~N resolve
    without reading every run)."""
    listing: Listing | None = None
    entries: list[RunEntry | LiveRun] = []
    for name in names:
        if listing is None and RunRef.parse(name).kind == "other":
            listing = load_listing(repo, tip)
        entries.append(_resolve_recorded(repo, tip, name, listing, partial))
    return entries, listing


def compute_diff(start: Path, q: Question, html: Path | None = None, partial: bool = False) -> DiffOutput:
    """`ledger.commands.diff.diff_runs` when no kept answer fits: compare, keep the answer (not
    for `html` or `partial`), write the page."""
    where = None if html is not None or partial else repository(start)
    config_sha = config_fingerprint(where[0] / CONFIG_NAME) if where is not None else None  # read before the config is
    repo, cfg, tip = open_branch(start)
    entries, listing = _resolved(repo, tip, (q.a, q.b), partial)
    metrics, ignore = list(q.metrics), list(q.ignore)
    if not all(isinstance(e, RunEntry) for e in entries):
        return _partial_diff(repo, cfg, tip, entries, metrics, q.force, q.steps_metric, ignore, html)
    ea, eb = entries
    assert isinstance(ea, RunEntry) and isinstance(eb, RunEntry)
    if ea.id == eb.id:
        raise UsageError(f"'{q.a}' and '{q.b}' are the same run ({ea.id})", "name two different runs")
    assert tip is not None
    manifests = _Manifests(repo)
    sides = find_sides(
        repo,
        tip,
        listing,
        ea,
        eb,
        manifests,
        [*DEFAULT_IGNORE, *cfg.ignore, *ignore],
        replica_globs(cfg.diff.replica_keys),
        cfg.diff.max_age_hours,
        q.any_age,
        ignored_settings,
    )
    key = _report_key(
        ea,
        eb,
        cfg.ignore,
        ignore,
        metrics,
        q.force,
        q.steps_metric,
        cfg.diff.max_age_hours,
        sides.key(),
        list(cfg.diff.replica_keys),
    )
    report = _cached_report(repo, key)  # the same comparison again: nothing to parse or compute
    if report is None:
        report = _compare(repo, cfg, tip, ea, eb, metrics, q.force, q.steps_metric, ignore, sides, listing, manifests)
        if not report.refused:  # a refusal's baseline hint depends on the other runs: not cached
            _store_report(repo, key, report)
    out, diffs = _output(repo, tip, ea, eb, report, q.git_diff, q.steps_metric, q.code_diff)
    out.skipped = dict(sides.skipped)
    if where == (repo.root, repo.common_dir):
        kept = DiffOutput(out.text, out.json, out.refused, out.exit_code, out.forced_banner, None, out.skipped)
        keep(repo.root, repo.common_dir, q, Kept(kept, diffs, branch_ref(cfg.branch), tip, str(where[0] / CONFIG_NAME), config_sha))
    out.text = with_git_diff(out.text, git_diff_text(repo.root, diffs))
    if html is not None:
        _write_page(repo, tip, (ea, eb), report, manifests, listing, html)
        out.html_path = html
    return out


def _write_page(
    repo: Repo, tip: str, runs: tuple[RunEntry, RunEntry], report: DiffReport, manifests: _Manifests, listing: Listing | None, html: Path
) -> None:
    """`--html`: the comparison as one self-contained page."""
    from ledger.pages.html import DiffPageInput, diff_page

    ea, eb = runs
    data = DiffPageInput(
        report,
        render_text(report, None, show_steps=False),
        _said(repo, ea, manifests(ea).data),
        _said(repo, eb, manifests(eb).data),
        load_metrics(repo, ea),
        load_metrics(repo, eb),
        replica_tables(repo, report, listing or load_listing(repo, tip)),
    )
    write_atomic(html, diff_page(data).encode())


def _said(repo: Repo, entry: RunEntry, manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    """The manifest with what was said about the run since (its meta.json: note, tags) laid over it, for the page."""
    if entry.meta_blob is None:
        return manifest
    shown = dict(manifest)
    with_meta(shown, repo.read_blob(entry.meta_blob))
    return shown


class _Manifests:
    """Full manifests parsed once per command (the replica search and the comparison share them)."""

    def __init__(self, repo: Repo):
        self.repo = repo
        self.parsed: dict[str, Recorded] = {}

    def __call__(self, entry: RunEntry) -> Recorded:
        if entry.id not in self.parsed:
            self.parsed[entry.id] = _full_manifest(self.repo, entry)
        return self.parsed[entry.id]


def _compare(
    repo: Repo,
    cfg: Any,
    tip: str,
    ea: RunEntry,
    eb: RunEntry,
    metrics: list[str],
    force: bool,
    steps_metric: str | None,
    ignore: list[str] | None,
    sides: Sides,
    listing: Listing | None,
    manifests: _Manifests,
) -> DiffReport:
    side_a, side_b = manifests(ea), manifests(eb)
    (ra, ma), (rb, mb) = side_a, side_b
    code_a, code_b = ra.code.commit, rb.code.commit
    if code_a and code_b and has_object(repo, code_a) and has_object(repo, code_b) and merge_base(repo, code_a, code_b) is None:
        raise LedgerError(
            f"runs {ea.id} and {eb.id} come from different ledgers (unrelated code histories)",
            "compare runs recorded from the same project",
        )
    all_ignore = [*DEFAULT_IGNORE, *cfg.ignore, *(ignore or [])]
    # a path that holds the run's own id differs in every run by construction: not a setting
    all_ignore += sorted(ignored_settings(ra.settings, ea.id) | ignored_settings(rb.settings, eb.id))
    earlier = _EarlierRuns(repo, tip, (ea.id, eb.id), rb.started or "")
    table_a, table_b = load_metrics(repo, ea), load_metrics(repo, eb)
    report = build_report(
        ma,
        mb,
        table_a,
        table_b,
        ignore=all_ignore,
        metrics=metrics,
        force=force,
        earlier_runs=earlier,
        max_age_hours=cfg.diff.max_age_hours,
        steps_metric=steps_metric,
        replica_keys=replica_globs(cfg.diff.replica_keys),
    )
    attach_noise(report, repo, sides, ((ea, side_a, table_a), (eb, side_b, table_b)))
    baseline_session(repo, listing, tip, report, mb)
    _code_facts(repo, tip, ea, eb, ra, rb, report)
    return report


def _output(
    repo: Repo, tip: str, ea: RunEntry, eb: RunEntry, report: DiffReport, git_diff: bool, steps_metric: str | None, code_diff: bool = False
) -> tuple[DiffOutput, list[GitDiff]]:
    """The answer without its git diffs, and the git diffs to show after it."""
    diffs: list[GitDiff] = []
    if (git_diff or code_diff) and not report.refused:
        code_changed = any(c.name in CODE_SETTINGS for c in report.changed)
        diffs = _git_diffs(repo, tip, ea, eb, None if code_diff else report.code_files if code_changed else [])
    banner = None
    if report.forced:
        names = ", ".join(c.name for c in report.changed) or "no setting"
        banner = f"ledger: FORCED comparison: {len(report.changed)} settings differ ({names}); timing mixes their effects"
    out = DiffOutput(
        text=render_text(report, None, show_steps=steps_metric is not None),
        json=report.to_json_dict(),
        refused=report.refused,
        exit_code=EXIT_REFUSED if report.refused else EXIT_OK,
        forced_banner=banner,
    )
    return out, diffs
