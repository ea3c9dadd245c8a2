"""One run folder as a listing reads it from git: its entry, its listing fields (summary.json with
meta.json laid over it), its settings and summary metrics, its table cells.

A listing of every run reads every folder once when there is no index (a fresh clone, a new
ledger), so this is the cold path: one tree read per folder, summary.json decoded by msgspec and
its metrics checked by a msgspec type, settings.json decoded by msgspec too (a run whose settings
are over a limit is skipped by every listing, so they are read). Whatever msgspec refuses is read again the slower way, by
`json` and the Python checks, which say what is wrong: the fast path only ever accepts what they
accept, and gives the same values.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from ledger.errors import LedgerError
from ledger.manifest import SCHEMA, ManifestError, duration_text
from ledger.storage.git import MODE_TREE, Repo
from ledger.storage.limits import (
    MAX_DEPTH,
    MAX_FILES,
    MAX_JSON_BYTES,
    MAX_METRICS,
    MAX_SETTINGS,
    NOT_OURS,
    check_count,
    check_depth,
    check_files,
    check_size,
    decoded,
    load_json,
    load_settings,
)
from ledger.storage.manifestcache import ManifestCache, check_id, yaml_manifest
from ledger.storage.store import RECORD_FILES, RUN_FILES, RunEntry, file_oid
from ledger.storage.summary import Metrics, Settings, check_metrics
from ledger.termstyle import printable_cell
from ledger.textfmt import MISSING, note_cell

Number = int | float | msgspec.UnsetType


class _MetricValues(msgspec.Struct):
    """What `check_metrics` asks of one summary metric: each of its `METRIC_KEYS` present is a
    number (never a bool; other keys are left alone)."""

    last: Number = msgspec.UNSET
    last_step: Number = msgspec.UNSET
    min: Number = msgspec.UNSET
    min_step: Number = msgspec.UNSET
    max: Number = msgspec.UNSET
    max_step: Number = msgspec.UNSET


_JSON = msgspec.json.Decoder()
_METRICS = dict[str, _MetricValues]


class RunRow(msgspec.Struct):
    """One run folder as read from git: its listing fields as the record holds them (or why it
    is broken), the `ListFields` a listing shows of them, settings, summary metrics and table
    cells (`table_cells`)."""

    entry: RunEntry
    fields: dict[str, Any] | None
    broken: str | None = None
    settings: Settings = msgspec.field(default_factory=dict)
    metrics: Metrics = msgspec.field(default_factory=dict)
    cells: tuple[str, ...] = ()
    shown: ListFields | None = None


class Listed(NamedTuple):
    """A readable run as a listing shows it: its listing fields and its table cells."""

    fields: ListFields
    cells: tuple[str, ...]


class FullRow(msgspec.Struct, frozen=True):
    """A listed run with its settings and summary metrics (`--json`, `--csv`, a filter); the
    metrics a `--metric` column shows are added to `metrics` as they are read."""

    fields: ListFields
    settings: Settings
    metrics: Metrics


def fast_json(raw: bytes, where: str) -> Any:
    """`limits.load_json` of a record file, decoded by msgspec; what msgspec refuses (not UTF-8,
    `NaN`, a number out of range, a lone surrogate) goes to `load_json`, which reads it as the
    `json` module does or says why not."""
    check_size(len(raw), MAX_JSON_BYTES, where)
    try:
        data = _JSON.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return load_json(raw, where)
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:  # cannot nest deeper: skip the walk
        return data
    return check_depth(data, where)


def checked_metrics(metrics: Any, where: str) -> Metrics:
    """`summary.check_metrics`: msgspec's check of the type first, the Python one (with its
    message) for what that refuses."""
    if type(metrics) is dict:
        try:
            msgspec.convert(metrics, _METRICS)
            return metrics  # type: ignore[no-any-return]  # the shape `_METRICS` just checked
        except msgspec.ValidationError:
            pass
    return check_metrics(metrics, where)


def fast_settings(raw: bytes, where: str) -> Settings:
    """`limits.load_settings`, its JSON decoded by msgspec (`fast_json`)."""
    if len(raw) <= MAX_JSON_BYTES and raw.count(b":") > MAX_SETTINGS:  # it may hold too many: counted the slow way
        return load_settings(raw, where)
    data = fast_json(raw, where)
    if not isinstance(data, dict):
        raise ManifestError(f"{where} is not a JSON object of settings", NOT_OURS)
    decoded(where, len(data))
    return data


def read_folder(repo: Repo, run_id: str, path: str, tree: str, cache: ManifestCache) -> RunRow:
    """A run folder's row from one read of its tree (`folder_entry`), then its record (`read_run`)."""
    found = folder_entry(repo, run_id, path, tree)
    return found if isinstance(found, RunRow) else read_run(repo, found, cache)


