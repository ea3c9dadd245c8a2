"""`.ledger.yaml`: the per-repository configuration, its schema, and the ONE place for defaults.

The file is validated against a pydantic schema (`ledger/configschema.py`) before anything runs: an unknown key, a wrong
type, a string where a boolean is meant, a regex that does not compile, a non-positive interval,
`pause_at <= resume_at`, a negative size or a branch name git refuses all end in one line naming
the key path and the fix (`ledger run` exits 125 and starts nothing).

Every default lives here once (the constants and `HeatConfig` below); the schema, the capture,
heat and init modules import them. A file that validated is remembered by the sha256 of its
bytes and of the schema's and this module's source (`.git/ledger/config/`, `ledger/configload.py`), so most commands start without
importing pydantic or ruamel (~150 ms). To add a key: a field in the schema's section model
(`extra="forbid"` rejects anything not declared) with its default from here, a line to
`DEFAULT_TEXT` if users should see it, and an attribute to `Config` set in `configschema`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CONFIG_NAME = ".ledger.yaml"

# SGLang engine lines as Ray prefixes them: "(SGLangEngine pid=123, ip=10.0.0.1) ..." (see
# /work/shared/miles-facts.md). Matched at a line start; must not match across a newline.
DEFAULT_ENGINE_PATTERNS: tuple[str, ...] = (r"^\(SGLangEngine pid=\d+(?:, ip=[^)\n]*)?\)",)
# The training script inside launcher output: Miles' train.py / train_async.py, and module paths of
# Miles and of slime (the project Miles grew from).
DEFAULT_TRAINING_PATTERNS: tuple[str, ...] = (r"(^|/)train(_async)?\.py$", r"^miles\.", r"^slime\.")
DEFAULT_ENV_PATTERNS: tuple[str, ...] = (
    "CUDA_*",
    "NCCL_*",
    "NVTE_*",
    "TORCH_*",
    "PYTORCH_*",
    "CUBLAS_*",
    "SGLANG_*",
    "MILES_*",
    "RAY_*",
    "PYTHONHASHSEED",
)
# set in the job's environment unless the user's environment already sets them (README, "What
# ledger sets in the job's environment"): Ray's log de-duplication drops metric lines it thinks
# repeated (a second trainer cell's per-step lines), so ledger turns it off.
DEFAULT_JOB_ENV: dict[str, str] = {"RAY_DEDUP_LOGS": "0"}


DEFAULT_BRANCH = "experiments"
DEFAULT_GIT_MAX_MB = 64.0  # a bigger trainer/engine log is tracked with DVC
DEFAULT_DEBUG_DATA = True
DEFAULT_STOP_GRACE_S = 30.0
DEFAULT_MAX_AGE_HOURS = 24.0


@dataclass(frozen=True)
class HeatConfig:
    """`heat_guard:`: pause the job while a GPU is too hot (see ledger/heat); the defaults."""

    enabled: bool = True
    interval_s: float = 5.0
    pause_at: float = 85.0
    resume_at: float = 75.0
    resume_after: float = 30.0
    max_pause: float = 600.0
    sensor: dict[str, Any] = field(default_factory=dict)


HEAT = HeatConfig()  # the heat defaults, for modules that take thresholds as arguments

DEFAULT_TEXT = f"""\
# ledger configuration (see README.md, "Configuration"). Every key is optional.
branch: {DEFAULT_BRANCH}          # where run commits go
# image: radixark/miles:latest   # default image when the command names none
ignore: []                   # extra settings (fnmatch globs) that `ledger diff` ignores
code:
  ignore: []                 # globs of tracked files that are not code (docs, *.md, .dvc/ never are)
logs:
  engine_patterns: []        # extra regexes (at line start) for engine lines
  extra: []                  # globs of extra log files copied into the run at the end
  git_max_mb: {DEFAULT_GIT_MAX_MB:g}             # a bigger trainer/engine log is tracked with DVC; git keeps head and tail
capture:
  debug_data: {str(DEFAULT_DEBUG_DATA).lower()}           # add --save-debug-rollout-data / --save-debug-event-data when absent
  env_patterns: []           # extra environment variable globs recorded as env.<NAME> settings
  training_patterns: []      # extra regexes naming the training script inside launcher output
  job_env: {{}}                # variables ledger sets for the job (default RAY_DEDUP_LOGS: "0"; null removes one)
host_checkouts: {{}}           # name: path of source checkouts whose commits a host run records
heat_guard:
  enabled: {str(HEAT.enabled).lower()}
  interval_s: {HEAT.interval_s:g}
  pause_at: {HEAT.pause_at:g}
  resume_at: {HEAT.resume_at:g}
  resume_after: {HEAT.resume_after:g}
  max_pause: {HEAT.max_pause:g}
  # sensor: {{timeline: heat.timeline}}   # play a temperature timeline instead of NVML
job:
  stop_grace_s: {DEFAULT_STOP_GRACE_S:g}           # after a forwarded stop signal, SIGKILL the job this much later
diff:
  max_age_hours: {DEFAULT_MAX_AGE_HOURS:g}
  # replica_keys: [data-seed]   # settings (globs) replicas may differ in, beside seed and rollout-seed
# dvc_remote: myremote
# secrets: {{names: [SIGNATURE]}}   # extra words that make a variable/flag/key name secret
"""


@dataclass(frozen=True)
class Config:
    """The merged configuration: defaults overlaid with `.ledger.yaml` (flat, as code reads it)."""

    branch: str = DEFAULT_BRANCH
    image: str | None = None
    ignore: tuple[str, ...] = ()
    engine_patterns: tuple[str, ...] = DEFAULT_ENGINE_PATTERNS
    extra_logs: tuple[str, ...] = ()
    log_git_max_mb: float = DEFAULT_GIT_MAX_MB
    debug_data: bool = DEFAULT_DEBUG_DATA
    env_patterns: tuple[str, ...] = DEFAULT_ENV_PATTERNS
    training_patterns: tuple[str, ...] = DEFAULT_TRAINING_PATTERNS
    job_env: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_JOB_ENV))
    image_probes: dict[str, Any] = field(default_factory=dict)
    host_checkouts: dict[str, str] = field(default_factory=dict)
    heat: HeatConfig = HEAT
    max_age_hours: float = DEFAULT_MAX_AGE_HOURS
    dvc_remote: str | None = None
    stop_grace_s: float = DEFAULT_STOP_GRACE_S
    secret_names: tuple[str, ...] = ()  # extra words that make a name secret (`secrets: {names: [...]}`)
    replica_keys: tuple[str, ...] = ()  # `diff: replica_keys:` settings (globs) replicas may differ in, beside the seeds
    code_ignore: tuple[str, ...] = ()  # `code: ignore:` globs of files that are not code (docs/diff.md)
