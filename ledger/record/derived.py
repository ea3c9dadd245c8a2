"""Derived facts: what the record learns once the job has ended (`derived_facts`).

Each step returns its part of the record: the settings of the training command the job really
ran, the extra logs, the per-step metrics, the DVC-tracked data and its rollout ids, a replay's
fidelity. The facts themselves are computed in `ledger.record.facts`; a step that fails is a
warning in the record (`guarded`), never a lost run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from ledger.config import Config
from ledger.record import datatrack, facts
from ledger.record.jobsetup import Say
from ledger.redact.runscrub import as_texts
from ledger.redact.scanner import Redactor
from ledger.runrecord import DataEntry, RunRecord, replace
from ledger.storage import staging
from ledger.storage.git import Repo
from ledger.understand import shim

if TYPE_CHECKING:
    from ledger.record.streamed import StreamResult

T = TypeVar("T")


def guarded(warnings: list[str], what: str, fn: Callable[[], T], say: Say) -> T | None:
    """`fn()`, or None with a warning appended to `warnings` when it fails: one fact never loses the run."""
    try:
        return fn()
    except Exception as exc:  # one fact failing must never lose the run
        text = f"{what} failed: {type(exc).__name__}: {exc}"
        warnings.append(text)
        say(f"ledger: {text}")
        return None


class _Deriving(msgspec.Struct):
    """What the steps of `derived_facts` share: the run, its log results, and the warnings and
    `redacted` entries gathered so far."""

    repo: Repo
    cfg: Config
    staged: staging.Staged
    logs: StreamResult
    say: Say
    secrets: set[str]
    environ: dict[str, str] | None
    warnings: list[str] = msgspec.field(default_factory=list)
    redacted: set[str] = msgspec.field(default_factory=set)

    def guarded(self, what: str, fn: Callable[[], T]) -> T | None:
        return guarded(self.warnings, what, fn, self.say)

    def training(self, record: RunRecord) -> RunRecord:
        """`command.training_argv`, the settings, seeds and env of the command the job really ran."""
        job_argv = (self.staged.read_json("request.json") or {}).get("job_argv") or list(record.command.argv)
        records = shim.read_log(self.staged.dir / shim.LOG_NAME)
        lines = self.logs.command_lines
        found = self.guarded(
            "reading the training command", lambda: facts.training_facts(record, self.cfg, lines, job_argv, records, self.environ)
        )
        if found is None:
            return record
        self.redacted.update(found.redacted)
        self.warnings.extend(found.warnings)
        return found.applied(record)

    def extra_logs(self, record: RunRecord) -> RunRecord:
        """`logs.extra`: the `logs: extra` files, copied redacted."""
        extra = self.guarded("copying extra logs", lambda: facts.extra_logs(self.cfg, self.repo.root, self.staged.run_dir, self.secrets))
        if extra is None:
            return record
        self.redacted.update(extra[1])
        return replace(record, logs=replace(record.logs, extra=extra[0]), redacted=sorted(self.redacted))

    def metrics(self, record: RunRecord) -> RunRecord:
        """`logs.metrics`: metrics.jsonl, from the logs and the metric files the run wrote."""
        staged, ran = self.staged, record.command
        found = self.guarded(
            "parsing metrics",
            lambda: facts.metrics(staged.run_dir, staged.data_dir, self.logs, ran, record.started, self.environ, self.say),
        )
        if found is None:
            return record
        self.warnings.extend(found[1])
        return replace(record, logs=replace(record.logs, metrics=found[0])) if found[0] else record

    def data(self, record: RunRecord) -> RunRecord:
        """`data`: the run's outputs tracked with DVC, the rollout data's ids listed."""
        command, data = record.command, list(record.data)
        # the run's known values, and the values the rules removed from its logs: a data file holding one is held back
        screen = Redactor(self.secrets | as_texts(self.logs.found), self.cfg.secrets.names)
        tracked = self.guarded("tracking data", lambda: datatrack.track_data(self.repo, self.staged, command, self.say, screen))
        if tracked is not None:
            data = tracked
        with_ids = self.guarded("listing the recorded rollout ids", lambda: _with_rollout_ids(self.staged, data, str(command.cwd)))
        return replace(record, data=with_ids if with_ids is not None else data)

    def fidelity(self, record: RunRecord) -> RunRecord:
        """`replay.fidelity` of a replay: its learning metrics against its source run's."""
        replay = record.replay
        if not record.replay_of or replay is None:
            return record
        so_far = replace(record, warnings=list(self.warnings))
        found = self.guarded(
            "comparing the replay with its run", lambda: _replay_fidelity(self.repo, so_far, self.staged.run_dir, self.say)
        )
        return record if found is None else replace(record, replay=replace(replay, fidelity=found))