def folder_entry(repo: Repo, run_id: str, path: str, tree: str) -> RunEntry | RunRow:
    """A run folder's entry from one read of its tree, its files checked at the door
    (`store.run_entry`: a broken row naming none of them when one is not a file; `limits.
    check_files`): the broken row when they fail."""
    items = {name: (oid, mode) for name, oid, mode in repo.list_tree(tree)}
    try:
        entry = _entry(run_id, path, tree, items)
    except LedgerError as exc:
        return RunRow(RunEntry(run_id, path, tree, None), None, exc.message)
    try:
        if len(items) > MAX_FILES or any(mode == MODE_TREE for _oid, mode in items.values()):
            check_files(repo, tree, path)  # the count through every level
    except LedgerError as exc:
        return RunRow(entry, None, exc.message)
    return entry


def reads_manifest(e: RunEntry) -> bool:
    """Whether `read_run` reads the folder's manifest.yaml (through the manifest cache): a record
    written before summary.json and settings.json were."""
    return e.summary_blob is None or e.settings_blob is None


def _entry(run_id: str, path: str, tree: str, items: dict[str, tuple[str, int]]) -> RunEntry:
    """`store.run_entry` of a tree already listed: ManifestError naming the first of `RUN_FILES`
    that is not a file."""
    for name in RUN_FILES:
        file_oid(path, name, items.get(name))
    found = [items.get(name) for name in RECORD_FILES]
    return RunEntry(run_id, path, tree, *(item[0] if item else None for item in found))


def read_run(repo: Repo, e: RunEntry, cache: ManifestCache | None) -> RunRow:
    """One run folder from git, its files already checked (`read_folder`): its listing fields
    (summary.json, meta.json over it), settings and summary metrics, through the read limits
    (`storage/limits.py`); a bad record is a broken row. `cache` may be None where the folder's
    record is not an old manifest.yaml (`reads_manifest`)."""
    settings: Any
    try:
        if e.summary_blob is not None:
            m = check_summary(fast_json(repo.read_blob(e.summary_blob), f"{e.path}/summary.json"), e.path)
            if e.settings_blob is not None:
                settings = fast_settings(repo.read_blob(e.settings_blob), f"{e.path}/settings.json")
            else:
                settings = _manifest(repo, e, cache).get("settings")
        elif e.manifest_blob is None:
            raise ManifestError(f"{e.path}: no manifest.yaml in the run folder", "the record is damaged")
        else:
            m = dict(_manifest(repo, e, cache))
            settings = m.get("settings")
        m.pop("settings", None)
        metrics = checked_metrics(m.pop("metrics", None), e.path)
        if e.meta_blob is not None:
            with_meta(m, repo.read_blob(e.meta_blob))
    except LedgerError as exc:
        return RunRow(e, None, exc.message)
    shown = fields_of(m)
    return RunRow(e, m, None, settings if isinstance(settings, dict) else {}, metrics, table_cells(shown), shown)


def _manifest(repo: Repo, e: RunEntry, cache: ManifestCache | None) -> dict[str, Any]:
    assert cache is not None, "an old record is read through the manifest cache"
    return yaml_manifest(repo, e, cache)


class RunReader(msgspec.Struct):
    """How the listing index reads a run folder from git: `folder` when it first meets the folder,
    `full` when it reads the record again for its settings and metrics text (`--json`, a filter)."""

    repo: Repo
    cache: ManifestCache

    def folder(self, run_id: str, path: str, tree: str) -> RunRow:
        return read_folder(self.repo, run_id, path, tree, self.cache)

    def full(self, e: RunEntry) -> RunRow:
        return read_run(self.repo, e, self.cache)


def with_meta(m: dict[str, Any], raw: bytes) -> None:
    """Lay a run's meta.json (tags, note, archived: `storage/runmeta.py`) over its listing fields."""
    from ledger.storage.runmeta import parse_meta

    meta = parse_meta(raw)
    m["tags"] = list(meta.tags)
    m["archived"] = meta.archived
    if meta.note is not None:
        m["note"] = meta.note


