"""`.ledger.yaml`: the per-repository configuration, with defaults for every key."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.errors import LedgerError

CONFIG_NAME = ".ledger.yaml"

DEFAULT_ENGINE_PATTERNS = [r"\(SGLangEngine pid=\d+(?:, ip=[^)]*)?\)"]
DEFAULT_TRAINING_PATTERNS = [r"train(_async)?\.py$", r"^miles\.", r"^slime\."]
DEFAULT_ENV_PATTERNS = [
    "CUDA_*", "NCCL_*", "NVTE_*", "TORCH_*", "PYTORCH_*", "CUBLAS_*",
    "SGLANG_*", "MILES_*", "RAY_*", "PYTHONHASHSEED",
]

# set in the job's environment unless the user's environment already sets them (README, "What
# ledger sets in the job's environment"): Ray's log de-duplication drops metric lines it thinks
# repeated (a second trainer cell's per-step lines), so ledger turns it off.
DEFAULT_JOB_ENV = {"RAY_DEDUP_LOGS": "0"}

DEFAULT_TEXT = """\
# ledger configuration (see README.md, "Configuration"). Every key is optional.
branch: experiments          # where run commits go
# image: radixark/miles:latest   # default image when the command names none
ignore: []                   # extra settings (fnmatch globs) that `ledger diff` ignores
logs:
  engine_patterns: []        # extra regexes (at line start) for engine lines
  extra: []                  # globs of extra log files copied into the run at the end
  git_max_mb: 64             # a bigger trainer/engine log is tracked with DVC; git keeps head and tail
capture:
  debug_data: true           # add --save-debug-rollout-data / --save-debug-event-data when absent
  env_patterns: []           # extra environment variable globs recorded as env.<NAME> settings
  training_patterns: []      # extra regexes naming the training script inside launcher output
  job_env: {}                # variables ledger sets for the job (default RAY_DEDUP_LOGS: "0"; null removes one)
host_checkouts: {}           # name: path of source checkouts whose commits a host run records
heat_guard:
  enabled: true
  interval_s: 5
  pause_at: 85
  resume_at: 75
  resume_after: 30
  max_pause: 600
  # sensor: {timeline: heat.timeline}   # play a temperature timeline instead of NVML
diff:
  max_age_hours: 24
