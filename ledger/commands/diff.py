"""`ledger diff A B`: one changed setting, its git diff, and step-aligned timing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.capture.settings import DEFAULT_IGNORE, ignored_settings
from ledger.commands.listing import listing_for
from ledger.compare.diffcore import build_report
from ledger.compare.metrics_store import load_metrics
from ledger.compare.render import render_text
from ledger.errors import EXIT_OK, EXIT_REFUSED, LedgerError, UsageError
from ledger.manifest import ManifestError
from ledger.runref import resolve
from ledger.storage.git import Repo, has_object, merge_base
from ledger.storage.listing import load_listing, parse_manifest
from ledger.storage.store import RunEntry, commit_of_run, read_file_at


@dataclass
class DiffOutput:
    text: str
    json: dict[str, Any]
    refused: bool
    exit_code: int
    forced_banner: str | None


CODE_SETTINGS = ("code.commit", "code.patch")


def _git_diff(repo: Repo, tip: str, ea: RunEntry, eb: RunEntry, code_changed: bool) -> str:
    """The manifests' diff, plus the code diff (outside runs/) when the code is what changed."""
    out = repo.git("diff", "--no-color", f"{tip}:{ea.path}/manifest.yaml", f"{tip}:{eb.path}/manifest.yaml",
                   check=False).stdout.decode("utf-8", "replace")
    if code_changed:
        ca, cb = commit_of_run(repo, tip, ea.id), commit_of_run(repo, tip, eb.id)
        if ca and cb:
            out += repo.git("diff", "--no-color", "--stat", "-p", ca, cb, "--", ".", ":(exclude)runs",
                            check=False).stdout.decode("utf-8", "replace")
    return out


class _EarlierRuns:
    """The runs started before B, with their settings: read only if the diff is refused (to
    suggest a baseline), since reading every run's settings is the slow part at 10,000 runs."""

    def __init__(self, repo: Repo, tip: str | None, skip: tuple[str, str], before: str):
        self.repo, self.tip, self.skip, self.before = repo, tip, skip, before

    def __iter__(self) -> Iterator[dict[str, Any]]:
        listing = load_listing(self.repo, self.tip, with_settings=True)
        return iter([m for m in listing.ordered()
                     if m["id"] not in self.skip and (m.get("started") or "") <= self.before])


def _full_manifest(repo: Repo, entry: RunEntry) -> dict[str, Any]:
    raw = read_file_at(repo, entry, "manifest.yaml")
    if raw is None:
        raise ManifestError(f"run {entry.id} has no manifest.yaml", "the record is damaged")
    return parse_manifest(raw, entry.path)


def diff_runs(start: Path, a: str, b: str, metrics: list[str], force: bool, steps_metric: str | None,
              git_diff: bool, ignore: list[str] | None = None) -> DiffOutput:
    """Compare two runs; refused (exit 3) unless exactly one setting differs or `force`."""
    repo, cfg, tip, listing = listing_for(start)
    ea, eb = resolve(repo, tip, a, listing), resolve(repo, tip, b, listing)
    if ea.id == eb.id:
        raise UsageError(f"'{a}' and '{b}' are the same run ({ea.id})", "name two different runs")
    for e in (ea, eb):
        if e.id in listing.broken:
            raise ManifestError(f"run {e.id}: {listing.broken[e.id]}", "the record is corrupt; compare other runs")
    ma, mb = _full_manifest(repo, ea), _full_manifest(repo, eb)
    code_a, code_b = ma["code"].get("commit"), mb["code"].get("commit")
    if code_a and code_b and has_object(repo, code_a) and has_object(repo, code_b) \
            and merge_base(repo, code_a, code_b) is None:
        raise LedgerError(f"runs {ea.id} and {eb.id} come from different ledgers (unrelated code histories)",
                          "compare runs recorded from the same project")
    assert tip is not None
    all_ignore = [*DEFAULT_IGNORE, *cfg.ignore, *(ignore or [])]
    # a path that holds the run's own id differs in every run by construction: not a setting
    all_ignore += sorted(ignored_settings(ma.get("settings") or {}, ea.id) | ignored_settings(mb.get("settings") or {}, eb.id))
    earlier = _EarlierRuns(repo, tip, (ea.id, eb.id), mb.get("started") or "")
    report = build_report(ma, mb, load_metrics(repo, ea), load_metrics(repo, eb), ignore=all_ignore,
                          metrics=metrics, force=force, earlier_runs=earlier, max_age_hours=cfg.max_age_hours,
                          steps_metric=steps_metric)
    text_diff = None
    if git_diff and not report.refused:
        code_changed = any(c.name in CODE_SETTINGS for c in report.changed)
        text_diff = _git_diff(repo, tip, ea, eb, code_changed)
    banner = None
    if report.forced:
        names = ", ".join(c.name for c in report.changed) or "no setting"
        banner = f"ledger: FORCED comparison: {len(report.changed)} settings differ ({names}); timing mixes their effects"
    return DiffOutput(text=render_text(report, text_diff, show_steps=steps_metric is not None),
                      json=report.to_json_dict(), refused=report.refused,
                      exit_code=EXIT_REFUSED if report.refused else EXIT_OK, forced_banner=banner)
