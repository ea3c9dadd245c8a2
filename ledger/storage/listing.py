"""Every run at a branch tip, as listings and run names read it: the lazy `Listing` over the listing
index (`storage/listindex.py`, read through `storage/listview.py`).

The parsed-manifest cache and the read-only switch are `storage/manifestcache.py`; a run folder as
a listing reads it is `storage/listrow.py`. Their names are also importable from here.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from ledger.globs import matcher
from ledger.manifest import NOT_LEDGERS, ManifestError
from ledger.storage.git import MODE_TREE, Repo
from ledger.storage.listindex import ListIndex
from ledger.storage.listrow import (
    Listed,
    ListFields,
    RunReader,
    RunRow,
    check_summary,
    fields_of,
    read_run,
    table_cells,
    with_meta,
)
from ledger.storage.listtables import Damaged, copy_to_memory, text_key
from ledger.storage.listview import TableRow, Test, View, index_view
from ledger.storage.manifestcache import ManifestCache, is_read_only, parse_manifest, parse_record, read_only
from ledger.storage.store import RunEntry
from ledger.storage.summary import SettingValue
from ledger.timefmt import iso

__all__ = [
    "Listing",
    "ManifestCache",
    "RunReader",
    "RunRow",
    "check_summary",
    "listing_at",
    "load_listing",
    "parse_manifest",
    "parse_record",
    "read_only",
    "read_run",
    "table_cells",
    "with_meta",
]

T = TypeVar("T")


# a start time as `timefmt.iso` writes it: the form whose text order is its time order
_OWN_FORM = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z"


class Listing:
    """All runs at a branch tip: listing fields by id, entries, and runs that could not be read.

    Read from the listing index (`storage/listindex.py`) as asked: a verb naming one run looks it
    up by SQL (`named`, `with_prefix`, `entry`) and never loads the other runs; `manifests` and
    `entries` load every run the first time they are read."""

    def __init__(
        self,
        manifests: dict[str, dict[str, Any]] | None = None,
        entries: dict[str, RunEntry] | None = None,
        broken: dict[str, str] | None = None,
        setting_keys: set[str] | None = None,
        metric_names: set[str] | None = None,
        view: View | None = None,
        rebuild: Callable[[], View] | None = None,
    ):
        self._manifests = manifests if manifests is not None or view is not None else {}
        self._entries = entries if entries is not None or view is not None else {}
        self.view = view
        self._rebuild = rebuild
        self.broken: dict[str, str] = broken if broken is not None else self._ask(lambda v: v.broken()) if view else {}
        self._keys = (setting_keys or set(), metric_names or set()) if view is None or setting_keys is not None else None

    def _ask(self, question: Callable[[View], T]) -> T:
        """A question to the index; a damaged index is read again from git, once."""
        assert self.view is not None
        try:
            return question(self.view)
        except Damaged:
            if self._rebuild is None:
                raise
            self.view, self._rebuild = self._rebuild(), None
            return question(self.view)

    @property
    def setting_keys(self) -> set[str]:
        """Every setting any run has."""
        return self._key_names()[0]

    @property
    def metric_names(self) -> set[str]:
        """Every summary metric any run has."""
        return self._key_names()[1]

    def _key_names(self) -> tuple[set[str], set[str]]:
        if self._keys is None:
            self._keys = self._ask(lambda v: v.key_names())
        return self._keys

    @property
    def manifests(self) -> dict[str, dict[str, Any]]:
        """Every readable run's listing fields by id, oldest first."""
        if self._manifests is None:
            self._manifests = self._ask(lambda v: v.fields())
        return self._manifests

    @manifests.setter
    def manifests(self, value: dict[str, dict[str, Any]]) -> None:
        self._manifests = value

    @property
    def entries(self) -> dict[str, RunEntry]:
        """Every run folder's entry by id, the broken ones too."""
        if self._entries is None:
            self._entries = self._ask(lambda v: v.entries())
        return self._entries

    def entry(self, run_id: str) -> RunEntry | None:
        if self._entries is not None or self.view is None:
            return self.entries.get(run_id)
        return self._ask(lambda v: v.entries("id = ?", (run_id,))).get(run_id)

    def fields_of(self, entry: RunEntry) -> dict[str, Any]:
        """A run's listing fields; ManifestError saying why when the run could not be read."""
        if self._manifests is not None or self.view is None:
            found = self.manifests.get(entry.id)
        else:
            found = self._ask(lambda v: v.fields("id = ? AND tree = ?", (entry.id, entry.tree))).get(entry.id)
        if found is None:
            raise ManifestError(self.broken.get(entry.id) or f"{entry.path}: not in the listing", NOT_LEDGERS)
        return found

    def name_of(self, run_id: str) -> str | None:
        """A run's name (None: it has none, or the run is broken or not listed)."""
        if self._manifests is not None or self.view is None:
            m = self.manifests.get(run_id)
            return fields_of(m).name if m is not None else None
        found = self._ask(lambda v: v.listed("id = ?", (run_id,), cells=False)).get(run_id)
        return found.fields.name if found is not None else None

    def record_of(self, entry: RunEntry) -> dict[str, Any]:
        """A run's listing fields with its settings and summary metrics (`settings`, `metrics`),
        read for that run alone; ManifestError saying why when the run could not be read."""
        if self.view is None or (self._manifests is not None and "settings" in (self._manifests.get(entry.id) or {})):
            return self.fields_of(entry)
        found = self._ask(lambda v: v.record(entry.id, entry.tree))
        if found is None:
            raise ManifestError(self.broken.get(entry.id) or f"{entry.path}: not in the listing", NOT_LEDGERS)
        return found

    def ordered(self) -> list[dict[str, Any]]:
        """Manifests oldest first (by start time, then id)."""
        return sorted(self.manifests.values(), key=lambda m: (m.get("started") or "", m["id"]))

    def ordered_entries(self) -> list[tuple[dict[str, Any], RunEntry]]:
        """Every readable run's listing fields and entry, oldest first (by start time, then id)."""
        entries = self.entries
        return [(m, e) for m in self.ordered() if (e := entries.get(str(m.get("id")))) is not None]

    def started_near(self, times: Sequence[float], hours: float) -> list[tuple[dict[str, Any], RunEntry]]:
        """Listing fields and entry, oldest first, of every readable run that may have started
        within `hours` of one of `times` (unix seconds): a superset, for the caller to check each
        run exactly (`compare.replicas.within_age`). By SQL on the stored start times: those in
        ledger's own form (`timefmt.iso`) compare as text, so a window a second wider holds every
        one near enough; a start time in any other form is always included."""
        if self._manifests is not None or self.view is None:
            return self.ordered_entries()
        params: list[Any] = []
        try:
            bounds = [iso(t + sign * (hours * 3600 + 1)) or "" for t in times for sign in (-1, 1)]
        except (OverflowError, OSError, ValueError):  # a window past the years datetime holds: every run
            return self.ordered_entries()
        if not all(fnmatch.fnmatchcase(b, _OWN_FORM) for b in bounds):  # a year before 1000: not in the form
            return self.ordered_entries()
        params = [text_key(b) for b in bounds]
        cond = " OR ".join(["started BETWEEN ? AND ?"] * len(times) + ["CAST(started AS TEXT) NOT GLOB ?"])
        found = self._ask(lambda v: v.fields_entries(cond, (*params, _OWN_FORM)))
        return list(found.values())

    def named(self, names: tuple[str, ...]) -> list[ListFields]:
        """The listing fields of the runs called one of `names`, oldest first (start time, id)."""
        if self._manifests is not None or self.view is None:
            return [f for f in map(fields_of, self.ordered()) if f.name is not None and f.name in names]
        keys = tuple(dict.fromkeys(text_key(n) for n in names))
        cond = f"name IN ({','.join('?' * len(keys))})"
        return [listed.fields for listed in self._ask(lambda v: v.listed(cond, keys, cells=False)).values()]

    def shown(self) -> list[ListFields]:
        """Every readable run's listing fields, oldest first (start time, id)."""
        if self._manifests is not None or self.view is None:
            return [fields_of(m) for m in self.ordered()]
        return [listed.fields for listed in self._ask(lambda v: v.listed(cells=False)).values()]

    def with_prefix(self, prefix: str) -> list[str]:
        """The ids of the runs (broken ones too) that start with `prefix`, sorted."""
        if self._entries is not None or self.view is None:
            return sorted(rid for rid in self.entries if rid.startswith(prefix))
        # a range of the id index: ids are ASCII, every one that starts with `prefix` sorts below prefix + U+FFFF
        found = self._ask(lambda v: v.entries("id >= ? AND id < ?", (prefix, prefix + "\uffff")))
        return sorted(rid for rid in found if rid.startswith(prefix))

    @property
    def loaded(self) -> bool:
        """Whether every run's listing fields are loaded (`manifests` was read)."""
        return self._manifests is not None or self.view is None

    def column(self, col: str, with_num: bool = False) -> dict[str, SettingValue]:
        """One setting (`col` "s:<name>") or summary metric ("m:<name>") of every run that has it
        (`View.column`)."""
        return self._ask(lambda v: v.column(col, with_num)) if self.view is not None else {}

    def texts(self) -> dict[str, tuple[bytes, bytes]]:
        """Every run's settings and summary metrics as JSON text (ASCII bytes)."""
        return self._ask(lambda v: v.texts()) if self.view is not None else {}

    def packed_texts(self, ids: Sequence[str] | None = None) -> dict[str, tuple[bytes, bytes]]:
        """`texts` as stored, compressed, of every run or of `ids` (`View.packed_texts`;
        `listtables.unpack_json` reads one)."""
        return self._ask(lambda v: v.packed_texts(ids)) if self.view is not None else {}

    def forget_text(self, rid: str) -> None:
        """Drop a run's stored texts, found damaged after `packed_texts` (`View.forget_text`)."""
        if self.view is not None:
            self.view.forget_text(rid)

    def passing(self, tests: Sequence[Test]) -> dict[str, Listed]:
        """The listing fields and table cells of the runs that pass every test, oldest first (`View.passing`)."""
        return self._ask(lambda v: v.passing(tests)) if self.view is not None else {}

    def newest(self, tests: Sequence[Test], n: int, keep: Callable[[ListFields], bool], cells: bool = True) -> dict[str, Listed]:
        """The newest `n` readable runs that pass `tests` and `keep`, oldest first (`View.newest`)."""
        return self._ask(lambda v: v.newest(tests, n, keep, cells)) if self.view is not None else {}

    def passing_table(self, tests: Sequence[Test]) -> list[TableRow]:
        """`passing`, as the rows of a table (`table_rows`)."""
        return self._ask(lambda v: v.passing_table(tests)) if self.view is not None else []

    def count(self) -> int:
        """How many readable runs there are."""
        return self._ask(lambda v: v.count()) - len(self.broken) if self.view is not None else 0

    def with_cells(self, cells: bool = True) -> dict[str, Listed]:
        """Every readable run's listing fields and (`cells`) table cells, oldest first."""
        return self._ask(lambda v: v.listed(cells=cells)) if self.view is not None else {}

    def table_rows(self) -> list[TableRow]:
        """Every readable run's table cells and the fields the default table reads, oldest first."""
        return self._ask(lambda v: v.table_rows()) if self.view is not None else []

    def stored_table(self) -> str | None:
        """The default `ledger list` table of this very `runs/` tree, as printed before."""
        return self.view.stored_view() if self.view is not None else None

    def kept_before(self) -> tuple[str, list[TableRow]] | None:
        """The default table kept for an earlier `runs/` tree, and the runs this one adds to it
        (`View.kept_before`); None: the table is made whole."""
        return self.view.kept_before() if self.view is not None else None

    def store_table(self, text: str) -> None:
        if self.view is not None:
            self.view.store_view(text)

    def refuse_broken(self, run_id: str) -> None:
        """A verb naming a run that listings skip refuses it, in one line (docs/trust.md)."""
        if run_id in self.broken:
            raise ManifestError(f"run {run_id} is refused: {self.broken[run_id]}", "the record is not one ledger wrote; listings skip it")


