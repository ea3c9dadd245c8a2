"""`ledger list`, `ledger log`, `ledger show`, `ledger path`.

`ledger list` shows the recorded runs and the runs in progress (state `running`, read from the
staging area by `ledger.record.live`), newest first as `git log` does: the runs in progress on top
(`--reverse`: oldest first, the runs in progress last).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.compare.runfilter import RunFilter
from ledger.compare.summarymetrics import metric_value
from ledger.manifest import duration_text
from ledger.opening import open_branch
from ledger.runref import resolve, runs_named
from ledger.storage.git import Repo
from ledger.storage.listing import list_fields, load_listing, parse_record
from ledger.storage.store import read_file_at
from ledger.storage.summary import METRIC_KEYS as SUMMARY_KEYS
from ledger.storage.sync import local_only_runs, remote_ref
from ledger.termstyle import printable_cell
from ledger.textfmt import MISSING, change_text, csv_text, note_cell, plural


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
    metric_columns: list[str] = field(default_factory=list)  # `--metric`: summary metrics shown as columns
    with_settings: bool = False  # `--json`/`--csv`: each run's settings and summary metrics too
    filtered: bool = False  # some recorded runs were left out (a filter, or archived)

    def to_json(self) -> list[dict[str, Any]]:
        out = []
        for m in self.rows:
            item = summary(m)
            if self.with_settings:
                item["settings"] = m.get("settings") or {}
                item["metrics"] = m.get("metrics") or {}
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


def list_runs(
    start: Path,
    changed: bool = False,
    limit: int | None = None,
    reverse: bool = False,
    flt: RunFilter | None = None,
    with_settings: bool = False,
    metric_globs: tuple[str, ...] = (),
) -> ListResult:
    """Every run at the branch tip, newest first (`reverse`: oldest first), optionally with what
    changed from the run before each; `limit` keeps the newest N of those `flt` keeps, runs in progress first (archived
    runs are left out unless it says); `metric_globs` name the summary metrics to show as columns."""
    repo, cfg, tip = open_branch(start)
    flt = flt or RunFilter()
    keys = [w.key for w in flt.where]
    listing = load_listing(repo, tip, changed or with_settings, setting_keys=keys, metric_names=keys, metric_globs=metric_globs)
    rows = listing.ordered()
    flt.check_keys(rows, known=listing.setting_keys | listing.metric_names)
    kept = [m for m in rows if flt.keep(m)]
    from ledger.record.live import running_runs

    recorded = {m["id"] for m in rows}
    running = [r.summary() for r in running_runs(repo.root, orphaned=True) if r.id not in recorded]
    running = [r for r in running if flt.keep({**r, "status": {"state": r.get("state") or "running"}})]
    shown = kept
    if limit:  # the newest N of all: runs in progress are newer than every recorded run
        running = running[-limit:]
        left = limit - len(running)
        shown = kept[-left:] if left > 0 else []
    result = ListResult(
        shown if reverse else shown[::-1],
        listing.broken,
        unpulled=_unpulled(repo, cfg.branch, tip),
        oldest_id=rows[0]["id"] if rows else None,
        running=running if reverse else running[::-1],
        running_first=not reverse,
    )
    result.metric_columns = metric_columns(shown, metric_globs)
    result.with_settings = with_settings
    result.filtered = len(kept) < len(rows)
    if changed:
        from ledger.compare.diffcore import change_log
        from ledger.understand.settings import DEFAULT_IGNORE

        ignore = [*DEFAULT_IGNORE, *cfg.ignore]
        for run_id, changes in change_log(rows, ignore):
            result.changes[run_id] = [{"name": c.name, "a": c.a, "b": c.b} for c in changes]
    return result


def metric_columns(rows: list[dict[str, Any]], globs: tuple[str, ...]) -> list[str]:
    """The summary metrics of `rows` that the `--metric` globs name, in name order."""
    if not globs:
        return []
    names = {k for m in rows for k in (m.get("metrics") or {})}
    return sorted(n for n in names if any(fnmatch.fnmatchcase(n, g) for g in globs))


def _fmt_duration(s: Any) -> str:
    return duration_text(s) if isinstance(s, (int, float)) else MISSING


def render_list(result: ListResult) -> str:
    """A table, one run a line."""
    if not result.rows and not result.running:
        if result.filtered:
            return "no runs match (`ledger list --archived` shows archived runs too)\n"
        return "no runs recorded yet (record one with `ledger run -- CMD`)\n"
    header = ["ID", "NAME", "STATE", "EXIT", "TIME", "PAUSED", "STARTED"]
    tags_column = any(m.get("tags") for m in result.rows)
    note_column = any(m.get("note") for m in result.rows)
    header += (["TAGS"] if tags_column else []) + list(result.metric_columns) + (["NOTE"] if note_column else [])
    lines = [_run_row(result, m, tags_column, note_column) for m in result.rows]
    running = [_running_row(result, live, len(header)) for live in result.running]
    lines = running + lines if result.running_first else lines + running
    if result.changes:
        header.append("CHANGED")
    table = [[printable_cell(c) for c in row] for row in [header, *lines]]  # a pulled name's newline stays in its cell
    widths = [max(len(r[i]) for r in table) for i in range(len(header) - 1)]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in table]
    if any(m.get("replay_of") for m in result.rows):
        out.append("* a replay of another run (with how its training matched: bitwise, close or diverged)")
    return "\n".join(line.rstrip() for line in out) + "\n"


def _started(text: str | None) -> str:
    return (text or "-")[:19].replace("T", " ")


def _run_row(result: ListResult, m: dict[str, Any], tags_column: bool, note_column: bool) -> list[str]:
    """One recorded run's cells."""
    s = summary(m)
    paused = "-" if s["paused"] is None else f"{s['paused']} ({_fmt_duration(s['paused_s'])})" if s["paused"] else "0"
    state = s["state"] or "-"
    if s["replay_of"]:
        state += "*" + (f" ({s['fidelity']})" if s.get("fidelity") else "")
    if s["archived"]:  # shown only with --archived
        state += " (archived)"
    exit_code = "-" if s["exit_code"] is None else str(s["exit_code"])
    row = [s["id"], s["name"] or "-", state, exit_code, _fmt_duration(s["duration_s"]), paused, _started(s["started"])]
    row += _extra_cells(result, m, tags_column)
    if note_column:
        row.append(note_cell(s["note"]))
    if result.changes:
        row.append(change_text(result.changes.get(s["id"], [])) if s["id"] != result.oldest_id else "(first run)")
    return row


