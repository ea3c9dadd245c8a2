"""`.ledger.yaml`: the per-repository configuration, declared once, as msgspec Structs.

`Config` is the file's shape: a field per top-level key, a field per section (`code:`, `logs:`, ...)
whose type is that section's Struct. Each key's meaning and constraints sit beside its field, in
`Annotated[type, key(...)]`; its type and default are the field's. Everything else is derived:

- validation (`ledger/configload.py`): msgspec decodes the parsed YAML into `Config`, so an unknown
  key, a wrong type, a string where a boolean is meant, a non-positive interval or a negative size
  is refused with the key's path; the checks `key()` names (a regex that does not compile, a branch
  name git refuses, `pause_at <= resume_at`) run over `declared()` after it. Each ends in one line
  naming the key path and the fix (`ledger run` exits 125 and starts nothing);
- `default_text()`, what `ledger init` writes;
- `docs/config.md` (`tools/gen_docs.py`; `make docs`), with every key's type, default and meaning.

The code reads the flat properties at the end of `Config` (`cfg.code.ignore`, `cfg.engine_patterns`):
a list key marked `adds_to` holds what the file adds to ledger's built-ins, and the property gives
both. To add a key: one field below (a new section: one Struct and one field of `Config`), a
property if the code reads it flat; then `make docs` (docs/development.md).
tests/test_config_declaration.py checks that validation, the defaults, `ledger init`'s file and the
reference all follow the declaration.
"""

# No `from __future__ import annotations`: the fields' annotations are evaluated once, here, rather
# than parsed from strings by msgspec on the first decode, which is on every command's start-up.
import functools
import typing
from typing import Annotated, Any, Literal

import msgspec

CONFIG_NAME = ".ledger.yaml"

# Built-in values that a key of the file adds to (`adds_to=`): what the user writes is added to
# these, never replaces them.
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

Check = Literal["regex", "branch"]  # named checks of a value (a list: of each item); ledger/configload.py runs them


def key(
    doc: str,
    *,
    gt: float | None = None,
    ge: float | None = None,
    check: Check | None = None,
    above: str | None = None,
    adds_to: tuple[str, ...] | dict[str, str] | None = None,
    example: str | None = None,
) -> msgspec.Meta:
    """A key's meaning (`doc`, one line) and constraints, for `Annotated[type, key(...)]`.

    `gt`/`ge`: a number above / at least this (msgspec checks them while decoding). `check`: a
    named check of the value (or of each item of a list). `above`: a number above this sibling
    key. `adds_to`: the built-ins the file's list is added to (a mapping: merged over, a null
    value removes one). `example`: `ledger init` writes the key commented out, with this value."""
    given: dict[str, object] = {"check": check, "above": above, "adds_to": adds_to, "example": example}
    extra = {k: v for k, v in given.items() if v is not None}
    if gt is not None:
        return msgspec.Meta(gt=gt, description=doc, extra=extra)
    if ge is not None:
        return msgspec.Meta(ge=ge, description=doc, extra=extra)
    return msgspec.Meta(description=doc, extra=extra)


