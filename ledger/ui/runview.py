"""Everything `/runs/<run>` shows, read through ledger's own readers.

A recorded run: its manifest as `ledger show` reads it (`show_run`), tags and note from its
meta.json, its per-step metrics (`load_metrics`), heat log and trainer log tail (`tail_run`). A run
in progress: its staged record so far as `ledger diff --partial` reads it (`partial_run`: the
output so far split, redacted and parsed as the record will be), its staged heat log, and the
tail of its output so far. The run is named as anywhere in ledger (`ledger.runref`): id, prefix,
name, `NAME~N`, `latest`; never a path.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import msgspec

from ledger.commands.show import show_run
from ledger.commands.tail import tail_run
from ledger.errors import LedgerError, RunNotFound
from ledger.heat.heatlog import HeatLog, read_heat_log
from ledger.metrics.store import load_metrics
from ledger.metrics.table import MetricsTable
from ledger.opening import open_branch
from ledger.record.live import ORPHANED_HINT, LiveRun, LogSplitter, find_running, partial_run, running_runs
from ledger.runref import RunRef, resolve
from ledger.storage.git import Repo
from ledger.storage.listing import with_meta
from ledger.storage.store import RunEntry, read_file_at
from ledger.termstyle import printable

TAIL_LINES = 40


class RunView(msgspec.Struct, frozen=True):
    """One run as its page shows it."""

    id: str
    manifest: dict[str, Any]  # the record (a running run: its staged record so far)
    state: str
    running: bool = False
    step: int | None = None  # a running run's current step
    last_step_at: str | None = None
    tags: tuple[str, ...] = ()
    note: str | None = None
    table: MetricsTable | None = None
    heat: HeatLog | None = None
    log_tail: list[str] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)  # what the reader said (a shared name, settings so far)


def _shown(lines: list[bytes]) -> list[str]:
    return [printable(line.decode("utf-8", "replace")) for line in lines]


def _tail(start: Path, run_id: str) -> list[str]:
    """The trainer log's last lines, as `ledger tail` reads them (running or recorded)."""
    return _shown(tail_run(start, run_id, count=TAIL_LINES).lines)


def _orphan_tail(live: LiveRun, cfg: Any) -> list[str]:
    """An orphaned run's staged output, split and redacted as `ledger tail` does a running run's
    (`ledger tail` itself names only live or recorded runs)."""
    splitter = LogSplitter(tuple(cfg.engine_patterns), engine=False)
    lines: list[bytes] = []
    try:
        with open(live.staged.raw_output, "rb") as f:
            while data := f.read(1 << 20):
                lines = (lines + splitter.feed(data))[-TAIL_LINES:]
    except OSError:
        return []
    return _shown((lines + splitter.finish())[-TAIL_LINES:])


def _heat_from(raw: bytes | None) -> HeatLog | None:
    """A heat log's bytes parsed (the reader takes a file, as `ledger heat` gives it)."""
    if not raw:
        return None
    with tempfile.TemporaryDirectory(prefix="ledger-ui-heat-") as tmp:
        path = Path(tmp) / "heat.log"
        path.write_bytes(raw)
        log = read_heat_log(path)
    return log if log.samples else None


def _running_view(start: Path, live: LiveRun, cfg: Any) -> RunView:
    part = partial_run(live, cfg)
    heat_file = live.staged.run_dir / "heat.log"
    try:
        heat = _heat_from(heat_file.read_bytes()) if heat_file.is_file() else None
    except LedgerError:  # a heat log being written may hold a line cut short: no chart until it is whole
        heat = None
    notes = [] if part.settings_complete else ["settings so far: the training command has not shown yet"]
    if live.orphaned:
        notes.append(f"orphaned: its `ledger run` is gone; {ORPHANED_HINT}")
    else:
        notes.append("still running: settings, metrics and logs so far (the record is written when it ends)")
    return RunView(
        live.id,
        part.manifest,
        "orphaned" if live.orphaned else "running",
        running=True,
        step=live.step,
        last_step_at=live.last_step_at,
        note=part.manifest.get("note"),
        table=part.table,
        heat=heat,
        log_tail=_orphan_tail(live, cfg) if live.orphaned else _tail(start, live.id),
        notes=notes,
    )


def _orphaned(root: Path, name: str) -> LiveRun | None:
    """A staged run whose `ledger run` died (the table lists it), by its id or name."""
    found = [r for r in running_runs(root, orphaned=True) if r.orphaned and name in (r.id, r.manifest.get("name"))]
    return found[-1] if found else None


def _meta(repo: Repo, entry: RunEntry) -> tuple[tuple[str, ...], str | None, bool]:
    """Tags, note and archived flag from the run's meta.json (over the manifest's note)."""
    fields: dict[str, Any] = {}
    if entry.meta_blob is not None:
        with_meta(fields, repo.read_blob(entry.meta_blob))
    return tuple(fields.get("tags") or ()), fields.get("note"), bool(fields.get("archived"))


def run_view(start: Path, name: str) -> RunView:
    """The run `name` names: in progress first (as `ledger show`), else recorded at the tip."""
    RunRef.parse(name)  # a name with '/' or control characters is refused before anything is read
    repo, cfg, tip = open_branch(start)
    live = find_running(repo.root, name) or _orphaned(repo.root, name)
    if live is not None:
        return _running_view(start, live, cfg)
    manifest, _text, shared = show_run(start, name)
    run_id = str(manifest.get("id"))
    entry = resolve(repo, tip, run_id)
    if entry.id != run_id:
        raise RunNotFound(f"run {run_id} is not on the branch", "`ledger list` shows the runs")
    tags, note, archived = _meta(repo, entry)
    notes = [shared] if shared else []
    if archived:
        notes.append("archived: hidden from the runs table unless it shows archived runs")
    state = str((manifest.get("status") or {}).get("state") or "unknown")
    return RunView(
        run_id,
        manifest,
        state,
        tags=tags,
        note=note if note is not None else manifest.get("note"),
        table=load_metrics(repo, entry),
        heat=_heat_from(read_file_at(repo, entry, "heat.log")),
        log_tail=_tail(start, run_id),
        notes=notes,
    )