def _running_row(result: ListResult, live: dict[str, Any], columns: int) -> list[str]:
    """One running (or orphaned) run's cells: its state and last step, the rest '-'."""
    state = "running" if live["step"] is None else f"running: step {live['step']}"
    if live["last_step_at"]:
        state += f" ({live['last_step_at']})"
    if live.get("on_ray"):  # its ledger died, its Ray job runs on (`ledger recover` saw it)
        state = live["hint"]
    elif live["state"] == "orphaned":  # its ledger died (SIGKILL): staged, waiting for recover
        state = f"orphaned: {live['hint']}"
    row = [live["id"], live["name"] or "-", state, "-", "-", "-", _started(live["started"])]
    row += ["-"] * (columns - len(row))
    if result.changes:
        row.append("(running)")
    return row


def _extra_cells(result: ListResult, m: dict[str, Any], tags_column: bool) -> list[str]:
    """The TAGS cell (when any run has tags) and one cell per `--metric` column (its last value)."""
    cells = [",".join(m.get("tags") or []) or "-"] if tags_column else []
    for name in result.metric_columns:
        value = metric_value(m.get("metrics"), name)
        cells.append("-" if value is None else f"{value:.4g}")
    return cells


def render_csv(result: ListResult, sep: str = ",") -> str:
    """`ledger list --csv`: one run a row; its listing fields, tags, note, every setting
    (`settings.NAME`) and every summary metric (`metrics.NAME.last`/`min`/`max` and their steps).
    A cell that would start a spreadsheet formula starts with `'` (`textfmt.csv_text`)."""
    base = ["id", "name", "state", "exit_code", "duration_s", "started", "replay_of", "tags", "note", "archived"]
    settings = sorted({k for m in result.rows for k in (m.get("settings") or {})})
    metrics = sorted({k for m in result.rows for k in (m.get("metrics") or {})})
    header = base + [f"settings.{k}" for k in settings] + [f"metrics.{k}.{w}" for k in metrics for w in SUMMARY_KEYS]
    rows = []
    for m in result.rows:
        s = summary(m)
        row: list[Any] = [s[k] if k != "tags" else " ".join(s["tags"]) for k in base]
        row += [_cell((m.get("settings") or {}).get(k)) for k in settings]
        row += [_cell(((m.get("metrics") or {}).get(k) or {}).get(w)) for k in metrics for w in SUMMARY_KEYS]
        rows.append(row)
    return csv_text(header, rows, sep)


