"""Runs in progress, read from the staging area (`.ledger/staging/<id>/`) while their job runs.

A run is `running` while the `ledger run` process that owns its staged folder is alive. What is
known of it: the manifest so far (`manifest.json`, written before the job started) and the job's
output as it arrives (`output.raw`), whose last Miles `perf N:` / `rollout N:` line gives the
current step and the time it was logged. Nothing here writes anything.
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

import msgspec
from msgspec.structs import replace

from ledger.metrics.logparse import last_step, parse_logs
from ledger.record import facts
from ledger.record.rayrecover import running_on_ray
from ledger.redact.apply import redact_line
from ledger.runrecord import RunRecord
from ledger.storage import staging
from ledger.storage.listrow import ListFields, fields_of
from ledger.understand import shim, tracescan

ORPHANED_HINT = "`ledger recover` commits it"
ON_RAY_HINT = "`ledger recover --follow` records the run when it ends"

TAIL_BYTES = 1 << 20  # how much of the end of the output is searched for the current step


class LiveRun(msgspec.Struct, frozen=True):
    """A run whose job is still running (or whose record is being written)."""

    staged: staging.Staged
    manifest: dict[str, Any]
    step: int | None
    last_step_at: str | None
    output_bytes: int
    orphaned: bool = False  # its `ledger run` is gone (SIGKILL, OOM, reboot): `ledger recover` commits it
    on_ray: tuple[dict[str, object], ...] = ()  # orphaned, with Ray jobs `ledger recover` saw running on

    @property
    def id(self) -> str:
        return self.staged.id

    def summary(self) -> LiveRow:
        """The fields `ledger list` shows, as a recorded run's (state `running` or `orphaned`),
        and its progress."""
        fields = fields_of({**self.manifest, "id": self.id, "status": None, "gpu": None})
        if self.orphaned and self.on_ray:  # `ledger recover` found its Ray job running on
            jobs = ", ".join(str(j.get("submission_id")) for j in self.on_ray)
            hint = f"running on Ray (job {jobs}); {ON_RAY_HINT}"
            return LiveRow(replace(fields, state="orphaned"), self.step, self.last_step_at, hint, self.on_ray)
        if self.orphaned:
            return LiveRow(replace(fields, state="orphaned"), self.step, self.last_step_at, ORPHANED_HINT)
        return LiveRow(replace(fields, state="running"), self.step, self.last_step_at)


class LiveRow(msgspec.Struct, frozen=True):
    """A run in progress as `ledger list` shows it: the fields a recorded run shows (its state
    `running` or `orphaned`), its current step and when that was logged; an orphaned run's
    `hint` (what records it), and the Ray jobs it runs on where `ledger recover` saw them."""

    fields: ListFields
    step: int | None
    last_step_at: str | None
    hint: str | None = None
    on_ray: tuple[dict[str, object], ...] = ()

    def to_dict(self) -> dict[str, object]:
        """What `list --json` writes of it: the listing fields, then `step`, `last_step_at`,
        and `hint` and `on_ray` where it has them."""
        out: dict[str, object] = {**msgspec.structs.asdict(self.fields), "step": self.step, "last_step_at": self.last_step_at}
        if self.hint is not None:
            out["hint"] = self.hint
        if self.on_ray:
            out["on_ray"] = [dict(j) for j in self.on_ray]
        return out


def _tail(path: Path, size: int) -> tuple[bytes, int]:
    try:
        with open(path, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            f.seek(max(0, end - size))
            return f.read(), end
    except OSError:
        return b"", 0


def running_runs(root: Path, orphaned: bool = False) -> list[LiveRun]:
    """Staged runs whose ledger process is alive, oldest first; with `orphaned`, also those whose
    ledger is gone (state `orphaned`: `ledger recover` commits them)."""
    out = []
    for staged in staging.list_staged(root):
        dead = not staged.owner_alive()
        if dead and not orphaned:
            continue  # finished a moment ago, or lost (`ledger recover` commits those)
        manifest = staged.read_json("manifest.json")
        if manifest is None:
            continue  # still being prepared: the job has not started
        data, size = _tail(staged.raw_output, TAIL_BYTES)
        found = last_step(data)
        step, when = found if found else (None, None)
        on_ray = tuple(running_on_ray(staged)) if dead else ()
        out.append(LiveRun(staged, manifest, step, when, size, orphaned=dead, on_ray=on_ray))
    return out


def find_running(root: Path, name: str) -> LiveRun | None:
    """The running run named by id, id prefix, name, or `latest` (the newest running run)."""
    runs = running_runs(root)
    if name == "latest":
        return runs[-1] if runs else None
    exact = [r for r in runs if name in (r.id, r.manifest.get("name"))]
    if exact:
        return exact[-1]
    prefixed = [r for r in runs if r.id.startswith(name)]
    return prefixed[-1] if len(prefixed) == 1 else None


class LogSplitter:
    """Cuts raw output into lines and keeps those of one log, redacted, as the record will be
    (engine lines by the configured line-start patterns, everything else trainer)."""

    def __init__(self, patterns: tuple[str, ...], engine: bool):
        from ledger.redact.lines import engine_alternatives

        self._engine_re = re.compile(engine_alternatives(patterns))
        self._engine = engine
        self._rest = b""

    def feed(self, data: bytes) -> list[bytes]:
        data = self._rest + data
        cut = data.rfind(b"\n") + 1
        self._rest = data[cut:]
        out = []
        for line in data[:cut].splitlines(keepends=True):
            if (self._engine_re.match(line) is not None) == self._engine:
                out.append(redact_line(line))
        return out

    def finish(self) -> list[bytes]:
        rest, self._rest = self._rest, b""
        return self.feed(rest + b"\n") if rest else []


class PartialRun(msgspec.Struct, frozen=True):
    """What a running run has so far, in the shapes a recorded run's comparison reads."""

    live: LiveRun
    manifest: dict[str, Any]  # the staged manifest, with the settings the output so far shows
    table: Any  # MetricsTable | None: the per-step metrics logged so far
    settings_complete: bool  # False: no training command has shown yet (its settings are the staged manifest's)