class Section(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A mapping of keys in the file: an unknown key is an error; the values are facts of the run."""


class CodeSection(Section, frozen=True):
    ignore: Annotated[tuple[str, ...], key("globs of tracked files that are not code (docs, *.md and .dvc/ never are; docs/diff.md)")] = ()
    max_file_mb: Annotated[
        float,
        key(
            "an uncommitted file bigger than this is not read before the job: the run records its size and blob id, not its content",
            gt=0,
        ),
    ] = 64.0


class LogsSection(Section, frozen=True):
    engine_patterns: Annotated[
        tuple[str, ...],
        key("regexes (at a line start) for engine lines, beside SGLang's", check="regex", adds_to=DEFAULT_ENGINE_PATTERNS),
    ] = ()
    extra: Annotated[tuple[str, ...], key("globs of extra log files copied into the run at the end")] = ()
    git_max_mb: Annotated[float, key("a bigger trainer/engine log is tracked with DVC; git keeps its head and tail", gt=0)] = 64.0


class CaptureSection(Section, frozen=True):
    debug_data: Annotated[bool, key("add --save-debug-rollout-data / --save-debug-event-data when absent")] = True
    debug_framework: Annotated[
        Literal["miles", "slime", "none"] | None,
        key("which debug flags the trainer takes (miles: both, slime: rollout, none); null: recognised from the command", example="miles"),
    ] = None
    env_patterns: Annotated[
        tuple[str, ...],
        key("environment variable globs recorded as env.<NAME> settings, beside CUDA_* and the like", adds_to=DEFAULT_ENV_PATTERNS),
    ] = ()
    training_patterns: Annotated[
        tuple[str, ...],
        key(
            "regexes naming the training script inside launcher output, beside Miles' and slime's",
            check="regex",
            adds_to=DEFAULT_TRAINING_PATTERNS,
        ),
    ] = ()
    job_env: Annotated[
        dict[str, str | int | float | None],
        key("variables ledger sets for the job, over its own; null removes one", adds_to=DEFAULT_JOB_ENV),
    ] = {}


class HeatConfig(Section, frozen=True):
    """The `heat_guard:` section; `HEAT` below holds its defaults."""

    enabled: Annotated[bool, key("sample the GPUs' temperature and pause the job when hot")] = True
    interval_s: Annotated[float, key("seconds between two samples", gt=0)] = 5.0
    pause_at: Annotated[float, key("pause the job (SIGSTOP) when a GPU reaches this temperature (C)", above="resume_at")] = 85.0
    resume_at: Annotated[float, key("resume it once every GPU is at or below this temperature (C)")] = 75.0
    resume_after: Annotated[float, key("and has stayed there this many seconds", ge=0)] = 30.0
    max_pause: Annotated[
        float, key("warn when a pause has lasted this many seconds (keep it below the job's collective timeout)", ge=0)
    ] = 600.0
    sensor: Annotated[
        dict[str, Any],
        key("a scripted sensor instead of NVML: {timeline: FILE} plays a temperature timeline", example="{timeline: heat.timeline}"),
    ] = {}


class JobSection(Section, frozen=True):
    stop_grace_s: Annotated[float, key("after a forwarded stop signal, SIGKILL the job this many seconds later", ge=0)] = 30.0


class DiffSection(Section, frozen=True):
    max_age_hours: Annotated[
        float, key("replicas count when started within this many hours of the compared runs (--any-age: any)", ge=0)
    ] = 24.0
    replica_keys: Annotated[
        tuple[str, ...], key("settings (globs) replicas may differ in, beside seed and rollout-seed", example="[data-seed]")
    ] = ()


class SecretsSection(Section, frozen=True):
    names: Annotated[tuple[str, ...], key("extra words that make a variable/flag/key name secret", example="[SIGNATURE]")] = ()


class Config(Section, frozen=True):
    """The whole `.ledger.yaml` (every key optional); the flat properties below are what the code reads."""

    branch: Annotated[str, key("the branch run commits go to", check="branch")] = "experiments"
    image: Annotated[str | None, key("the image recorded when the command names none", example="radixark/miles:latest")] = None
    ignore: Annotated[tuple[str, ...], key("settings (fnmatch globs) that `ledger diff` ignores")] = ()
    code: Annotated[CodeSection, key("which tracked files are code (a change elsewhere does not make a new code version)")] = msgspec.field(
        default_factory=CodeSection
    )
    logs: Annotated[LogsSection, key("how the job's output is split into the trainer and engine logs, and kept")] = msgspec.field(
        default_factory=LogsSection
    )
    capture: Annotated[CaptureSection, key("what ledger adds to the command and records of its environment")] = msgspec.field(
        default_factory=CaptureSection
    )
    host_checkouts: Annotated[dict[str, str], key("name: path of source checkouts whose commits a host run records")] = {}
    heat: Annotated[HeatConfig, key("pause the job while a GPU is too hot (see ledger/heat)")] = msgspec.field(
        default_factory=HeatConfig, name="heat_guard"
    )
    job: Annotated[JobSection, key("how ledger stops the job")] = msgspec.field(default_factory=JobSection)
    diff: Annotated[DiffSection, key("how `ledger diff` compares runs")] = msgspec.field(default_factory=DiffSection)
    dvc_remote: Annotated[
        str | None, key("the DVC remote `ledger push`/`pull` use for run data (absent: DVC's default remote)", example="myremote")
    ] = None
    secrets: Annotated[SecretsSection, key("what ledger treats as secret, beside its built-in rules (docs/secrets.md)")] = msgspec.field(
        default_factory=SecretsSection
    )
    image_probes: Annotated[
        dict[str, Any], key("name: shell string or argv run in the image, instead of the default probes", example="{cuda: nvcc --version}")
    ] = {}

    # The lists and the job's environment below are ledger's built-ins with the file's additions
    # (the `adds_to` of their keys); every other key is read where it is declared (`cfg.code.ignore`).
    @property
    def engine_patterns(self) -> tuple[str, ...]:
        return DEFAULT_ENGINE_PATTERNS + self.logs.engine_patterns

    @property
    def env_patterns(self) -> tuple[str, ...]:
        return DEFAULT_ENV_PATTERNS + self.capture.env_patterns

    @property
    def training_patterns(self) -> tuple[str, ...]:
        return DEFAULT_TRAINING_PATTERNS + self.capture.training_patterns

    @property
    def job_env(self) -> dict[str, str]:
        """ledger's variables for the job with the file's over them (a number as text; null removes one)."""
        merged: dict[str, str | None] = {**DEFAULT_JOB_ENV, **{k: None if v is None else str(v) for k, v in self.capture.job_env.items()}}
        return {k: v for k, v in merged.items() if v is not None}

    @property
    def secret_env_names(self) -> frozenset[str]:
        """`secrets.names` as the names of environment variables and flags are matched (upper case)."""
        return frozenset(n.upper() for n in self.secrets.names)


HEAT = HeatConfig()  # the heat defaults, for modules that take thresholds as arguments
DEFAULTS = Config()  # every default, for modules that take one as an argument


# ---- the declaration, read: for validation, `ledger init`'s file and docs/config.md ----------------
class Declared(msgspec.Struct, frozen=True):
    """One key of the file: where it is, where `Config` keeps it, its type, default and `key()`."""

    path: str  # the YAML path, "heat_guard.pause_at"
    attr: tuple[str, ...]  # ("heat", "pause_at"): the attribute path in `Config`
    type: Any  # the field's type as the file writes it (without its `key()`)
    default: Any  # the field's default: for an `adds_to` key, nothing added
    meta: msgspec.Meta

    @property
    def doc(self) -> str:
        return self.meta.description or ""

    def extra(self, name: str) -> Any:
        """A `key()` argument msgspec does not check itself (check, above, adds_to, example), or None."""
        return (self.meta.extra or {}).get(name)

    @property
    def section(self) -> str:
        """The section the key is in ("heat_guard"), or "" at the top level."""
        return self.path.rpartition(".")[0]

    @property
    def name(self) -> str:
        """The key's name inside its section ("pause_at")."""
        return self.path.rpartition(".")[2]

    def value(self, cfg: Config) -> Any:
        """The key's value in `cfg`, as the file gave it."""
        value: Any = cfg
        for part in self.attr:
            value = getattr(value, part)
        return value


def _is_section(ann: Any) -> bool:
    return isinstance(ann, type) and typing.get_origin(ann) is None and issubclass(ann, Section)


def _fields(cls: type[msgspec.Struct]) -> list[tuple[msgspec.structs.FieldInfo, Any, msgspec.Meta]]:
    out = []
    for f in msgspec.structs.fields(cls):
        ann, meta = typing.get_args(f.type)  # every field is `Annotated[type, key(...)]`
        out.append((f, ann, meta))
    return out


@functools.cache
def sections() -> dict[str, tuple[type[Section], str]]:
    """Each section's name in the file ("heat_guard"), with its Struct and its one-line meaning."""
    return {f.encode_name: (ann, meta.description or "") for f, ann, meta in _fields(Config) if _is_section(ann)}


@functools.cache
def declared() -> tuple[Declared, ...]:
    """Every key of `.ledger.yaml`, in the order `ledger init` writes them (`Config`, walked)."""
    out: list[Declared] = []
    for f, ann, meta in _fields(Config):
        if _is_section(ann):  # a section: its own fields are its keys
            for g, inner, inner_meta in _fields(ann):
                default = g.default_factory() if g.default is msgspec.NODEFAULT else g.default
                out.append(Declared(f"{f.encode_name}.{g.encode_name}", (f.name, g.name), inner, default, inner_meta))
        else:
            default = f.default_factory() if f.default is msgspec.NODEFAULT else f.default
            out.append(Declared(f.encode_name, (f.name,), ann, default, meta))
    return tuple(out)


def builtins(d: Declared) -> str:
    """What an `adds_to` key's value is added to, as a clause; else ""."""
    added = d.extra("adds_to")
    if isinstance(added, tuple):
        return "built in: " + ", ".join(f"`{p}`" for p in added)
    if isinstance(added, dict):
        return "built in: " + yaml_value(added)
    return ""


def yaml_value(value: Any) -> str:
    """`value` as a YAML flow scalar, list or mapping (the defaults and examples are plain words)."""
    if isinstance(value, str) and (value in ("", "true", "false", "null", "~") or value.replace(".", "", 1).isdigit()):
        return f'"{value}"'  # read back as a string, not a number or a boolean
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {yaml_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def layout() -> list[tuple[str, tuple[Declared, ...]]]:
    """The file's shape, in order: ("", (key,)) for a top-level key, (section, its keys) for a section."""
    out: list[tuple[str, tuple[Declared, ...]]] = []
    for d in declared():
        if not d.section:
            out.append(("", (d,)))
        elif not out or out[-1][0] != d.section:
            out.append((d.section, (d,)))
        else:
            out[-1] = (d.section, (*out[-1][1], d))
    return out


def default_text() -> str:
    """What `ledger init` writes: every key with its default (or commented, with an example) and meaning."""
    lines = ["# ledger configuration (see docs/config.md). Every key is optional."]
    for section, members in layout():
        if not section:
            lines.append(_line(members[0], "", ""))
            continue
        hidden = "# " if all(m.extra("example") is not None for m in members) else ""  # nothing to show
        lines.append(f"{hidden}{section}:")
        lines += [_line(m, "  ", hidden) for m in members]
    return "\n".join(lines) + "\n"


def _line(d: Declared, indent: str, hidden: str) -> str:
    example = d.extra("example")
    if example is None:
        text = f"{indent}{d.name}: {yaml_value(d.default)}"
    else:  # commented out, with an example: its default is "none" or an empty mapping
        text = f"{hidden + indent if hidden else indent + '# '}{d.name}: {example}"
    doc = f"{d.doc}; {builtins(d)}" if isinstance(d.extra("adds_to"), dict) else d.doc  # the long lists: docs/config.md
    return f"{text:<36} # {doc}"
