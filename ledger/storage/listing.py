"""Reading many manifests fast: parse each manifest blob once, cache it by blob id.

A blob id names its content, so the cache never goes stale. It lives in the git common dir
(`.git/ledger/manifests.sqlite`), shared by worktrees and never part of the working tree.
Listing 10,000 runs is then a tree walk plus one SQL read (see `make bench`).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.cache import code_version
from ledger.errors import LedgerError
from ledger.manifest import RUN_ID_RE, SCHEMA, ManifestError, check_manifest
from ledger.storage.git import Repo
from ledger.storage.limits import check_depth, load_json
from ledger.storage.store import RunEntry, iter_runs


@dataclass
class Listing:
    """All runs at a branch tip: manifests by id, and runs that could not be read."""

    manifests: dict[str, dict[str, Any]] = field(default_factory=dict)
    entries: dict[str, RunEntry] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)

    def ordered(self) -> list[dict[str, Any]]:
        """Manifests oldest first (by start time, then id)."""
        return sorted(self.manifests.values(), key=lambda m: (m.get("started") or "", m["id"]))


class ManifestCache:
    def __init__(self, common_dir: Path):
        self.path = common_dir / "ledger" / "manifests.sqlite"
        self._db: sqlite3.Connection | None = None
        self._table = "m"
        try:
            self.path.parent.mkdir(exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=5)
            # one table per version of the parsing code (ledger/cache.py); older tables are dropped
            self._table = f"m_{code_version(__name__, 'ledger.yamlio')}"
            for (name,) in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                if name != self._table:
                    self._db.execute(f'DROP TABLE IF EXISTS "{name}"')
            self._db.execute(f"CREATE TABLE IF NOT EXISTS {self._table} (blob TEXT PRIMARY KEY, json TEXT)")
        except sqlite3.Error:
            self._db = None  # a cache we cannot open is just a slower listing

    def get_many(self, blobs: list[str]) -> dict[str, dict[str, Any]]:
        if self._db is None or not blobs:
            return {}
        out: dict[str, dict[str, Any]] = {}
        try:
            wanted = set(blobs)
            for blob, text in self._db.execute(f"SELECT blob, json FROM {self._table}"):
                if blob in wanted:
                    out[blob] = json.loads(text)
        except sqlite3.Error:
            return {}
        return out

    def put_many(self, items: dict[str, dict[str, Any]]) -> None:
        if self._db is None or not items:
            return
        try:
            with self._db:
                self._db.executemany(
                    f"INSERT OR REPLACE INTO {self._table} VALUES (?, ?)", [(k, json.dumps(v, default=str)) for k, v in items.items()]
                )
        except sqlite3.Error:
            pass


def parse_manifest(raw: bytes, where: str) -> dict[str, Any]:
    from ledger import yamlio  # lazily: ruamel costs ~15 ms of every command's start-up

    m = check_manifest(check_depth(yamlio.loads(raw, f"{where}/manifest.yaml"), f"{where}/manifest.yaml"), where)
    _check_id(m, where, "manifest.yaml")
    return m


def _check_id(data: dict[str, Any], where: str, name: str) -> None:
    """A record whose `id` is not its folder's would be shown and replayed as another run."""
    for key in ("name", "note", "started", "finished", "replay_of"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise ManifestError(f"{where}: {name} has a {key!r} that is not text", "the record is not one ledger wrote")
    if not isinstance(data.get("status") or {}, dict):
        raise ManifestError(f"{where}: {name} has a 'status' that is not a mapping", "the record is not one ledger wrote")
    folder = where.rstrip("/").rsplit("/", 1)[-1]
    if RUN_ID_RE.match(folder) and data.get("id") != folder:
        raise ManifestError(
            f"{where}: {name} says it is run {str(data.get('id'))[:40]!r}, not {folder}", "the record is not one ledger wrote"
        )


def load_listing(repo: Repo, tip: str | None, with_settings: bool = False) -> Listing:
    """Every run's summary at `tip` (and its settings when asked); corrupt runs are reported in
    `broken`, never fatal.

    A run folder keeps `summary.json` (what `ledger list` shows) and `settings.json` beside
    `manifest.yaml`: JSON parses ~100x faster than YAML, and the settings (often 150+ of them)
    are read only by the commands that compare runs. Folders without them fall back to the YAML,
    parsed once and cached by blob id.
    """
    listing = Listing()
    if tip is None:
        return listing
    entries = iter_runs(repo, tip)
    need_yaml = [e for e in entries if e.manifest_blob and (e.summary_blob is None or (with_settings and e.settings_blob is None))]
    cache = ManifestCache(repo.common_dir) if need_yaml else None
    cached = cache.get_many([e.manifest_blob for e in need_yaml if e.manifest_blob]) if cache else {}
    fresh: dict[str, dict[str, Any]] = {}
    for e in entries:
        listing.entries[e.id] = e
        try:
            if e.summary_blob is not None and (not with_settings or e.settings_blob is not None):
                m = check_summary(load_json(repo.read_blob(e.summary_blob), f"{e.path}/summary.json"), e.path)
                if with_settings and e.settings_blob is not None:
                    settings = load_json(repo.read_blob(e.settings_blob), f"{e.path}/settings.json")
                    m["settings"] = settings if isinstance(settings, dict) else {}
            elif e.manifest_blob is None:
                raise ManifestError(f"{e.path}: no manifest.yaml in the run folder", "the record is damaged")
            else:
                m = cached.get(e.manifest_blob) or parse_manifest(repo.read_blob(e.manifest_blob), e.path)
                fresh.setdefault(e.manifest_blob, m)
        except ValueError as exc:
            listing.broken[e.id] = f"{e.path}: summary or settings is not valid JSON ({exc})"
            continue
        except LedgerError as exc:
            listing.broken[e.id] = exc.message
            continue
        if e.meta_blob is not None:
            with_meta(m, repo.read_blob(e.meta_blob))
        listing.manifests[e.id] = m
    if cache is not None:
        cache.put_many({k: v for k, v in fresh.items() if k not in cached})
    return listing


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
    _check_id(data, where, "summary.json")
    return data


SUMMARY_KEYS = ("schema", "id", "name", "note", "started", "finished", "status", "replay_of", "trackers")


def summary_of(manifest: dict[str, Any], metrics: dict[str, Any] | None = None) -> dict[str, Any]:
    """What `ledger list` shows; `settings.json` holds the settings, `manifest.yaml` everything.
    `metrics`: the summary metrics (`ledger.compare.summarymetrics`), kept under `metrics`."""
    out = {k: manifest.get(k) for k in SUMMARY_KEYS}
    gpu = manifest.get("gpu") or {}
    out["gpu"] = {k: gpu.get(k) for k in ("pauses", "paused_s", "unavailable")}
    replay = manifest.get("replay") or {}
    fidelity = replay.get("fidelity") if isinstance(replay, dict) else None
    if isinstance(fidelity, dict) and fidelity.get("verdict"):
        out["fidelity"] = fidelity["verdict"]  # a replay's: bitwise / close / diverged / unknown
    if metrics is not None:
        out["metrics"] = metrics
    return out


def list_fields(m: dict[str, Any]) -> dict[str, Any]:
    """The fields `ledger list` (and `ledger report`) show for a run."""
    status = m.get("status") or {}
    gpu = m.get("gpu") or {}
    return {
        "id": m["id"],
        "name": m.get("name"),
        "state": status.get("state"),
        "exit_code": status.get("exit_code"),
        "duration_s": status.get("duration_s"),
        "started": m.get("started"),
        "paused": gpu.get("pauses") if isinstance(gpu, dict) else None,
        "paused_s": gpu.get("paused_s") if isinstance(gpu, dict) else None,
        "replay_of": m.get("replay_of"),
        "note": m.get("note"),
        "fidelity": m.get("fidelity") or ((m.get("replay") or {}).get("fidelity") or {}).get("verdict"),
        "tags": m.get("tags") or [],
        "archived": bool(m.get("archived")),
        "trackers": m.get("trackers"),
    }
