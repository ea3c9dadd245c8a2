"""Runs in progress, read from the staging area (`.ledger/staging/<id>/`) while their job runs.

A run is `running` while the `ledger run` process that owns its staged folder is alive. What is
known of it: the manifest so far (`manifest.json`, written before the job started) and the job's
output as it arrives (`output.raw`), whose last Miles `perf N:` / `rollout N:` line gives the
current step and the time it was logged. Nothing here writes anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.compare.logparse import last_step
from ledger.storage import staging

ORPHANED_HINT = "`ledger recover` commits it"
TAIL_BYTES = 1 << 20  # how much of the end of the output is searched for the current step


@dataclass(frozen=True)
class LiveRun:
    """A run whose job is still running (or whose record is being written)."""

    staged: staging.Staged
    manifest: dict[str, Any]
    step: int | None
    last_step_at: str | None
    output_bytes: int
    orphaned: bool = False  # its `ledger run` is gone (SIGKILL, OOM, reboot): `ledger recover` commits it

    @property
    def id(self) -> str:
        return self.staged.id

    def summary(self) -> dict[str, Any]:
        """The fields `ledger list` shows, in the same shape as a recorded run's, plus progress."""
        from ledger.storage.listing import list_fields

        fields = list_fields({**self.manifest, "id": self.id, "status": None, "gpu": None})
        if self.orphaned:
            return {**fields, "state": "orphaned", "step": self.step, "last_step_at": self.last_step_at, "hint": ORPHANED_HINT}
        return {**fields, "state": "running", "step": self.step, "last_step_at": self.last_step_at}


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
        out.append(LiveRun(staged, manifest, step, when, size, orphaned=dead))
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
