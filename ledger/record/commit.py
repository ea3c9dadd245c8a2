"""The scrub and the commit: the last stages of a run's record (`ledger.record.run.finish`).

The run folder's logs scrubbed a last time (`scrubbed_logs`), logs too big for git tracked with
DVC (`big_logs`), the tracker links the job printed (`with_trackers`); then, once the record
itself is scrubbed (`ledger.redact.runscrub.scrub_record`), the record files written from it and
the folder committed to the branch (`committed`). Data the job wrote that no record holds is kept
on disk, never deleted with the staging folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from ledger import yamlio
from ledger.config import Config
from ledger.fsutil import write_atomic
from ledger.manifest import duration_text, readable, run_path, status_line, storable
from ledger.record import datatrack
from ledger.record.derived import guarded
from ledger.record.jobsetup import Say
from ledger.redact.runscrub import scrub_logs
from ledger.runrecord import RunRecord, replace
from ledger.storage import staging
from ledger.storage.git import CodeSnapshot, Repo
from ledger.storage.store import commit_message, write_run

if TYPE_CHECKING:
    from ledger.record.streamed import StreamResult


def scrubbed_logs(record: RunRecord, run_dir: Path, secrets: set[str], logs: StreamResult, cfg: Config) -> RunRecord:
    """The run folder's logs scrubbed a last time; what was hidden, in `redacted`."""
    hidden = scrub_logs(run_dir, secrets, logs.found, cfg.secrets.names)
    return replace(record, redacted=sorted({*record.redacted, *hidden})) if hidden else record


def big_logs(record: RunRecord, repo: Repo, cfg: Config, staged: staging.Staged, logs: StreamResult, say: Say) -> RunRecord:
    """A trainer/engine log over `logs: git_max_mb` tracked with DVC (`datatrack.offload_big_logs`)."""
    warnings = list(record.warnings)
    offloaded = guarded(warnings, "tracking big logs", lambda: datatrack.offload_big_logs(repo, cfg, staged, record.id, say, logs.md5), say)
    if offloaded is None:
        return replace(record, warnings=warnings)
    return replace(record, data=[*record.data, offloaded[0]], logs=replace(record.logs, in_dvc=offloaded[1]), warnings=warnings)


def with_trackers(record: RunRecord, run_dir: Path) -> RunRecord:
    """`trackers`: the W&B/MLflow run the job printed."""
    from ledger.metrics.trackers import find_trackers

    return replace(record, trackers=find_trackers(run_dir / "trainer.log", dict(record.settings)))


def committed(record: RunRecord, repo: Repo, cfg: Config, staged: staging.Staged, code: CodeSnapshot, logs: StreamResult, say: Say) -> str:
    """The run folder's record files (manifest.yaml, summary.json, settings.json, status) written
    from the record, the folder committed, the staging folder dropped."""
    from ledger.storage.summary import summary_of

    run_dir, status = staged.run_dir, record.status
    duration = duration_text(status.duration_s or 0.0)
    write_atomic(run_dir / "status", status_line(status.exit_code, status.signal, status.duration_s or 0.0, record.finished))
    text = storable(record.to_dict())  # valid UTF-8; bytes that were not are kept exactly in `raw_bytes`
    yamlio.dump_file(run_dir / "manifest.yaml", text)
    summary = summary_of(text, logs.summary_for(run_dir / "metrics.jsonl"))  # list filters read these, not the table
    write_atomic(run_dir / "summary.json", json.dumps(summary, default=str, separators=(",", ":")) + "\n")
    write_atomic(run_dir / "settings.json", json.dumps(readable(dict(record.settings)), default=str, indent=0) + "\n")
    exit_text = f"exit {status.exit_code if status.exit_code is not None else '-'}"
    if status.state in ("killed", "lost"):
        exit_text += f" ({status.state}{', ' + status.signal if status.signal else ''})"
    name = readable(record.name)
    message = commit_message(record.id, name, exit_text, duration, code.commit)
    tree = repo.tree_from_dir(run_dir)
    commit = write_run(repo, cfg.branch, code, record.id, tree, message)
    _keep_untracked_data(repo.root, staged, record, say)
    staged.remove()
    repo.gc_auto()
    say(
        f"ledger: recorded run {record.id}{' (' + name + ')' if name else ''}: {status.state}, "
        f"exit {status.exit_code}, {duration} -> {cfg.branch} {commit[:10]} ({run_path(record.id)})"
    )
    return commit


def _keep_untracked_data(root: Path, staged: staging.Staged, record: RunRecord, say: Say) -> None:
    """Whatever the job wrote under the run's data folder and no tracked record holds stays on
    disk (never deleted with the staging folder)."""
    tracked = {str(d.template).split("/")[1] for d in record.data if d.tracked and str(d.template or "").startswith("data/")}
    if not staged.data_dir.is_dir():
        return
    for source in sorted(staged.data_dir.iterdir()):
        if source.name in tracked:
            continue
        dest = staging.ledger_dir(root) / "untracked" / record.id / source.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(source), dest)
        say(f"ledger: untracked data of run {record.id} kept at {dest}")
