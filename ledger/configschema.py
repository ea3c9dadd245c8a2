"""The schema of `.ledger.yaml` (pydantic), and its one-line errors.

Imported only to validate a file `ledger.configload.load_config` has not seen before (pydantic costs
~120 ms of start-up); the defaults themselves live in `ledger/config.py`, once.
"""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from ledger.config import (
    CONFIG_NAME,
    DEFAULT_BRANCH,
    DEFAULT_DEBUG_DATA,
    DEFAULT_ENGINE_PATTERNS,
    DEFAULT_ENV_PATTERNS,
    DEFAULT_GIT_MAX_MB,
    DEFAULT_JOB_ENV,
    DEFAULT_MAX_AGE_HOURS,
    DEFAULT_STOP_GRACE_S,
    DEFAULT_TRAINING_PATTERNS,
    HEAT,
    Config,
    HeatConfig,
)
from ledger.errors import LedgerError


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


class HeatSection(_Section):
    """`heat_guard:`: pause the job while a GPU is too hot (see ledger/heat)."""

    enabled: bool = HEAT.enabled
    interval_s: Annotated[float, Field(gt=0)] = HEAT.interval_s
    pause_at: float = HEAT.pause_at
    resume_at: float = HEAT.resume_at
    resume_after: Annotated[float, Field(ge=0)] = HEAT.resume_after
    max_pause: Annotated[float, Field(ge=0)] = HEAT.max_pause
    sensor: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _hysteresis(self) -> HeatSection:
        if self.pause_at <= self.resume_at:
            raise ValueError(f"pause_at ({self.pause_at:g}) must be above resume_at ({self.resume_at:g})")
        return self


class LogsSection(_Section):
    engine_patterns: list[Regex] = Field(default_factory=list)
    extra: list[str] = Field(default_factory=list)
    git_max_mb: Annotated[float, Field(gt=0)] = DEFAULT_GIT_MAX_MB


class CaptureSection(_Section):
    debug_data: bool = DEFAULT_DEBUG_DATA
    env_patterns: list[str] = Field(default_factory=list)
    training_patterns: list[Regex] = Field(default_factory=list)
    # merged over DEFAULT_JOB_ENV; a null value removes a default
    job_env: dict[str, str | int | float | None] = Field(default_factory=dict)


class JobSection(_Section):
    # after ledger forwards SIGTERM/SIGINT/SIGHUP, the job's group gets SIGKILL this much later
    stop_grace_s: Annotated[float, Field(ge=0)] = DEFAULT_STOP_GRACE_S


class SecretsSection(_Section):
    names: list[str] = Field(default_factory=list)  # extra words that make a variable/flag/key name secret


class DiffSection(_Section):
    max_age_hours: Annotated[float, Field(ge=0)] = DEFAULT_MAX_AGE_HOURS
    # settings (fnmatch globs) that replicas may differ in, beside `seed` and `rollout-seed`
    replica_keys: list[str] = Field(default_factory=list)


class CodeSection(_Section):
    ignore: list[str] = Field(default_factory=list)  # globs of tracked files that are not code


class ConfigFile(_Section):
    """The whole `.ledger.yaml` as written (every key optional)."""

    branch: BranchName = DEFAULT_BRANCH
    image: str | None = None
    ignore: list[str] = Field(default_factory=list)
    logs: LogsSection = Field(default_factory=LogsSection)
    capture: CaptureSection = Field(default_factory=CaptureSection)
    host_checkouts: dict[str, str] = Field(default_factory=dict)
    heat_guard: HeatSection = Field(default_factory=HeatSection)
    job: JobSection = Field(default_factory=JobSection)
    diff: DiffSection = Field(default_factory=DiffSection)
    dvc_remote: str | None = None
    image_probes: dict[str, Any] = Field(default_factory=dict)
    secrets: SecretsSection = Field(default_factory=SecretsSection)
    code: CodeSection = Field(default_factory=CodeSection)


def _from_file(f: ConfigFile) -> Config:
    h = f.heat_guard
    return Config(
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
        heat=HeatConfig(h.enabled, h.interval_s, h.pause_at, h.resume_at, h.resume_after, h.max_pause, dict(h.sensor)),
        max_age_hours=f.diff.max_age_hours,
        dvc_remote=f.dvc_remote,
        stop_grace_s=f.job.stop_grace_s,
        secret_names=tuple(f.secrets.names),
        replica_keys=tuple(f.diff.replica_keys),
        code_ignore=tuple(f.code.ignore),
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
        if isinstance(value, dict) and key in ConfigFile.model_fields and isinstance(ConfigFile.model_fields[key].default_factory, type):
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
    return LedgerError(
        f"{CONFIG_NAME}: {path}: {msg}{shown}", f"fix '{path}' in {CONFIG_NAME}; `ledger init` in an empty repo writes an example"
    )


def parse_config(data: Any) -> Config:
    """Validate the parsed YAML of `.ledger.yaml` (None: an empty file) into a `Config`."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise LedgerError(f"{CONFIG_NAME} must be a mapping of keys", f"see `ledger init` for an example {CONFIG_NAME}")
    try:
        return _from_file(ConfigFile.model_validate(_drop_nulls(data)))
    except ValidationError as exc:
        raise explain(exc) from None
