"""The run record: the manifest (schema 1, docs/manifest.md) as frozen msgspec Structs, one per section.

Each section's shape is declared once, as a Struct's typed fields, in the order a manifest holds
its keys; msgspec checks every value on the way in (`from_dict`, `partial`) and gives the dict
back on the way out (`to_dict`), so the YAML a new run writes (and `git diff` between two runs)
keeps the order docs/manifest.md shows.

Reading rules:
- a newer schema is refused with the version named (`check_manifest`, as it always was);
- a value of the wrong type is a `ManifestError` naming its key path
  (`manifest 'status.exit_code' is not an integer`), never a traceback;
- a key an older manifest lacks reads as its field's default (written back, it is there);
- a key set only when it applies (`launcher_path`, `status.escalated`, ...) is `UNSET` when
  absent (falsy, and left out of `to_dict`), so an absent key stays absent;
- a key this version does not know (an image probe named in .ledger.yaml, a cluster run's
  per-node heat keys, a later optional key) is kept, with its value, in the section's `unknown_`,
  and `to_dict` writes it after the known keys.

Writers change a record with `msgspec.structs.replace` (re-exported here as `replace`).

No `from __future__ import annotations` here: msgspec resolves real annotations much faster than
strings, which a process's first decode pays for, so only forward references are quoted.
"""

import datetime as dt
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET, UnsetType
from msgspec.structs import replace

from ledger.errors import LedgerError

__all__ = ["SCHEMA", "UNSET", "ManifestError", "RunRecord", "UnsetType", "check_manifest", "replace"]

SCHEMA = 1

S = TypeVar("S", bound="Section")


class ManifestError(LedgerError):
    """A manifest on the branch is corrupt or from a newer ledger."""


NOT_LEDGERS = "the record is not one ledger wrote"  # the hint of a record someone else crafted
CORRUPT = "the record is corrupt; `git show` it to inspect"


def check_manifest(data: Any, where: str) -> Any:
    """Validate a manifest read from git; raise ManifestError naming the run and the reason."""
    if not isinstance(data, dict):
        raise ManifestError(f"{where}: manifest is not a mapping", CORRUPT)
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


# -- the decoder: known keys to msgspec, unknown ones into `unknown_`; errors as key paths ---------

# what msgspec calls a type -> how the manifest error says it
_WORDS = {"int": "an integer", "float": "a number", "int | float": "a number", "str": "text", "bool": "true or false"}
_WORDS.update(array="a list", object="a mapping")
# values to_builtins hands back as they are (a record holds what its dict held, never a re-encoding)
_AS_IS = (bytes, bytearray, dt.datetime, dt.date, dt.time)
_UNKNOWN = "unknown_"
_LAYOUTS: "dict[type[Section], tuple[frozenset[str], dict[str, tuple[type[Section], bool]]]]" = {}


def _layout(cls: "type[Section]") -> "tuple[frozenset[str], dict[str, tuple[type[Section], bool]]]":
    """(the keys `cls` knows, key -> (nested section class, a list of them)), from its fields' types."""
    got = _LAYOUTS.get(cls)
    if got is not None:
        return got
    known: set[str] = set()
    nested: dict[str, tuple[type[Section], bool]] = {}
    for f in msgspec.structs.fields(cls):
        if f.name == _UNKNOWN:
            continue
        known.add(f.encode_name)
        for t in typing.get_args(f.type) if isinstance(f.type, types.UnionType) else (f.type,):
            args = typing.get_args(t)
            many = typing.get_origin(t) in (list, Sequence) and bool(args)
            inner = args[0] if many else t
            if isinstance(inner, type) and issubclass(inner, Section):
                nested[f.encode_name] = (inner, many)
    got = _LAYOUTS[cls] = (frozenset(known), nested)
    return got


