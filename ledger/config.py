"""`.ledger.yaml`: the per-repository configuration, declared once.

Every key is declared here ONCE, as a field of `Config` (or of `HeatConfig`, the `heat_guard:`
section) whose `metadata=key(...)` gives its YAML path, a one-line description and its
constraints; the field's type and default are the key's. Everything else is derived from that:

- the schema (`ledger/configschema.py` builds the pydantic models from `declared()`): an unknown
  key, a wrong type, a string where a boolean is meant, a regex that does not compile, a
  non-positive interval, `pause_at <= resume_at`, a negative size or a branch name git refuses all
  end in one line naming the key path and the fix (`ledger run` exits 125 and starts nothing);
- the mapping from the file onto `Config` (also in the schema module, generic over `declared()`);
- `default_text()`, what `ledger init` writes;
- `docs/config.md` (`tools/gen_docs.py`; `make docs`), with every key's type, default and meaning.

`ledger/configkeys.py` reads the declaration (`declared()`: each key's spec, type and default) for
all of those, so that start-up, which imports only this module, builds nothing more than `Config`.
A file that validated is remembered by the sha256 of its bytes and of the source of these modules
(`.git/ledger/config/`, `ledger/configload.py`), so most commands start without importing pydantic
or ruamel (~150 ms). To add a key: one field below, with `metadata=key(...)` (a new section: a line
in `SECTIONS`); then `make docs` (docs/development.md). tests/test_config_declaration.py checks that
the schema, the defaults, `ledger init`'s file and the reference all follow the declaration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import Literal

    Check = Literal["regex", "branch"]  # named checks the schema implements (configschema._CHECKS)
    Merge = Literal["replace", "extend", "overlay"]  # how the file's value meets the field's default

CONFIG_NAME = ".ledger.yaml"

# Built-in values that a key of the file extends (`merge="extend"`) or overlays (`merge="overlay"`):
# what the user writes is added to these, never replaces them (they are those fields' defaults).
#
# SGLang engine lines as Ray prefixes them: "(SGLangEngine pid=123, ip=10.0.0.1) ..." (see
# /work/shared/miles-facts.md). Matched at a line start; must not match across a newline.
DEFAULT_ENGINE_PATTERNS: tuple[str, ...] = (r"^\(SGLangEngine pid=\d+(?:, ip=[^)\n]*)?\)",)
# The training script inside launcher output: Miles' train.py / train_async.py, and module paths of
# Miles and of slime (the project Miles grew from).
DEFAULT_TRAINING_PATTERNS: tuple[str, ...] = (r"(^|/)train(_async)?\.py$", r"^miles\.", r"^slime\.")
# Ray's Job API (the dashboard) when a launcher names no address: `ray job submit`'s own default
DEFAULT_RAY_DASHBOARD = "http://127.0.0.1:8265"

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

# The sections of the file with their one-line meaning (docs/config.md, the schema's models). The
# keys' order, in `ledger init`'s file and the reference, is the order of the fields below.
SECTIONS: dict[str, str] = {
    "code": "which tracked files are code (a change elsewhere does not make a new code version)",
    "logs": "how the job's output is split into the trainer and engine logs, and kept",
    "capture": "what ledger adds to the command and records of its environment",
    "heat_guard": "pause the job while a GPU is too hot (see ledger/heat)",
    "job": "how ledger stops the job",
    "diff": "how `ledger diff` compares runs",
    "secrets": "what ledger treats as secret, beside its built-in rules (docs/secrets.md)",
}


def key(
    path: str,
    doc: str,
    *,
    gt: float | None = None,
    ge: float | None = None,
    above: str | None = None,
    each: Check | None = None,
    choices: tuple[str, ...] = (),
    values: Any = None,
    merge: Merge = "replace",
    example: str | None = None,
) -> dict[str, Any]:
    """The `metadata` of a field that is a key of `.ledger.yaml`, at YAML `path`, meaning `doc`.

    The constraints and the rest are described on `ledger.configkeys.KeySpec`, which is built from
    this mapping (a class here would cost every start-up about a millisecond)."""
    return {
        "path": path,
        "doc": doc,
        "gt": gt,
        "ge": ge,
        "above": above,
        "each": each,
        "choices": choices,
        "values": values,
        "merge": merge,
        "example": example,
    }


@dataclass(frozen=True)
class HeatConfig:
    """`heat_guard:`: pause the job while a GPU is too hot (see ledger/heat); the defaults."""

    enabled: bool = field(default=True, metadata=key("heat_guard.enabled", "sample the GPUs' temperature and pause the job when hot"))
    interval_s: float = field(default=5.0, metadata=key("heat_guard.interval_s", "seconds between two samples", gt=0))
    pause_at: float = field(
        default=85.0,
        metadata=key("heat_guard.pause_at", "pause the job (SIGSTOP) when a GPU reaches this temperature (C)", above="resume_at"),
    )
    resume_at: float = field(
        default=75.0, metadata=key("heat_guard.resume_at", "resume it once every GPU is at or below this temperature (C)")
    )
    resume_after: float = field(default=30.0, metadata=key("heat_guard.resume_after", "and has stayed there this many seconds", ge=0))
    max_pause: float = field(
        default=600.0,
        metadata=key(
            "heat_guard.max_pause", "warn when a pause has lasted this many seconds (keep it below the job's collective timeout)", ge=0
        ),
    )
    sensor: dict[str, Any] = field(
        default_factory=dict,
        metadata=key(
            "heat_guard.sensor",
            "a scripted sensor instead of NVML: {timeline: FILE} plays a temperature timeline",
            example="{timeline: heat.timeline}",
        ),
    )


@dataclass(frozen=True)
class Config:
    """The merged configuration: defaults overlaid with `.ledger.yaml` (flat, as code reads it).

    Each field is a key of the file (`metadata=key(...)`), except `heat`: the `heat_guard:` section."""

    branch: str = field(default="experiments", metadata=key("branch", "the branch run commits go to", each="branch"))
    image: str | None = field(
        default=None, metadata=key("image", "the image recorded when the command names none", example="radixark/miles:latest")
    )
    ignore: tuple[str, ...] = field(default=(), metadata=key("ignore", "settings (fnmatch globs) that `ledger diff` ignores"))
    code_ignore: tuple[str, ...] = field(
        default=(), metadata=key("code.ignore", "globs of tracked files that are not code (docs, *.md and .dvc/ never are; docs/diff.md)")
    )
    code_max_file_mb: float = field(
        default=64.0,
        metadata=key(
            "code.max_file_mb",
            "an uncommitted file bigger than this is not read before the job: the run records its size and blob id, not its content",
            gt=0,
        ),
    )
    engine_patterns: tuple[str, ...] = field(
        default=DEFAULT_ENGINE_PATTERNS,
        metadata=key("logs.engine_patterns", "regexes (at a line start) for engine lines, beside SGLang's", each="regex", merge="extend"),
    )
    extra_logs: tuple[str, ...] = field(default=(), metadata=key("logs.extra", "globs of extra log files copied into the run at the end"))
    log_git_max_mb: float = field(
        default=64.0, metadata=key("logs.git_max_mb", "a bigger trainer/engine log is tracked with DVC; git keeps its head and tail", gt=0)
    )
    debug_data: bool = field(
        default=True, metadata=key("capture.debug_data", "add --save-debug-rollout-data / --save-debug-event-data when absent")
    )
    debug_framework: str | None = field(
        default=None,
        metadata=key(
            "capture.debug_framework",
            "which debug flags the trainer takes (miles: both, slime: rollout, none); null: recognised from the command",
            choices=("miles", "slime", "none"),
            example="miles",
        ),
    )
    env_patterns: tuple[str, ...] = field(
        default=DEFAULT_ENV_PATTERNS,
        metadata=key(
            "capture.env_patterns", "environment variable globs recorded as env.<NAME> settings, beside CUDA_* and the like", merge="extend"
        ),
    )
    training_patterns: tuple[str, ...] = field(
        default=DEFAULT_TRAINING_PATTERNS,
        metadata=key(
            "capture.training_patterns",
            "regexes naming the training script inside launcher output, beside Miles' and slime's",
            each="regex",
            merge="extend",
        ),
    )
    job_env: dict[str, str] = field(
        default_factory=lambda: dict(DEFAULT_JOB_ENV),
        metadata=key(
            "capture.job_env",
            "variables ledger sets for the job, over its own; null removes one",
            values=str | int | float | None,
            merge="overlay",
        ),
    )
    host_checkouts: dict[str, str] = field(
        default_factory=dict, metadata=key("host_checkouts", "name: path of source checkouts whose commits a host run records")
    )
    heat: HeatConfig = HeatConfig()  # the `heat_guard:` section (HeatConfig's keys)
    stop_grace_s: float = field(
        default=30.0, metadata=key("job.stop_grace_s", "after a forwarded stop signal, SIGKILL the job this many seconds later", ge=0)
    )
    max_age_hours: float = field(
        default=24.0,
        metadata=key(
            "diff.max_age_hours", "replicas count when started within this many hours of the compared runs (--any-age: any)", ge=0
        ),
    )
    replica_keys: tuple[str, ...] = field(
        default=(),
        metadata=key("diff.replica_keys", "settings (globs) replicas may differ in, beside seed and rollout-seed", example="[data-seed]"),
    )
    dvc_remote: str | None = field(
        default=None,
        metadata=key(
            "dvc_remote", "the DVC remote `ledger push`/`pull` use for run data (absent: DVC's default remote)", example="myremote"
        ),
    )
    secret_names: tuple[str, ...] = field(
        default=(), metadata=key("secrets.names", "extra words that make a variable/flag/key name secret", example="[SIGNATURE]")
    )
    image_probes: dict[str, Any] = field(
        default_factory=dict,
        metadata=key(
            "image_probes",
            "name: shell string or argv run in the image, instead of the default probes",
            example="{cuda: nvcc --version}",
        ),
    )

    @property
    def secret_env_names(self) -> frozenset[str]:
        """`secrets.names` as the names of environment variables and flags are matched (upper case)."""
        return frozenset(n.upper() for n in self.secret_names)


HEAT = HeatConfig()  # the heat defaults, for modules that take thresholds as arguments
DEFAULTS = Config()  # every default, for modules that take one as an argument
