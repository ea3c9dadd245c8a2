"""`.ledger.yaml`: the per-repository configuration, its schema, and the ONE place for defaults.

The file is validated against a pydantic schema before anything runs: an unknown key, a wrong
type, a string where a boolean is meant, a regex that does not compile, a non-positive interval,
`pause_at <= resume_at`, a negative size or a branch name git refuses all end in one line naming
the key path and the fix (`ledger run` exits 125 and starts nothing).

Every default lives here once (the schema's field defaults, and the pattern lists below); the
capture, heat and init modules import them. To add a key: add a field to the section model
(`extra="forbid"` rejects anything not declared), a line to `DEFAULT_TEXT` if users should see
it, and an attribute to `Config` with its value in `load_config`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from ledger.errors import LedgerError

CONFIG_NAME = ".ledger.yaml"

# SGLang engine lines as Ray prefixes them: "(SGLangEngine pid=123, ip=10.0.0.1) ..." (see
# /work/shared/miles-facts.md). Matched at a line start; must not match across a newline.
DEFAULT_ENGINE_PATTERNS: tuple[str, ...] = (r"^\(SGLangEngine pid=\d+(?:, ip=[^)\n]*)?\)",)
# The training script inside launcher output: Miles' train.py / train_async.py, and module paths of
# Miles and of slime (the project Miles grew from).
DEFAULT_TRAINING_PATTERNS: tuple[str, ...] = (r"(^|/)train(_async)?\.py$", r"^miles\.", r"^slime\.")
DEFAULT_ENV_PATTERNS: tuple[str, ...] = (
    "CUDA_*", "NCCL_*", "NVTE_*", "TORCH_*", "PYTORCH_*", "CUBLAS_*",
    "SGLANG_*", "MILES_*", "RAY_*", "PYTHONHASHSEED",
)
# set in the job's environment unless the user's environment already sets them (README, "What
# ledger sets in the job's environment"): Ray's log de-duplication drops metric lines it thinks
# repeated (a second trainer cell's per-step lines), so ledger turns it off.
DEFAULT_JOB_ENV: dict[str, str] = {"RAY_DEDUP_LOGS": "0"}


def _regex(pattern: str) -> str:
    try:
        re.compile(pattern.removeprefix("^").encode("utf-8", "surrogateescape"))
    except re.error as exc:
        raise ValueError(f"regex {pattern!r} does not compile ({exc})") from exc
    return pattern


def _branch(name: str) -> str:
    from ledger.storage.git import valid_branch_name  # lazily: the heat modules import this one

    if not valid_branch_name(name):
        raise ValueError(f"{name!r} is not a branch name git accepts")
    return name


Regex = Annotated[str, AfterValidator(_regex)]
BranchName = Annotated[str, AfterValidator(_branch)]


class _Section(BaseModel):
    # strict: `debug_data: "no"` is an error, not True; frozen: the values are facts of the run
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class HeatConfig(_Section):
    """`heat_guard:`: pause the job while a GPU is too hot (see ledger/heat)."""

    enabled: bool = True
    interval_s: Annotated[float, Field(gt=0)] = 5.0
    pause_at: float = 85.0
    resume_at: float = 75.0
    resume_after: Annotated[float, Field(ge=0)] = 30.0
    max_pause: Annotated[float, Field(ge=0)] = 600.0
    sensor: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _hysteresis(self) -> HeatConfig:
        if self.pause_at <= self.resume_at:
            raise ValueError(f"pause_at ({self.pause_at:g}) must be above resume_at ({self.resume_at:g})")
        return self


class LogsSection(_Section):
    engine_patterns: list[Regex] = Field(default_factory=list)
    extra: list[str] = Field(default_factory=list)
    git_max_mb: Annotated[float, Field(gt=0)] = 64.0


class CaptureSection(_Section):
    debug_data: bool = True
    env_patterns: list[str] = Field(default_factory=list)
    training_patterns: list[Regex] = Field(default_factory=list)
    # merged over DEFAULT_JOB_ENV; a null value removes a default
    job_env: dict[str, str | int | float | None] = Field(default_factory=dict)


class JobSection(_Section):
    # after ledger forwards SIGTERM/SIGINT/SIGHUP, the job's group gets SIGKILL this much later
    stop_grace_s: Annotated[float, Field(ge=0)] = 30.0


class SecretsSection(_Section):
    names: list[str] = Field(default_factory=list)  # extra words that make a variable/flag/key name secret


class DiffSection(_Section):
    max_age_hours: Annotated[float, Field(ge=0)] = 24.0


class ConfigFile(_Section):
    """The whole `.ledger.yaml` as written (every key optional)."""

    branch: BranchName = "experiments"
    image: str | None = None
    ignore: list[str] = Field(default_factory=list)
    logs: LogsSection = Field(default_factory=LogsSection)
    capture: CaptureSection = Field(default_factory=CaptureSection)
    host_checkouts: dict[str, str] = Field(default_factory=dict)
    heat_guard: HeatConfig = Field(default_factory=HeatConfig)
    job: JobSection = Field(default_factory=JobSection)
    diff: DiffSection = Field(default_factory=DiffSection)
    dvc_remote: str | None = None
    image_probes: dict[str, Any] = Field(default_factory=dict)
    secrets: SecretsSection = Field(default_factory=SecretsSection)


HEAT = HeatConfig()  # the heat defaults, for modules that take thresholds as arguments
_D = ConfigFile.model_construct()  # defaults without validation (no git call at import)

DEFAULT_TEXT = f"""\
# ledger configuration (see README.md, "Configuration"). Every key is optional.
branch: {_D.branch}          # where run commits go
# image: radixark/miles:latest   # default image when the command names none
ignore: []                   # extra settings (fnmatch globs) that `ledger diff` ignores
logs:
  engine_patterns: []        # extra regexes (at line start) for engine lines
  extra: []                  # globs of extra log files copied into the run at the end
  git_max_mb: {LogsSection().git_max_mb:g}             # a bigger trainer/engine log is tracked with DVC; git keeps head and tail