def _split(cls: "type[Section]", data: Any) -> Any:
    """`data` with each section's unknown keys moved into its `unknown_` (anything else as it is:
    msgspec names a wrong type)."""
    if not isinstance(data, dict):
        return data
    known, nested = _layout(cls)
    out: dict[Any, Any] = {}
    unknown: dict[Any, Any] = {}
    for key, value in data.items():
        if key not in known:
            unknown[key] = value
        elif key not in nested:
            out[key] = value
        else:
            sub, many = nested[key]
            out[key] = [_split(sub, v) for v in value] if many and isinstance(value, list) else value if many else _split(sub, value)
    if unknown:
        out[_UNKNOWN] = unknown
    return out


def _flat(cls: "type[Section]", data: dict[Any, Any]) -> dict[Any, Any]:
    """`to_builtins`' dict of a section with its `unknown_` keys put back, after the known ones."""
    unknown = data.pop(_UNKNOWN, None)
    for key, (sub, many) in _layout(cls)[1].items():
        value = data.get(key)
        if many and isinstance(value, list):
            data[key] = [_flat(sub, v) for v in value]
        elif isinstance(value, dict):
            _flat(sub, value)
    if unknown:
        data.update(unknown)
    return data


def _decode(cls: type[S], data: Any, where: str, path: str) -> S:
    try:
        return msgspec.convert(_split(cls, data), cls)
    except msgspec.ValidationError as exc:
        raise _error(where, path, exc) from None


def _error(where: str, prefix: str, exc: msgspec.ValidationError) -> ManifestError:
    """msgspec's `Expected `int | null`, got `str` - at `$.status.exit_code`` as the manifest error."""
    text = str(exc)
    expected = text.split("`")[1] if text.startswith("Expected `") else ""
    kinds = " | ".join(k for k in expected.split(" | ") if k != "null")
    what = _WORDS.get(kinds, kinds or "valid")
    at = text.rsplit(" - at `", 1)[1].rstrip("`") if " - at `" in text else "$"
    key = at.startswith("key` in `")
    if key:
        at = at.split("`")[-1]
    path = at.lstrip("$").replace("[", ".").replace("]", "").lstrip(".")
    path = ".".join(p for p in (prefix, path) if p)
    if key:
        return ManifestError(f"{where}: manifest '{path}' has a key that is not {what}", CORRUPT)
    if not path:
        return ManifestError(f"{where}: manifest is not {what}", CORRUPT)
    return ManifestError(f"{where}: manifest '{path}' is not {what}", CORRUPT)


class Section(msgspec.Struct, frozen=True, kw_only=True):
    """A mapping of the manifest: known keys as typed fields, the rest kept in `unknown_` (module doc)."""

    unknown_: Mapping[Any, Any] = {}

    @classmethod
    def from_dict(cls: type[S], data: Any, where: str = "manifest", path: str = "") -> S:
        """The section read from `data` (at key path `path`), every known value checked; a wrong
        one is a ManifestError naming its key."""
        return _decode(cls, data, where, path)

    def to_dict(self) -> dict[str, Any]:
        """The section as the manifest holds it: its known keys in order (an `UNSET` one left
        out), then the unknown ones."""
        return _flat(type(self), msgspec.to_builtins(self, builtin_types=_AS_IS))

    def has(self, key: str) -> bool:
        """Whether the section holds `key` (a key set only when it applies may be absent)."""
        if key != _UNKNOWN and key in self.__struct_fields__:
            return getattr(self, key) is not UNSET
        return key in self.unknown_

    def get(self, key: str, default: Any = None) -> Any:
        """The value of `key` whether this version knows it or not (`default` when absent)."""
        if not self.has(key):
            return default
        return getattr(self, key) if key in self.__struct_fields__ else self.unknown_[key]

    def merged(self: S, changes: Mapping[str, Any]) -> S:
        """`changes` set, known keys as fields and the rest (an image's probe names, data) as
        unknown keys: `dict.update` on the section."""
        known = {k: v for k, v in changes.items() if k != _UNKNOWN and k in self.__struct_fields__}
        unknown = {k: v for k, v in changes.items() if k not in known}
        return replace(self, unknown_={**self.unknown_, **unknown}, **known) if unknown else replace(self, **known)