def load_listing(
    repo: Repo,
    tip: str | None,
    with_settings: bool = False,
    *,
    setting_keys: Iterable[str] = (),
    metric_names: Iterable[str] = (),
    metric_globs: tuple[str, ...] = (),
    cold: bool = False,
) -> Listing:
    """Every run's summary at `tip`; corrupt runs are reported in `broken`, never fatal.

    `with_settings`: each run's settings and summary metrics too (`settings`, `metrics`); otherwise
    only the settings named in `setting_keys` and the metrics named in `metric_names` or matching
    a glob of `metric_globs` (what a filter or a `--metric` column reads). `Listing.setting_keys`
    and `Listing.metric_names` name every setting and metric any run has.

    A run folder keeps `summary.json` (what `ledger list` shows) and `settings.json` beside
    `manifest.yaml`: JSON parses ~100x faster than YAML. Folders without them fall back to the
    YAML, parsed once and cached by blob id. What was read is kept in the listing index
    (`storage/listindex.py`), by git tree id; `cold` reads every folder from git instead.
    """
    listing = listing_at(repo, tip, cold)
    if listing.view is None:
        return listing
    if with_settings:
        texts = listing.texts()
        for rid, m in listing.manifests.items():
            settings, metrics = texts.get(rid, (b"{}", b"{}"))
            m["settings"], m["metrics"] = json.loads(settings), json.loads(metrics)
        return listing
    names = set(metric_names) | set(filter(matcher(metric_globs), listing.metric_names))
    for kind, keys, known in (("settings", set(setting_keys), listing.setting_keys), ("metrics", names, listing.metric_names)):
        for key in sorted(keys & known):
            for rid, value in listing.column(f"{kind[0]}:{key}").items():
                if rid in listing.manifests:
                    listing.manifests[rid].setdefault(kind, {})[key] = value
    return listing