def _staged_logs(live: LiveRun, patterns: tuple[str, ...], into: Path) -> list[Path]:
    """The output so far, split and redacted into `into`/trainer.log and engine.log; the last line,
    while the job may still be writing it, is left out. After the split, the staged logs."""
    raw = live.staged.raw_output
    if not raw.exists():
        return [live.staged.run_dir / "trainer.log", live.staged.run_dir / "engine.log"]
    paths = []
    for name, engine in (("trainer.log", False), ("engine.log", True)):
        splitter, path = LogSplitter(patterns, engine), into / name
        with open(raw, "rb") as src, open(path, "wb") as out:
            while data := src.read(1 << 20):
                out.writelines(splitter.feed(data))
        paths.append(path)
    return paths


def partial_run(live: LiveRun, cfg: Any) -> PartialRun:
    """Metrics parsed from the staged output so far (`parse_logs`, as the record parses its logs)
    and the settings that output shows (`facts.training_facts`, as the record computes them)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ledger-partial-") as tmp:
        logs = _staged_logs(live, tuple(cfg.engine_patterns), Path(tmp))
        table = parse_logs(logs)
        lines = tracescan.command_lines(logs)
    records = shim.read_log(live.staged.dir / shim.LOG_NAME)
    try:  # ledger's own environment is not this process's: the trainer's, where a wrapper saw it
        record = RunRecord.partial(live.manifest, live.id)
        job_argv = (live.staged.read_json("request.json") or {}).get("job_argv") or list(record.command.argv)
        record = facts.training_facts(record, cfg, lines, job_argv, records, environ={}).applied(record)
    except Exception:  # noqa: BLE001 - a partial view: the staged manifest's settings stand
        return PartialRun(live, copy.deepcopy(live.manifest), table if (table.rows or table.train_steps) else None, False)
    complete = record.command.training_argv is not None or bool(records)  # a command was seen
    return PartialRun(live, record.to_dict(), table if (table.rows or table.train_steps) else None, complete)