# Field order is key order. A field defaulting to UNSET is a key set only when it applies, and its
# place is where the recording sets it (docs/manifest.md lists the keys; this is their order).


class Host(Section, frozen=True, kw_only=True):
    """`host`: where `ledger run` ran."""

    hostname: str | None = None
    user: str | None = None
    platform: str | None = None
    python: str | None = None


class Command(Section, frozen=True, kw_only=True):
    """`command`: what was run, and the training command found in it (docs/diff.md)."""

    argv: Sequence[str] = []
    cwd: str | None = None
    cwd_in_repo: str | None = None
    repo_root: str | None = None
    launcher: str | None = None
    launcher_sha256: str | None = None
    training_argv: Sequence[str] | None = None
    training_source: str | None = None
    ray_argv: Sequence[str] | None = None
    runtime_env: Mapping[str, Any] | None = None
    added_args: Sequence[str] = []
    launcher_inputs: Sequence[str] | UnsetType = UNSET
    launcher_path: str | None | UnsetType = UNSET
    debug_data: Mapping[str, Any] | None | UnsetType = UNSET
    ledger_env: Mapping[str, Any] | None | UnsetType = UNSET


class Code(Section, frozen=True, kw_only=True):
    """`code`: the commit, the uncommitted changes, and the content that counts as code."""

    commit: str | None = None
    branch: str | None = None
    dirty: bool | None = False
    patch: str | None = None
    untracked_left_out: int | None = 0
    submodules: Mapping[str, Any] | UnsetType = UNSET
    # changed files over `code.max_file_mb`, not in the tree: path -> {size, mtime, oid (git's blob id or null)}
    large_files: Mapping[str, Any] | UnsetType = UNSET
    content: str | None | UnsetType = UNSET
    ignore: Sequence[str] | UnsetType = UNSET
    content_without_launcher: str | None | UnsetType = UNSET


class Image(Section, frozen=True, kw_only=True):
    """`image`: the container image's identity, or the host's packages (`source`); one unknown
    key per configured probe (`unknown_`)."""

    ref: str | None = None
    id: str | None = None
    digest: str | None = None
    miles_commit: str | None = None
    sglang_version: str | None = None
    sglang_commit: str | None = None
    megatron_commit: str | None = None
    labels: Mapping[str, Any] = {}
    source: str | None = None
    packages: Mapping[str, Any] = {}
    errors: Sequence[str] = []
    host: Mapping[str, Any] | None | UnsetType = UNSET  # a host run's python and checkouts


class Seeds(Section, frozen=True, kw_only=True):
    """`seeds`: the seed settings, apart."""

    seed: Any = None
    rollout_seed: Any = None
    defaults: Mapping[str, Any] | UnsetType = UNSET  # key -> where a default was read (none passed)


class Logs(Section, frozen=True, kw_only=True):
    """`logs`: the file names of the run folder's logs."""

    trainer: str | None = "trainer.log"
    engine: str | None = "engine.log"
    extra: Sequence[str] = []
    metrics: str | None = None
    heat: str | None = None
    split: str | None | UnsetType = UNSET  # who split the output into the logs
    in_dvc: Sequence[str] | UnsetType = UNSET  # logs too big for git, tracked with DVC


class Gpu(Section, frozen=True, kw_only=True):
    """`gpu`: the heat guard's summary (`heat/monitor.py`); a cluster run's per-node keys are
    unknown keys. One rebuilt from heat.log alone (`ledger recover`) has no guard, interval or count."""

    sensor: str | None = None
    unavailable: Any = None
    gpus: Sequence[Mapping[str, Any]] = []
    peak_temp_c: Mapping[Any, Any] | None = None  # per GPU (index, or `node/index` on a cluster)
    pauses: int | None = None
    paused_s: int | float | None = None
    pause_windows: Sequence[Mapping[str, Any]] = []
    guard: Mapping[str, Any] | None | UnsetType = UNSET
    interval_s: int | float | None | UnsetType = UNSET
    samples: int | None | UnsetType = UNSET