capture:
  debug_data: {str(CaptureSection().debug_data).lower()}           # add --save-debug-rollout-data / --save-debug-event-data when absent
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
  stop_grace_s: {JobSection().stop_grace_s:g}           # after a forwarded stop signal, SIGKILL the job this much later
diff:
  max_age_hours: {DiffSection().max_age_hours:g}
# dvc_remote: myremote
# secrets: {{names: [SIGNATURE]}}   # extra words that make a variable/flag/key name secret
"""


@dataclass(frozen=True)
class Config:
    """The merged configuration: defaults overlaid with `.ledger.yaml` (flat, as code reads it)."""

    branch: str = _D.branch
    image: str | None = None
    ignore: tuple[str, ...] = ()
    engine_patterns: tuple[str, ...] = DEFAULT_ENGINE_PATTERNS
    extra_logs: tuple[str, ...] = ()
    log_git_max_mb: float = LogsSection().git_max_mb
    debug_data: bool = CaptureSection().debug_data
    env_patterns: tuple[str, ...] = DEFAULT_ENV_PATTERNS
    training_patterns: tuple[str, ...] = DEFAULT_TRAINING_PATTERNS
    job_env: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_JOB_ENV))
    image_probes: dict[str, Any] = field(default_factory=dict)
    host_checkouts: dict[str, str] = field(default_factory=dict)
    heat: HeatConfig = HEAT
    max_age_hours: float = DiffSection().max_age_hours
    dvc_remote: str | None = None
    stop_grace_s: float = JobSection().stop_grace_s
    secret_names: tuple[str, ...] = ()  # extra words that make a name secret (`secrets: {names: [...]}`)

    @classmethod
    def from_file(cls, f: ConfigFile) -> Config:
        return cls(
            branch=f.branch,
            image=f.image,
            ignore=tuple(f.ignore),
            engine_patterns=DEFAULT_ENGINE_PATTERNS + tuple(f.logs.engine_patterns),
            extra_logs=tuple(f.logs.extra),
            log_git_max_mb=f.logs.git_max_mb,
            debug_data=f.capture.debug_data,
            env_patterns=DEFAULT_ENV_PATTERNS + tuple(f.capture.env_patterns),
            training_patterns=DEFAULT_TRAINING_PATTERNS + tuple(f.capture.training_patterns),
            job_env=_job_env(f.capture.job_env),
            image_probes=dict(f.image_probes),
            host_checkouts=dict(f.host_checkouts),
            heat=f.heat_guard,
            max_age_hours=f.diff.max_age_hours,
            dvc_remote=f.dvc_remote,
            stop_grace_s=f.job.stop_grace_s,
            secret_names=tuple(f.secrets.names),
        )


def _job_env(given: dict[str, str | int | float | None]) -> dict[str, str]:
    merged = {**DEFAULT_JOB_ENV, **{k: None if v is None else str(v) for k, v in given.items()}}
    return {k: v for k, v in merged.items() if v is not None}


def _drop_nulls(data: dict[str, Any]) -> dict[str, Any]:
    """`key:` with nothing after it means "the default", at the top level and in sections."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if value is None:
            continue
        if isinstance(value, dict) and key in ConfigFile.model_fields and isinstance(
                ConfigFile.model_fields[key].default_factory, type):
            value = {k: v for k, v in value.items() if v is not None}
        out[key] = value
    return out


def _known_keys(loc: tuple[Any, ...]) -> list[str]:
    model: type[BaseModel] = ConfigFile
    for part in loc[:-1]:
        info = model.model_fields.get(str(part))
        ann = info.annotation if info else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return []
        model = ann
    return list(model.model_fields)


def explain(exc: ValidationError) -> LedgerError:
    """The first schema error as one line: the key path, what is wrong, how to fix it."""
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    path = ".".join(str(p) for p in loc) or "(top level)"
    kind = err["type"]
    if kind == "extra_forbidden":
        known = _known_keys(loc)
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        fix = f"did you mean '{close[0]}'?" if close else f"known keys here: {', '.join(known)}"
        return LedgerError(f"{CONFIG_NAME}: unknown key '{path}'", f"{fix} Fix or remove it in {CONFIG_NAME}")
    msg = str(err["msg"]).removeprefix("Value error, ")
    given = err.get("input")
    shown = "" if isinstance(given, dict | list) or kind == "value_error" else f" (got {given!r})"
    return LedgerError(f"{CONFIG_NAME}: {path}: {msg}{shown}",
                       f"fix '{path}' in {CONFIG_NAME}; `ledger init` in an empty repo writes an example")


def parse_config(data: Any) -> Config:
    """Validate the parsed YAML of `.ledger.yaml` (None: an empty file) into a `Config`."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise LedgerError(f"{CONFIG_NAME} must be a mapping of keys", f"see `ledger init` for an example {CONFIG_NAME}")
    try:
        return Config.from_file(ConfigFile.model_validate(_drop_nulls(data)))
    except ValidationError as exc:
        raise explain(exc) from None


def load_config(root: Path) -> Config:
    """Read and validate `<root>/.ledger.yaml` (absent means all defaults)."""
    path = root / CONFIG_NAME
    if not path.exists():
        return Config()
    from ledger import yamlio  # lazily: ruamel costs ~30 ms of `ledger run`'s start-up

    return parse_config(yamlio.load_file(path, CONFIG_NAME))