# dvc_remote: myremote
# secrets: {names: [SIGNATURE]}   # extra words that make a variable/flag/key name secret
"""


@dataclass(frozen=True)
class HeatConfig:
    enabled: bool = True
    interval_s: float = 5.0
    pause_at: float = 85.0
    resume_at: float = 75.0
    resume_after: float = 30.0
    max_pause: float = 600.0
    sensor: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Config:
    """The merged configuration: defaults overlaid with `.ledger.yaml`."""

    branch: str = "experiments"
    image: str | None = None
    ignore: tuple[str, ...] = ()
    engine_patterns: tuple[str, ...] = tuple(DEFAULT_ENGINE_PATTERNS)
    extra_logs: tuple[str, ...] = ()
    log_git_max_mb: float = 64.0
    debug_data: bool = True
    env_patterns: tuple[str, ...] = tuple(DEFAULT_ENV_PATTERNS)
    training_patterns: tuple[str, ...] = tuple(DEFAULT_TRAINING_PATTERNS)
    job_env: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_JOB_ENV))
    image_probes: dict[str, Any] = field(default_factory=dict)
    host_checkouts: dict[str, str] = field(default_factory=dict)
    heat: HeatConfig = field(default_factory=HeatConfig)
    max_age_hours: float = 24.0
    dvc_remote: str | None = None
    secret_names: tuple[str, ...] = ()  # extra words that make a name secret (`secrets: {names: [...]}`)


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise LedgerError(f"{CONFIG_NAME}: '{key}' must be a mapping", f"fix '{key}:' in {CONFIG_NAME}")
    return value


def _strings(value: Any, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise LedgerError(f"{CONFIG_NAME}: '{key}' must be a list of strings", f"fix '{key}' in {CONFIG_NAME}")
    return tuple(value)


def _number(value: Any, key: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise LedgerError(f"{CONFIG_NAME}: '{key}' must be a number", f"fix '{key}' in {CONFIG_NAME}") from exc


def _job_env(value: Any) -> dict[str, str]:
    if value is None:
        return dict(DEFAULT_JOB_ENV)
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise LedgerError(f"{CONFIG_NAME}: 'capture.job_env' must map variable names to values",
                          f"fix 'capture.job_env' in {CONFIG_NAME}, e.g. job_env: {{RAY_DEDUP_LOGS: \"1\"}}")
    merged: dict[str, str | None] = {**DEFAULT_JOB_ENV, **{k: None if v is None else str(v) for k, v in value.items()}}
    return {k: v for k, v in merged.items() if v is not None}


def load_config(root: Path) -> Config:
    """Read `<root>/.ledger.yaml` (absent means all defaults)."""
    path = root / CONFIG_NAME
    if not path.exists():
        return Config()
    from ledger import yamlio  # lazily: ruamel costs ~30 ms of `ledger run`'s start-up

    data = yamlio.load_file(path, CONFIG_NAME) or {}
    if not isinstance(data, dict):
        raise LedgerError(f"{CONFIG_NAME} must be a mapping", f"see `ledger init` for an example {CONFIG_NAME}")
    logs = _section(data, "logs")
    capture = _section(data, "capture")
    heat = _section(data, "heat_guard")
    diff = _section(data, "diff")
    secrets = _section(data, "secrets")
    try:
        heat_cfg = HeatConfig(
            enabled=bool(heat.get("enabled", True)),
            interval_s=float(heat.get("interval_s", 5)),
            pause_at=float(heat.get("pause_at", 85)),
            resume_at=float(heat.get("resume_at", 75)),
            resume_after=float(heat.get("resume_after", 30)),
            max_pause=float(heat.get("max_pause", 600)),
            sensor=dict(heat.get("sensor") or {}),
        )
        max_age = float(diff.get("max_age_hours", 24))
    except (TypeError, ValueError) as exc:
        raise LedgerError(f"{CONFIG_NAME}: a heat_guard or diff value is not a number ({exc})",
                          f"fix the numbers in {CONFIG_NAME}") from exc
    branch = data.get("branch", "experiments")
    if not isinstance(branch, str) or not branch or branch.startswith("-") or " " in branch:
        raise LedgerError(f"{CONFIG_NAME}: 'branch' must be a branch name", f"fix 'branch:' in {CONFIG_NAME}")
    return Config(
        branch=branch,
        image=data.get("image"),
        ignore=_strings(data.get("ignore"), "ignore"),
        engine_patterns=tuple(DEFAULT_ENGINE_PATTERNS) + _strings(logs.get("engine_patterns"), "logs.engine_patterns"),
        extra_logs=_strings(logs.get("extra"), "logs.extra"),
        log_git_max_mb=_number(logs.get("git_max_mb", 64), "logs.git_max_mb"),
        debug_data=bool(capture.get("debug_data", True)),
        env_patterns=tuple(DEFAULT_ENV_PATTERNS) + _strings(capture.get("env_patterns"), "capture.env_patterns"),
        training_patterns=tuple(DEFAULT_TRAINING_PATTERNS)
        + _strings(capture.get("training_patterns"), "capture.training_patterns"),
        job_env=_job_env(capture.get("job_env")),
        image_probes=dict(data.get("image_probes") or {}),
        host_checkouts={str(k): str(v) for k, v in (data.get("host_checkouts") or {}).items()},
        heat=heat_cfg,
        max_age_hours=max_age,
        dvc_remote=data.get("dvc_remote"),
        secret_names=_strings(secrets.get("names"), "secrets.names"),
    )