def listing_at(repo: Repo, tip: str | None, cold: bool = False) -> Listing:
    """The runs at `tip`, read from the listing index as asked (nothing loaded yet but the
    broken runs)."""
    if tip is None:
        return Listing()
    runs_tree = repo.tree_entry(tip, "runs")
    if runs_tree is None or runs_tree[1] != MODE_TREE:
        return Listing()
    cache = ManifestCache(repo.common_dir)
    reader = RunReader(repo, cache)
    if cold:
        return Listing(view=index_view(ListIndex(copy_to_memory(None, cache.version), cache.version), repo, runs_tree[0], reader))

    def rebuild() -> View:  # found damaged while reading: emptied and every folder read again
        return _open_view(repo, runs_tree[0], cache, reader, clear=True)

    return Listing(view=_open_view(repo, runs_tree[0], cache, reader), rebuild=rebuild)


def _open_view(repo: Repo, runs_tree: str, cache: ManifestCache, reader: RunReader, clear: bool = False) -> View:
    """The index of `runs_tree` in the cache file, brought up to date (a read-only one in a copy in
    memory), or in memory alone when the file cannot be used or is found damaged twice; `clear`:
    emptied first (it was found damaged)."""
    read_only = is_read_only()
    index = ListIndex(
        cache.db if cache.db is not None and not (clear and read_only) else copy_to_memory(None, cache.version), cache.version, read_only
    )
    if clear and not index.read_only and not index.clear():
        index = ListIndex(copy_to_memory(None, cache.version), cache.version)
    for _attempt in range(2):
        try:
            view = index_view(index, repo, runs_tree, reader)
            view.check()
            return view
        except Damaged:
            if index.read_only:
                index = ListIndex(copy_to_memory(None, cache.version), cache.version)
            elif not index.clear():
                break
    return index_view(ListIndex(copy_to_memory(None, cache.version), cache.version), repo, runs_tree, reader)