def _cell(value: Any) -> Any:
    import json

    return json.dumps(value) if isinstance(value, (list, dict)) else value


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
            if len(changes) == 1:  # a replay is compared with its source
                text += (
                    f"   <- comparable with its source {m['replay_of']}"
                    if m.get("replay_of")
                    else "   <- comparable with the run before it"
                )
        out.append(printable_cell(f"{label}: {text}"))
    return "\n".join(out) + ("\n" if out else "no runs recorded yet\n")


def change_log_json(result: ListResult) -> list[dict[str, Any]]:
    """`ledger log --json`: per run its id, name, whether it is the first run, and its changes."""
    from ledger.textfmt import is_absent

    def plain(v: Any) -> Any:
        return None if is_absent(v) else v

    return [
        {
            "id": m["id"],
            "name": m.get("name"),
            "first": m["id"] == result.oldest_id,
            "changed": [
                {"name": c["name"], "a": plain(c["a"]), "b": plain(c["b"]), "absent_in": [k for k in ("a", "b") if is_absent(c[k])]}
                for c in result.changes.get(m["id"], [])
            ],
        }
        for m in result.rows
    ]


def show_run(start: Path, name: str) -> tuple[dict[str, Any], str, str | None]:
    """One run's manifest, as data and as its YAML text, and a note when its name is shared.

    A run still in progress (`latest` names it when one runs, as in `ledger tail`) gives its
    manifest so far, from the staging area, with `status.state: running` and a note saying so."""
    repo, cfg, tip = open_branch(start)
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
    if listing is not None:
        listing.refuse_broken(entry.id)
    raw = read_file_at(repo, entry, "manifest.yaml")
    if raw is None:
        from ledger.manifest import ManifestError

        raise ManifestError(f"run {entry.id} has no manifest.yaml", "the record is damaged")
    record, manifest = parse_record(raw, entry.path)
    shown, text = with_meta_block(manifest, raw.decode("utf-8", "replace"), repo.read_blob(entry.meta_blob) if entry.meta_blob else None)
    note: str | None = None
    run_name = record.name
    if listing is not None and run_name:
        same = runs_named(listing, run_name, repo, tip)
        older = same.index(entry.id) if entry.id in same else 0
        if older:
            note = f"{plural(older, 'older run')} {'shares' if older == 1 else 'share'} the name '{run_name}': " + ", ".join(
                f"{run_name}~{k}" for k in range(len(same) - older, len(same))[:5]
            )
    if listing is not None and tip is not None:
        from ledger.runref import own_runs, shared_name_note

        shared = shared_name_note(repo, tip, listing, entry, own_runs(repo, cfg.branch))
        note = f"{note}; {shared}" if note and shared else note or shared
    return shown, text, note


META_COMMENT = "# said about the run since it was recorded (ledger tag / note / archive); its record follows\n"


def with_meta_block(manifest: dict[str, Any], text: str, meta_raw: bytes | None) -> tuple[dict[str, Any], str]:
    """`ledger show`'s data and text: with a `meta` block first (tags, the note as it is now, the
    archived flag) when the run has a meta.json; the record itself unchanged after it."""
    if not meta_raw:
        return manifest, text
    from ledger import yamlio
    from ledger.storage.runmeta import parse_meta

    meta = parse_meta(meta_raw)
    block = {"tags": list(meta.tags), "note": meta.note if meta.note is not None else manifest.get("note"), "archived": meta.archived}
    return {"meta": block, **manifest}, META_COMMENT + yamlio.dumps({"meta": block}) + text


def run_folder(start: Path, name: str) -> str:
    repo, _cfg, tip = open_branch(start)
    return resolve(repo, tip, name).path