def derived_facts(
    repo: Repo,
    cfg: Config,
    staged: staging.Staged,
    record: RunRecord,
    logs: StreamResult,
    say: Say,
    secrets: set[str],
    environ: dict[str, str] | None,
) -> RunRecord:
    """The facts derived once the job has ended, each step returning its part of the record: the
    training command's settings, extra logs, metrics, DVC-tracked data, rollout ids, a replay's
    fidelity. A step that fails is a warning in the record, never a lost run."""
    steps = _Deriving(repo, cfg, staged, logs, say, secrets, environ, list(record.warnings), {*record.redacted, *logs.redacted})
    record = replace(record, logs=replace(record.logs, split=logs.where), redacted=sorted(steps.redacted))
    for step in (steps.training, steps.extra_logs, steps.metrics, steps.data, steps.fidelity):
        record = step(record)
    run_dir = staged.run_dir
    for log in ("trainer.log", "engine.log"):
        if not (run_dir / log).exists():  # (never touched: a new mtime would void the worker's md5)
            (run_dir / log).touch()
    if (run_dir / "heat.log").exists():
        record = replace(record, logs=replace(record.logs, heat="heat.log"))
    return replace(record, warnings=steps.warnings)


def _with_rollout_ids(staged: staging.Staged, data: list[DataEntry], cwd: str) -> list[DataEntry]:
    """The `data` section with `rollout_ids` on the rollout data record: which rollouts a replay
    can pick (`--step N`)."""
    out = []
    for rec in data:
        ids = _rollout_ids(staged, rec, cwd) if rec.role == "rollout" and rec.template else None
        out.append(rec if ids is None else replace(rec, rollout_ids=ids))
    return out


def _rollout_ids(staged: staging.Staged, rec: DataEntry, cwd: str) -> list[int | str] | None:
    """The rollout ids of the files a rollout data record's template names (numbers first, in
    order); None when its template names no `{rollout_id}` or its folder is gone."""
    base = _template_path(staged, str(rec.template), cwd)
    if "{rollout_id}" not in base.name or not base.parent.is_dir():
        return None
    pattern = re.compile(re.escape(base.name).replace(re.escape("{rollout_id}"), "(.+)") + "$")
    found = [match.group(1) for p in base.parent.iterdir() if (match := pattern.match(p.name))]
    numbers: list[int | str] = sorted(int(x) for x in found if x.isdigit())
    return [*numbers, *sorted(x for x in found if not x.isdigit())]


def _template_path(staged: staging.Staged, template: str, cwd: str) -> Path:
    """Where a data record's template points: into the staged run (`data/...`), else from `cwd`."""
    if template.startswith("data/"):
        return staged.dir / template
    return Path(template) if Path(template).is_absolute() else Path(cwd) / template


def _replay_fidelity(repo: Repo, record: RunRecord, run_dir: Path, say: Say) -> Mapping[str, Any] | None:
    """`replay.fidelity`: the replay's learning metrics against its source run's."""
    from ledger.compare.fidelity import describe, fidelity_of

    result = fidelity_of(repo, record, run_dir)
    if result is not None:
        say(f"ledger: replay fidelity against {record.replay_of}: {describe(result)}")
    return result
