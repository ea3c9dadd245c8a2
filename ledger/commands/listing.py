"""`ledger list`, `ledger log`, `ledger show`, `ledger path`.

`ledger list` shows the recorded runs, then the runs in progress (state `running`, read from the
staging area by `ledger.record.live`), newest last.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.manifest import duration_text
from ledger.runref import resolve
from ledger.storage.branch import open_branch
from ledger.storage.listing import load_listing, parse_manifest
from ledger.storage.store import read_file_at
from ledger.textfmt import MISSING, show_value


@dataclass
class ListResult:
    """The runs to show, oldest first, with optional change sets."""

    rows: list[dict[str, Any]]
    broken: dict[str, str]
    changes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    running: list[dict[str, Any]] = field(default_factory=list)  # `LiveRun.summary()`s, oldest first

    def to_json(self) -> list[dict[str, Any]]:
        out = []
        for m in self.rows:
            item = summary(m)
            if self.changes:
                item["changed"] = self.changes.get(m["id"], [])
            out.append(item)
        return out + [dict(r) for r in self.running]


def summary(m: dict[str, Any]) -> dict[str, Any]:
    """The fields `ledger list` shows."""
    status = m.get("status") or {}
    gpu = m.get("gpu") or {}
    return {
        "id": m["id"], "name": m.get("name"), "state": status.get("state"), "exit_code": status.get("exit_code"),
        "duration_s": status.get("duration_s"), "started": m.get("started"),
        "paused": gpu.get("pauses") if isinstance(gpu, dict) else None,
        "paused_s": gpu.get("paused_s") if isinstance(gpu, dict) else None,
        "replay_of": m.get("replay_of"), "note": m.get("note"),
    }


def list_runs(start: Path, changed: bool = False, limit: int | None = None) -> ListResult:
    """Every run at the branch tip (oldest first), optionally with what changed run to run."""
    repo, cfg, tip = open_branch(start)
    listing = load_listing(repo, tip, with_settings=changed)
    rows = listing.ordered()
    from ledger.record.live import running_runs

    recorded = {m["id"] for m in rows}
    running = [r.summary() for r in running_runs(repo.root) if r.id not in recorded]
    result = ListResult(rows[-limit:] if limit else rows, listing.broken, running=running)
    if changed:
        from ledger.capture.settings import DEFAULT_IGNORE
        from ledger.compare.diffcore import change_log

        ignore = [*DEFAULT_IGNORE, *cfg.ignore]
        for run_id, changes in change_log(rows, ignore):
            result.changes[run_id] = [{"name": c.name, "a": c.a, "b": c.b} for c in changes]
    return result


def _fmt_duration(s: Any) -> str:
    return duration_text(s) if isinstance(s, (int, float)) else MISSING


def _value(v: Any) -> str:
    return show_value(v, width=40)


def change_text(changes: list[dict[str, Any]]) -> str:
    if not changes:
        return "(no setting changed)"
    return ", ".join(f"{c['name']}: {_value(c['a'])} -> {_value(c['b'])}" for c in changes)


def render_list(result: ListResult) -> str:
    """A table, one run a line."""
    if not result.rows and not result.running:
        return "no runs recorded yet (record one with `ledger run -- CMD`)\n"
    header = ["ID", "NAME", "STATE", "EXIT", "TIME", "PAUSED", "STARTED"]
    lines = []
    for m in result.rows:
        s = summary(m)
        paused = "-" if s["paused"] is None else f"{s['paused']} ({_fmt_duration(s['paused_s'])})" if s["paused"] else "0"
        row = [s["id"], s["name"] or "-", s["state"] or "-", "-" if s["exit_code"] is None else str(s["exit_code"]),
               _fmt_duration(s["duration_s"]), paused, (s["started"] or "-")[:19].replace("T", " ")]
        if s["replay_of"]:
            row[2] += "*"
        if result.changes:
            row.append(change_text(result.changes.get(s["id"], [])) if m is not result.rows[0] else "(first shown)")
        lines.append(row)
    for live in result.running:
        state = "running" if live["step"] is None else f"running: step {live['step']}"
        if live["last_step_at"]:
            state += f" ({live['last_step_at']})"
        row = [live["id"], live["name"] or "-", state, "-", "-", "-",
               (live["started"] or "-")[:19].replace("T", " ")]
        if result.changes:
            row.append("(running)")
        lines.append(row)
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
    for i, m in enumerate(result.rows):
        changes = result.changes.get(m["id"], [])
        label = f"{m['id']} {m.get('name') or ''}".rstrip()
        if i == 0:
            text = "(first run shown)"
        else:
            text = change_text(changes)
            if len(changes) == 1:
                text += "   <- comparable with the run above"
        out.append(f"{label}: {text}")
    return "\n".join(out) + ("\n" if out else "no runs recorded yet\n")


def show_run(start: Path, name: str) -> tuple[dict[str, Any], str]:
    """One run's manifest, as data and as its YAML text."""
    repo, _cfg, tip = open_branch(start)
    entry = resolve(repo, tip, name)
    raw = read_file_at(repo, entry, "manifest.yaml")
    if raw is None:
        from ledger.manifest import ManifestError

        raise ManifestError(f"run {entry.id} has no manifest.yaml", "the record is damaged")
    manifest = parse_manifest(raw, entry.path)
    return manifest, raw.decode("utf-8", "replace")


def run_folder(start: Path, name: str) -> str:
    repo, _cfg, tip = open_branch(start)
    return resolve(repo, tip, name).path
