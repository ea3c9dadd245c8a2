"""`ledger list`, `ledger log`, `ledger show`, `ledger path`.

`ledger list` shows the recorded runs and the runs in progress (state `running`, read from the
staging area by `ledger.record.live`), newest first as `git log` does: the runs in progress on top
(`--reverse`: oldest first, the runs in progress last).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.manifest import duration_text
from ledger.opening import open_branch
from ledger.runref import resolve, runs_named
from ledger.storage.git import Repo
from ledger.storage.listing import list_fields, load_listing, parse_manifest
from ledger.storage.store import read_file_at
from ledger.storage.sync import local_only_runs, remote_ref
from ledger.textfmt import MISSING, change_text, plural


@dataclass
class ListResult:
    """The runs to show (newest first unless reversed), with optional change sets."""

    rows: list[dict[str, Any]]
    broken: dict[str, str]
    changes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    unpulled: str | None = None  # runs on origin's branch this clone does not have yet
    oldest_id: str | None = None  # the oldest run of the ledger (it has no run before it)
    running: list[dict[str, Any]] = field(default_factory=list)  # `LiveRun.summary()`s, in `rows`' order
    running_first: bool = True  # newest first: the runs in progress come before the recorded ones

    def to_json(self) -> list[dict[str, Any]]:
        out = []
        for m in self.rows:
            item = summary(m)
            if self.changes:
                item["changed"] = self.changes.get(m["id"], [])
            out.append(item)
        live = [dict(r) for r in self.running]
        return live + out if self.running_first else out + live


def summary(m: dict[str, Any]) -> dict[str, Any]:
    """The fields `ledger list` shows."""
    return list_fields(m)


def _unpulled(repo: Repo, branch: str, tip: str | None) -> str | None:
    """Say so when `origin/<branch>` holds runs this clone never pulled."""
    remote_tip = repo.ref_tip(remote_ref("origin", branch))
    if remote_tip is None or (tip is not None and repo.is_ancestor(remote_tip, tip)):
        return None
    count = len(local_only_runs(repo, remote_tip, tip))
    if not count:
        return None
    return f"origin/{branch} has {plural(count, 'run')} not here; `ledger pull` would show them"


def list_runs(start: Path, changed: bool = False, limit: int | None = None, reverse: bool = False) -> ListResult:
    """Every run at the branch tip, newest first (`reverse`: oldest first), optionally with what
    changed from the run before each; `limit` keeps the newest N."""
    repo, cfg, tip = open_branch(start)
    listing = load_listing(repo, tip, with_settings=changed)
    rows = listing.ordered()
    shown = rows[-limit:] if limit else rows
    from ledger.record.live import running_runs

    recorded = {m["id"] for m in rows}
    running = [r.summary() for r in running_runs(repo.root, orphaned=True) if r.id not in recorded]
    result = ListResult(
        shown if reverse else shown[::-1],
        listing.broken,
        unpulled=_unpulled(repo, cfg.branch, tip),
        oldest_id=rows[0]["id"] if rows else None,
        running=running if reverse else running[::-1],
        running_first=not reverse,
    )
    if changed:
        from ledger.compare.diffcore import change_log
        from ledger.understand.settings import DEFAULT_IGNORE

        ignore = [*DEFAULT_IGNORE, *cfg.ignore]
        for run_id, changes in change_log(rows, ignore):
            result.changes[run_id] = [{"name": c.name, "a": c.a, "b": c.b} for c in changes]
    return result


def _fmt_duration(s: Any) -> str:
    return duration_text(s) if isinstance(s, (int, float)) else MISSING


def render_list(result: ListResult) -> str:
    """A table, one run a line."""
    if not result.rows and not result.running:
        return "no runs recorded yet (record one with `ledger run -- CMD`)\n"
    header = ["ID", "NAME", "STATE", "EXIT", "TIME", "PAUSED", "STARTED"]
    lines = []
    for m in result.rows:
        s = summary(m)
        paused = "-" if s["paused"] is None else f"{s['paused']} ({_fmt_duration(s['paused_s'])})" if s["paused"] else "0"
        row = [
            s["id"],
            s["name"] or "-",
            s["state"] or "-",
            "-" if s["exit_code"] is None else str(s["exit_code"]),
            _fmt_duration(s["duration_s"]),
            paused,
            (s["started"] or "-")[:19].replace("T", " "),
        ]
        if s["replay_of"]:
            row[2] += "*"
        if result.changes:
            row.append(change_text(result.changes.get(s["id"], [])) if s["id"] != result.oldest_id else "(first run)")
        lines.append(row)
    running = []
    for live in result.running:
        state = "running" if live["step"] is None else f"running: step {live['step']}"
        if live["last_step_at"]:
            state += f" ({live['last_step_at']})"
        if live["state"] == "orphaned":  # its ledger died (SIGKILL): staged, waiting for recover
            state = f"orphaned: {live['hint']}"
        row = [live["id"], live["name"] or "-", state, "-", "-", "-", (live["started"] or "-")[:19].replace("T", " ")]
        if result.changes:
            row.append("(running)")
        running.append(row)
    lines = running + lines if result.running_first else lines + running
    if result.changes:
        header.append("CHANGED")
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header) - 1)]
    out = []
    for r in [header, *lines]:
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    if any(m.get("replay_of") for m in result.rows):
        out.append("* a replay of another run")
    return "\n".join(line.rstrip() for line in out) + "\n"


def render_change_log(result: ListResult) -> str:
    """`ledger log`: one change set per run, so comparable pairs stand out."""
    out = []
    for m in result.rows:
        changes = result.changes.get(m["id"], [])
        label = f"{m['id']} {m.get('name') or ''}".rstrip()
        if m["id"] == result.oldest_id:
            text = "(first run)"
        else:
            text = change_text(changes)
            if len(changes) == 1:  # a replay is compared with its source (issue 22, item 5)
                text += (
                    f"   <- comparable with its source {m['replay_of']}"
                    if m.get("replay_of")
                    else "   <- comparable with the run before it"
                )
        out.append(f"{label}: {text}")
    return "\n".join(out) + ("\n" if out else "no runs recorded yet\n")


def show_run(start: Path, name: str) -> tuple[dict[str, Any], str, str | None]:
    """One run's manifest, as data and as its YAML text, and a note when its name is shared.

    A run still in progress (`latest` names it when one runs, as in `ledger tail`) gives its
    manifest so far, from the staging area, with `status.state: running` and a note saying so."""
    repo, _cfg, tip = open_branch(start)
    from ledger.record.live import find_running

    live = find_running(repo.root, name)
    if live is not None:
        from ledger import yamlio

        so_far = {
            **live.manifest,
            "status": {"state": "running", "step": live.step, "last_step_at": live.last_step_at, "output_bytes": live.output_bytes},
        }
        running = (
            f"run {live.id} is still running: this is its manifest so far, not its record "
            "(settings, logs and metrics are added when it ends)"
        )
        return so_far, yamlio.dumps(so_far), running
    listing = load_listing(repo, tip) if tip is not None else None
    entry = resolve(repo, tip, name, listing)
    raw = read_file_at(repo, entry, "manifest.yaml")
    if raw is None:
        from ledger.manifest import ManifestError

        raise ManifestError(f"run {entry.id} has no manifest.yaml", "the record is damaged")
    manifest = parse_manifest(raw, entry.path)
    note: str | None = None
    run_name = manifest.get("name")
    if listing is not None and run_name:
        same = runs_named(listing, run_name)
        older = same.index(entry.id) if entry.id in same else 0
        if older:
            note = f"{plural(older, 'older run')} {'shares' if older == 1 else 'share'} the name '{run_name}': " + ", ".join(
                f"{run_name}~{k}" for k in range(len(same) - older, len(same))[:5]
            )
    return manifest, raw.decode("utf-8", "replace"), note


def run_folder(start: Path, name: str) -> str:
    repo, _cfg, tip = open_branch(start)
    return resolve(repo, tip, name).path
