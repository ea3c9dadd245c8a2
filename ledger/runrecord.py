"""The run record: the manifest (schema 1, docs/manifest.md) as frozen dataclasses, one per section.

`RunRecord.from_dict` reads any manifest ledger ever wrote: it refuses a newer schema (as
`check_manifest` always did), a value of the wrong type is a `ManifestError` naming its key path,
a key an older manifest lacks reads as its default, and a key this version does not know is kept.
`to_dict` gives the same dict back: the same keys, in the same order, with the same values, so the
YAML (and `git diff` between two runs) is unchanged.

How a section keeps the dict's shape: `keys_` lists its keys in their order (known fields and
unknown keys alike) and `unknown_` holds the values of the unknown ones. A known field whose key is
not in `keys_` (an older manifest lacked it, or an optional key the run never set) reads as its
default and `to_dict` leaves it out. Writers change a section with `with_(**changes)`: a key already
there keeps its place and a new one goes last, exactly as a dict assignment does.

Dataclasses only (no schema library): this module is on `ledger run`'s start-up path. They are
made with `eq=False`: each generated method is an `exec` at import (~0.15 ms), and a record is
compared by its `to_dict()`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from ledger.errors import LedgerError

SCHEMA = 1

S = TypeVar("S", bound="Section")


class ManifestError(LedgerError):
    """A manifest on the branch is corrupt or from a newer ledger."""


NOT_LEDGERS = "the record is not one ledger wrote"  # the hint of a record someone else crafted


def check_manifest(data: Any, where: str) -> dict[str, Any]:
    """Validate a manifest read from git; raise ManifestError naming the run and the reason."""
    if not isinstance(data, dict):
        raise ManifestError(f"{where}: manifest is not a mapping", "the record is corrupt; `git show` it to inspect")
    schema = data.get("schema")
    if not isinstance(schema, int):
        raise ManifestError(f"{where}: manifest has no schema version", "the record is corrupt")
    if schema > SCHEMA:
        raise ManifestError(
            f"{where}: manifest schema {schema} is newer than this ledger understands ({SCHEMA})",
            "upgrade ledger (`pip install -U ledger`)",
        )
    missing = [k for k in ("id", "settings", "status", "started") if k not in data]
    if missing:
        raise ManifestError(f"{where}: manifest lacks {', '.join(missing)}", "the record is corrupt")
    if not isinstance(data["settings"], dict) or not isinstance(data["status"], dict):
        raise ManifestError(f"{where}: manifest 'settings' or 'status' is not a mapping", "the record is corrupt")
    return data


# -- value checks: what a key may hold (None is allowed wherever ledger ever wrote null) ----------


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "any": (lambda v: True, "anything"),
    "text": (lambda v: v is None or isinstance(v, str), "text"),
    "int": (lambda v: v is None or _is_int(v), "an integer"),
    "number": (lambda v: v is None or _is_int(v) or isinstance(v, float), "a number"),
    "bool": (lambda v: v is None or isinstance(v, bool), "true or false"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "list?": (lambda v: v is None or isinstance(v, list), "a list"),
    "map": (lambda v: isinstance(v, dict), "a mapping"),
    "map?": (lambda v: v is None or isinstance(v, dict), "a mapping"),
}


def _f(kind: str, default: Any = None, factory: Callable[[], Any] | None = None, section: Any = None, sometimes: bool = False) -> Any:
    """A field: `kind` names its check (`_CHECKS`), or `section`/`sections`/`section?` a nested one.
    `sometimes`: a key set only when it applies; every other field is a key a new record has."""
    meta = {"kind": kind, "section": section, "sometimes": sometimes}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _plain(value: Any) -> Any:
    """Sections as dicts; lists and dicts copied (a record never shares a container with its dict)."""
    if isinstance(value, Section):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _corrupt(where: str, path: str, what: str) -> ManifestError:
    return ManifestError(f"{where}: manifest '{path}' is not {what}", "the record is corrupt; `git show` it to inspect")


@dataclass(frozen=True, kw_only=True, eq=False)
class Section:
    """A mapping of the manifest: known keys as fields, the rest kept in `unknown_` (module doc)."""

    _specs: ClassVar[dict[str, tuple[str, Any]]]
    _always: ClassVar[tuple[str, ...]]

    keys_: tuple[str, ...] | None = field(default=None, repr=False)  # None: `always()`
    unknown_: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.keys_ is None:
            object.__setattr__(self, "keys_", type(self).always())

    @classmethod
    def always(cls) -> tuple[str, ...]:
        """The keys a new record has (`new_manifest`), in order: the fields not set `sometimes`."""
        if "_always" not in cls.__dict__:
            cls._always = tuple(f.name for f in dataclasses.fields(cls) if f.metadata and not f.metadata["sometimes"])
        return cls._always

    @classmethod
    def specs(cls) -> dict[str, tuple[str, Any]]:
        """field name -> (kind, nested section class)."""
        if "_specs" not in cls.__dict__:
            cls._specs = {f.name: (f.metadata["kind"], f.metadata["section"]) for f in dataclasses.fields(cls) if f.metadata}
        return cls._specs

    @classmethod
    def from_dict(cls: type[S], data: Any, where: str = "manifest", path: str = "") -> S:
        """The section read from `data`, every known value checked; ManifestError names the key."""
        return cls.read(data, where, path)

    @classmethod
    def trusted(cls: type[S], data: Mapping[str, Any]) -> S:
        """A section ledger itself has just made (a heat summary, the host's facts): read as
        `from_dict` reads, without the type checks, so a shape this version did not foresee is
        kept as it is and never stops a run from being recorded."""
        return cls.read(dict(data), "manifest", "", check=False)

    @classmethod
    def read(cls: type[S], data: Any, where: str, path: str, check: bool = True) -> S:
        """`from_dict` of a section: each known key checked against its field, the rest kept."""
        if not isinstance(data, dict):
            raise _corrupt(where, path, "a mapping")
        specs = cls.specs()
        values: dict[str, Any] = {}
        unknown: dict[Any, Any] = {}
        for key, value in data.items():
            spec = specs.get(key) if isinstance(key, str) else None
            if spec is None:
                unknown[key] = _plain(value)
                continue
            kind, nested = spec
            at = f"{path}.{key}" if path else str(key)
            if kind == "section":
                values[key] = nested.read(value, where, at, check)
            elif kind == "section?":
                values[key] = None if value is None else nested.read(value, where, at, check)
            elif kind == "sections":
                if not isinstance(value, list):
                    raise _corrupt(where, at, "a list")
                values[key] = [nested.read(v, where, f"{at}.{i}", check) for i, v in enumerate(value)]
            else:
                ok, what = _CHECKS[kind]
                if check and not ok(value):
                    raise _corrupt(where, at, what)
                values[key] = _plain(value)
        return cls(keys_=tuple(data), unknown_=unknown, **values)

    def to_dict(self) -> dict[str, Any]:
        """The section as the manifest holds it: its keys, in their order."""
        specs = self.specs()
        return {k: _plain(getattr(self, k) if k in specs else self.unknown_[k]) for k in self.keys_ or ()}

    def has(self, key: str) -> bool:
        """Whether the section holds `key` (an older manifest may lack a later-added one)."""
        return key in (self.keys_ or ())

    def get(self, key: str, default: Any = None) -> Any:
        """The value of `key` whether this version knows it or not (`default` when absent)."""
        if not self.has(key):
            return default
        return getattr(self, key) if key in self.specs() else self.unknown_[key]

    def with_(self: S, **changes: Any) -> S:
        """A copy with `changes` set: a key already there keeps its place, a new one goes last."""
        return self.merged(changes)

    def merged(self: S, changes: Mapping[str, Any]) -> S:
        """`with_` for keys that are data (an image's probe names): `dict.update` on the section."""
        specs = self.specs()
        keys = self.keys_ or ()
        added = tuple(k for k in changes if k not in keys)
        unknown = {k: v for k, v in changes.items() if k not in specs}
        known = {k: v for k, v in changes.items() if k in specs}
        return dataclasses.replace(self, keys_=keys + added, unknown_={**self.unknown_, **unknown}, **known)


@dataclass(frozen=True, kw_only=True, eq=False)
class Host(Section):
    """`host`: where `ledger run` ran."""

    hostname: str | None = _f("text")
    user: str | None = _f("text")
    platform: str | None = _f("text")
    python: str | None = _f("text")


@dataclass(frozen=True, kw_only=True, eq=False)
class Command(Section):
    """`command`: what was run, and the training command found in it (docs/diff.md)."""

    argv: Sequence[str] = _f("list", factory=list)
    cwd: str | None = _f("text")
    cwd_in_repo: str | None = _f("text")
    repo_root: str | None = _f("text")
    launcher: str | None = _f("text")
    launcher_sha256: str | None = _f("text")
    training_argv: Sequence[str] | None = _f("list?")
    training_source: str | None = _f("text")
    ray_argv: Sequence[str] | None = _f("list?")
    runtime_env: Mapping[str, Any] | None = _f("map?")
    added_args: Sequence[str] = _f("list", factory=list)
    # `sometimes`: set only when they apply (after the keys above, in the order the recording sets them)
    launcher_inputs: Sequence[str] = _f("list", factory=list, sometimes=True)
    launcher_path: str | None = _f("text", sometimes=True)
    debug_data: Mapping[str, Any] | None = _f("map?", sometimes=True)
    ledger_env: Mapping[str, Any] | None = _f("map?", sometimes=True)


@dataclass(frozen=True, kw_only=True, eq=False)
class Code(Section):
    """`code`: the commit, the uncommitted changes, and the content that counts as code."""

    commit: str | None = _f("text")
    branch: str | None = _f("text")
    dirty: bool | None = _f("bool", False)
    patch: str | None = _f("text")
    untracked_left_out: int | None = _f("int", 0)
    submodules: Mapping[str, Any] = _f("map", factory=dict, sometimes=True)
    content: str | None = _f("text", sometimes=True)
    ignore: Sequence[str] = _f("list", factory=list, sometimes=True)
    content_without_launcher: str | None = _f("text", sometimes=True)
    # changed files over `code.max_file_mb`, not in the tree: path -> {size, mtime, oid (git's blob id or null)}
    large_files: Mapping[str, Any] = _f("map", factory=dict, sometimes=True)


@dataclass(frozen=True, kw_only=True, eq=False)
class Image(Section):
    """`image`: the container image's identity and probes, or the host's packages (`source`)."""

    ref: str | None = _f("text")
    id: str | None = _f("text")
    digest: str | None = _f("text")
    miles_commit: str | None = _f("text")
    sglang_version: str | None = _f("text")
    sglang_commit: str | None = _f("text")
    megatron_commit: str | None = _f("text")
    labels: Mapping[str, Any] = _f("map", factory=dict)
    source: str | None = _f("text")
    packages: Mapping[str, Any] = _f("map", factory=dict)
    errors: Sequence[str] = _f("list", factory=list)
    host: Mapping[str, Any] | None = _f("map?", sometimes=True)  # a host run's python and checkouts


@dataclass(frozen=True, kw_only=True, eq=False)
class Seeds(Section):
    """`seeds`: the seed settings, apart."""

    seed: Any = _f("any")
    rollout_seed: Any = _f("any")
    defaults: Mapping[str, Any] = _f("map", factory=dict, sometimes=True)  # key -> where a default was read (none passed)


@dataclass(frozen=True, kw_only=True, eq=False)
class Logs(Section):
    """`logs`: the file names of the run folder's logs."""

    trainer: str | None = _f("text", "trainer.log")
    engine: str | None = _f("text", "engine.log")
    extra: Sequence[str] = _f("list", factory=list)
    metrics: str | None = _f("text")
    heat: str | None = _f("text")
    split: str | None = _f("text", sometimes=True)  # who split the output into the logs
    in_dvc: Sequence[str] = _f("list", factory=list, sometimes=True)  # logs too big for git, tracked with DVC


@dataclass(frozen=True, kw_only=True, eq=False)
class Gpu(Section):
    """`gpu`: the heat guard's summary (`heat/monitor.py`); a cluster run adds per-node keys."""

    sensor: str | None = _f("text")
    unavailable: Any = _f("any")
    gpus: Sequence[Mapping[str, Any]] = _f("list", factory=list)
    peak_temp_c: Mapping[Any, float] | None = _f("map?")  # per GPU (index, or `node/index` on a cluster)
    pauses: int | None = _f("int")
    paused_s: float | None = _f("number")
    pause_windows: Sequence[Mapping[str, Any]] = _f("list", factory=list)
    guard: Mapping[str, Any] | None = _f("map?")
    interval_s: float | None = _f("number")
    samples: int | None = _f("int")


@dataclass(frozen=True, kw_only=True, eq=False)
class DataEntry(Section):
    """One entry of `data`: an output tracked with DVC (`data/dvcops.py`)."""

    role: str | None = _f("text")
    path: str | None = _f("text")
    dvc_file: str | None = _f("text")
    hash: str | None = _f("text")
    nfiles: int | None = _f("int")
    size: int | None = _f("int")
    tracked: bool | None = _f("bool", False)
    error: str | None = _f("text")
    template: str | None = _f("text")
    rollout_ids: Sequence[Any] = _f("list", factory=list, sometimes=True)
    # files of the output holding secret text, kept out of DVC: {"file": ..., "rule": ...} (record/heldback.py)
    held_back: Sequence[Mapping[str, Any]] = _f("list", factory=list, sometimes=True)


@dataclass(frozen=True, kw_only=True, eq=False)
class Status(Section):
    """`status`: how the run ended."""

    state: str | None = _f("text", "running")
    exit_code: int | None = _f("int")
    signal: str | None = _f("text")
    duration_s: float | None = _f("number")
    warnings: Sequence[str] = _f("list", factory=list, sometimes=True)  # capture errors, said again here
    escalated: str | None = _f("text", sometimes=True)  # the stop went on to SIGKILL
    ray_job: Mapping[str, Any] | None = _f("map?", sometimes=True)  # the submitted Ray job followed to its end


@dataclass(frozen=True, kw_only=True, eq=False)
class Replay(Section):
    """`replay`: what a replay replayed (`replay/replay.py`), and its fidelity once recorded."""

    mode: str | None = _f("text")
    steps: Any = _f("any")
    mapping: Mapping[str, Any] | None = _f("map?")
    sets: Any = _f("any")
    extra: Any = _f("any")
    in_image: Any = _f("any")
    ray: Mapping[str, Any] | None = _f("map?", sometimes=True)
    code_left_out: Sequence[str] = _f("list", factory=list, sometimes=True)  # the source's launcher files, left out of `code`
    fidelity: Mapping[str, Any] | None = _f("map?", sometimes=True)


@dataclass(frozen=True, kw_only=True, eq=False)
class RunRecord(Section):
    """A run's manifest, typed. `from_dict` validates (schema first), `to_dict` gives the same dict."""

    schema: int = _f("int", SCHEMA)
    id: str = _f("text", "")
    name: str | None = _f("text")
    note: str | None = _f("text")
    started: str | None = _f("text")
    finished: str | None = _f("text")
    host: Host = _f("section", factory=Host, section=Host)
    command: Command = _f("section", factory=Command, section=Command)
    code: Code = _f("section", factory=Code, section=Code)
    image: Image = _f("section", factory=Image, section=Image)
    seeds: Seeds = _f("section", factory=Seeds, section=Seeds)
    settings: Mapping[str, Any] = _f("map", factory=dict)
    logs: Logs = _f("section", factory=Logs, section=Logs)
    gpu: Gpu | None = _f("section?", section=Gpu)
    data: Sequence[DataEntry] = _f("sections", factory=list, section=DataEntry)
    status: Status = _f("section", factory=Status, section=Status)
    replay_of: str | None = _f("text")
    replay: Replay | None = _f("section?", section=Replay)
    trackers: Mapping[str, Any] | None = _f("map?")  # W&B/MLflow/TensorBoard links the job printed
    redacted: Sequence[str] = _f("list", factory=list)
    env_report: Sequence[Any] = _f("list", factory=list)
    warnings: Sequence[str] = _f("list", factory=list)
    raw_bytes: Mapping[str, str] = _f("map", factory=dict, sometimes=True)  # `manifest.storable`: exact bytes of non-UTF-8 text

    @classmethod
    def from_dict(cls: type[S], data: Any, where: str = "manifest", path: str = "") -> S:
        """A manifest read back: the schema checked as `check_manifest` does, then every value."""
        check_manifest(data, where)
        return cls.read(data, where, path)

    @classmethod
    def partial(cls, data: Mapping[str, Any], where: str = "run") -> RunRecord:
        """Some of a manifest's keys (a `summary.json`, a listing's fields, a staged manifest):
        each value checked as a manifest's, without the keys a whole manifest must have."""
        return cls.read(dict(data), where, "")

    @classmethod
    def new(cls, run_id: str, started: str | None) -> RunRecord:
        """A record about to be made: every key present, unknowns null (`manifest.new_manifest`)."""
        return cls(id=run_id, started=started)