def check_summary(data: Any, where: str) -> dict[str, Any]:
    """Validate a run's summary.json (the listing fields of its manifest)."""
    if not isinstance(data, dict) or not isinstance(data.get("schema"), int) or "id" not in data:
        raise ManifestError(f"{where}: summary.json is not a run summary", "the record is corrupt")
    if data["schema"] > SCHEMA:
        raise ManifestError(
            f"{where}: manifest schema {data['schema']} is newer than this ledger understands ({SCHEMA})",
            "upgrade ledger (`pip install -U ledger`)",
        )
    check_id(data, where, "summary.json")
    metrics = data.get("metrics")
    check_count(len(metrics) if isinstance(metrics, dict) else 0, MAX_METRICS, f"{where}/summary.json", "metric names")
    return data


class ListFields(msgspec.Struct, frozen=True):
    """The fields `ledger list` (and `ledger report`, `list --json`) show of a run, in that order.
    Typed where the record's checks make them so (`check_summary`, `parse_record`, meta.json);
    the others are whatever the record holds. The listing index keeps them as the tuple of their
    values (`msgspec.structs.astuple`), read back positionally."""

    id: str
    name: str | None = None
    state: Any = None
    exit_code: Any = None
    duration_s: Any = None
    started: str | None = None
    paused: Any = None
    paused_s: Any = None
    replay_of: str | None = None
    note: str | None = None
    fidelity: Any = None
    tags: list[Any] = []
    archived: bool = False
    trackers: Any = None


def fields_of(m: dict[str, Any]) -> ListFields:
    """A run's `ListFields`, from its listing fields (summary.json with meta.json over it)."""
    status = m.get("status") or {}
    gpu = m.get("gpu") or {}
    gpu = gpu if isinstance(gpu, dict) else {}
    return ListFields(
        id=m["id"],
        name=m.get("name"),
        state=status.get("state"),
        exit_code=status.get("exit_code"),
        duration_s=status.get("duration_s"),
        started=m.get("started"),
        paused=gpu.get("pauses"),
        paused_s=gpu.get("paused_s"),
        replay_of=m.get("replay_of"),
        note=m.get("note"),
        fidelity=m.get("fidelity") or ((m.get("replay") or {}).get("fidelity") or {}).get("verdict"),
        tags=m.get("tags") or [],
        archived=bool(m.get("archived")),
        trackers=m.get("trackers"),
    )


TAGS, NOTE, REPLAY, ARCHIVED = 1, 2, 4, 8  # `table_flags`: what of a run decides the default table's columns
ALL_FLAGS = TAGS | NOTE | REPLAY | ARCHIVED


def table_flags(s: ListFields) -> int:
    """Which of the fields that decide the default table's columns a run has (`TAGS`, `NOTE`,
    `REPLAY`, `ARCHIVED`): what the table reads of a run beside its cells (`table_cells`)."""
    return TAGS * bool(s.tags) | NOTE * bool(s.note) | REPLAY * bool(s.replay_of) | ARCHIVED * bool(s.archived)


def table_cells(s: ListFields) -> tuple[str, ...]:
    """A recorded run's cells in `ledger list`'s table: ID, NAME, STATE, EXIT, TIME, PAUSED,
    STARTED, then its TAGS and NOTE cells (shown when a listed run has tags, a note), each
    printable (`termstyle.printable_cell`: a pulled name's newline stays in its cell)."""
    paused = "-" if s.paused is None else f"{s.paused} ({_duration(s.paused_s)})" if s.paused else "0"
    state = s.state or "-"
    if s.replay_of:
        state += "*" + (f" ({s.fidelity})" if s.fidelity else "")
    if s.archived:  # shown only with --archived
        state += " (archived)"
    exit_code = "-" if s.exit_code is None else str(s.exit_code)
    started = (s.started or "-")[:19].replace("T", " ")
    tags = ",".join(s.tags) or "-"
    cells = (s.id, s.name or "-", state, exit_code, _duration(s.duration_s), paused, started, tags, note_cell(s.note))
    # a cell `isprintable` holds no control character, tab or newline: `printable_cell` keeps it as it is
    return tuple(c if c.isprintable() else printable_cell(c) for c in map(str, cells))


def _duration(s: Any) -> str:
    return duration_text(s) if isinstance(s, (int, float)) else MISSING