class DataEntry(Section, frozen=True, kw_only=True):
    """One entry of `data`: an output tracked with DVC (`data/dvcops.py`)."""

    role: str | None = None
    path: str | None = None
    dvc_file: str | None = None
    hash: str | None = None
    nfiles: int | None = None
    size: int | None = None
    tracked: bool | None | UnsetType = UNSET  # (an early record lacks it: its `hash` says it)
    error: str | None = None
    template: str | None = None
    # files of the output holding secret text, kept out of DVC: {"file": ..., "rule": ...} (record/heldback.py)
    held_back: Sequence[Mapping[str, Any]] | UnsetType = UNSET
    rollout_ids: Sequence[Any] | UnsetType = UNSET


class Status(Section, frozen=True, kw_only=True):
    """`status`: how the run ended."""

    state: str | None = "running"
    exit_code: int | None = None
    signal: str | None = None
    duration_s: int | float | None = None
    warnings: Sequence[str] | UnsetType = UNSET  # capture errors, said again here
    escalated: str | None | UnsetType = UNSET  # the stop went on to SIGKILL
    ray_job: Mapping[str, Any] | None | UnsetType = UNSET  # the submitted Ray job followed to its end


class Replay(Section, frozen=True, kw_only=True):
    """`replay`: what a replay replayed (`replay/replay.py`), and its fidelity once recorded."""

    mode: str | None = None
    steps: Any = None
    mapping: Mapping[Any, Any] | None = None
    sets: Any = None
    extra: Any = None
    in_image: Any = None
    code_left_out: Sequence[str] | UnsetType = UNSET  # the source's launcher files, left out of `code`
    ray: Mapping[str, Any] | None | UnsetType = UNSET
    fidelity: Mapping[str, Any] | None | UnsetType = UNSET


class RunRecord(Section, frozen=True, kw_only=True):
    """A run's manifest, typed. `from_dict` validates (schema first), `to_dict` gives the dict back."""

    schema: int = SCHEMA
    id: str = ""
    name: str | None = None
    note: str | None = None
    started: str | None = None
    finished: str | None = None
    host: Host = Host()
    command: Command = Command()
    code: Code = Code()
    image: Image = Image()
    seeds: Seeds = Seeds()
    settings: Mapping[str, Any] = {}
    logs: Logs = Logs()
    gpu: Gpu | None = None
    data: Sequence[DataEntry] = []
    status: Status = Status()
    replay_of: str | None = None
    replay: Replay | None = None
    trackers: Mapping[str, Any] | None = None  # W&B/MLflow/TensorBoard links the job printed
    redacted: Sequence[str] = []
    env_report: Sequence[Any] = []
    warnings: Sequence[str] = []
    raw_bytes: Mapping[str, str] | UnsetType = UNSET  # `manifest.storable`: exact bytes of non-UTF-8 text

    @classmethod
    def from_dict(cls: type[S], data: Any, where: str = "manifest", path: str = "") -> S:
        """A manifest read back: the schema checked as `check_manifest` does, then every value."""
        check_manifest(data, where)
        return _decode(cls, data, where, path)

    @classmethod
    def partial(cls, data: Any, where: str = "run") -> "RunRecord":
        """Some of a manifest's keys (a `summary.json`, a staged manifest): each value checked as
        a manifest's, without the keys a whole manifest must have."""
        return _decode(cls, data, where, "")

    @classmethod
    def new(cls, run_id: str, started: str | None) -> "RunRecord":
        """A record about to be made: every key present, unknowns null (`manifest.new_manifest`)."""
        return cls(id=run_id, started=started)


def warm() -> None:
    """Resolve every section's field types now, msgspec's and `_layout`'s: the first decode in a
    process pays for it, later ones do not. `ledger run` calls it on a thread while
    the job runs, so the record's first read after the job costs nothing extra."""
    for cls in (RunRecord, Host, Command, Code, Image, Seeds, Logs, Gpu, DataEntry, Status, Replay):
        _layout(cls)
    msgspec.convert({}, RunRecord)
