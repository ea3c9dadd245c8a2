"""Where a finished run's per-step metrics are besides its output: the files its command names.

The run's own metric events (the `--save-debug-event-data` folder ledger adds, in its data
folder) are read with its logs (`ledger.metrics.jsonl.write_run_metrics`); these are the rest.
Read once the job has ended (`ledger.record.facts.metrics`), from the training command and the
job's working directory (relative paths are relative to it); only files modified since the run
started count, so that a folder shared by many runs gives only this run's:

- Miles' metric events in a folder of the command's: its `--save-debug-event-data` folder, or
  `DIR/events` of `--dump-details DIR`; they win over the log lines, as the run's own events do;
- a JSON-lines metrics file: the value of any flag whose name holds `metric` (`--metrics-file
  m.jsonl`, `--metrics-path out/`; a folder gives its `*.jsonl` files), and `metrics.jsonl` in the
  run's data folder (`$LEDGER_DATA_DIR`);
- TensorBoard event files (`events.out.tfevents.*`, at any depth): under `$TENSORBOARD_DIR` when the job's environment sets it, else
  Miles' `tensorboard_log/<--tb-project-name>/<--tb-experiment-name>` when `--use-tensorboard` is
  given (the project's folder when no experiment name is), and under a `--tensorboard-dir`,
  `--tb-dir` or `--logdir` folder.

The metrics files and TensorBoard add only metrics the logs and events do not have: a metric
logged both ways keeps the logged numbers (`ledger.metrics.metricfiles.add_missing`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ledger.data.outputs import find_outputs, training_args
from ledger.metrics.events import merge, parse_events
from ledger.metrics.metricfiles import add_missing, parse_metrics_file
from ledger.metrics.table import MetricsTable
from ledger.metrics.tbevents import TensorBoardMissing, event_files, parse_event_files
from ledger.metrics.trackers import TB_FLAGS
from ledger.runrecord import Command
from ledger.understand.settings import flag_groups

DATA_METRICS_FILE = "metrics.jsonl"
TENSORBOARD_ENV = "TENSORBOARD_DIR"
MILES_TB_ROOT = "tensorboard_log"


class MetricSources(msgspec.Struct, frozen=True):
    """The files of one run that may hold per-step metrics, each list in the order found."""

    event_dirs: list[Path] = msgspec.field(default_factory=list)
    metrics_files: list[Path] = msgspec.field(default_factory=list)
    tensorboard_files: list[Path] = msgspec.field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.event_dirs or self.metrics_files or self.tensorboard_files)


def _values(argv: list[str]) -> dict[str, str]:
    """flag name (no dashes) -> its last value; a switch -> ''."""
    out: dict[str, str] = {}
    for group in flag_groups(argv):
        if group.name is not None:
            out[group.name] = group.values[-1] if group.values else ""
    return out


def _fresh(path: Path, since: float | None) -> bool:
    try:
        return path.is_file() and (since is None or path.stat().st_mtime >= since)
    except OSError:
        return False


def _metrics_files(flags: Mapping[str, str], cwd: Path, data_dir: Path, since: float | None) -> list[Path]:
    out: list[Path] = []
    for name, value in flags.items():
        if "metric" not in name.lower() or not value or value.startswith("-"):
            continue
        path = cwd / value
        out += sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    out.append(data_dir / DATA_METRICS_FILE)
    return [p for p in dict.fromkeys(out) if _fresh(p, since)]


def _tensorboard_dirs(flags: Mapping[str, str], cwd: Path, env: Mapping[str, str]) -> list[Path]:
    dirs: list[Path] = []
    if env.get(TENSORBOARD_ENV):
        dirs.append(cwd / env[TENSORBOARD_ENV])
    elif "use-tensorboard" in flags:
        project, experiment = flags.get("tb-project-name"), flags.get("tb-experiment-name")
        dirs.append(cwd / MILES_TB_ROOT / project / experiment if project and experiment else cwd / MILES_TB_ROOT / (project or ""))
    dirs += [cwd / flags[name] for name in TB_FLAGS if flags.get(name)]
    return list(dict.fromkeys(dirs))


def job_env(command: Command, environ: Mapping[str, str]) -> dict[str, str]:
    """The job's environment as far as ledger knows it: ledger's own, the runtime env's variables over it."""
    runtime: Any = (command.runtime_env or {}).get("env_vars")
    return {**environ, **({str(k): str(v) for k, v in runtime.items()} if isinstance(runtime, dict) else {})}


def _unique(paths: list[Path]) -> list[Path]:
    """`paths` less the ones naming a folder already listed."""
    seen: dict[Path, Path] = {}
    for p in paths:
        seen.setdefault(p.resolve(), p)
    return list(seen.values())


def find_sources(command: Command, data_dir: Path, environ: Mapping[str, str], since: float | None) -> MetricSources:
    """The metric files a finished run wrote (rules in the module docstring)."""
    argv = list(command.training_argv or command.argv or [])
    cwd = Path(command.cwd or ".")
    flags = _values(training_args(argv))
    own = (data_dir / "events").resolve()
    events = [d for d in _unique([cwd / o.path for o in find_outputs(argv) if o.role == "events"]) if d.resolve() != own]
    tb = [f for d in _tensorboard_dirs(flags, cwd, job_env(command, environ)) for f in event_files(d, since)]
    return MetricSources(
        event_dirs=[d for d in events if d.is_dir()],
        metrics_files=_metrics_files(flags, cwd, data_dir, since),
        tensorboard_files=list(dict.fromkeys(tb)),
    )


def with_metric_files(table: MetricsTable, sources: MetricSources) -> tuple[MetricsTable, list[str]]:
    """`table` (from the logs) with what `sources` hold, and a warning for each that could not be read."""
    warnings: list[str] = []
    for folder in sources.event_dirs:
        table = merge(table, parse_events(folder))
    for path in sources.metrics_files:
        table = add_missing(table, parse_metrics_file(path))
    if sources.tensorboard_files:
        try:
            table = add_missing(table, parse_event_files(sources.tensorboard_files))
        except TensorBoardMissing as exc:
            warnings.append(exc.one_line())
    return table, warnings
