"""The listing index (`ledger/storage/listindex.py`): the same listing and filter results as a cold
read of every run folder, after new runs, a tag and an archive, a pull of another clone's runs and a
damaged index; and a new tip is indexed by reading only the run folders that changed.

Runs are written through the store code `ledger run` uses (as bench/bench_daily.py does), so that
a few dozen runs cost milliseconds; tag, archive, push and pull are the real commands."""

from __future__ import annotations

import datetime as dt
import io
import json
import shutil
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import msgspec
import pytest
from conftest import drawn_on_a_terminal, git, ledger, make_repo, module_home

from ledger.commands.listing import list_runs
from ledger.compare.runfilter import RunFilter, Where
from ledger.errors import LedgerError
from ledger.manifest import new_manifest
from ledger.runref import resolve
from ledger.storage import listindex, manifestcache
from ledger.storage.git import Repo
from ledger.storage.listindex import ListIndex
from ledger.storage.listing import ManifestCache, listing_at, load_listing, read_only
from ledger.storage.listrow import FullRow, RunReader, RunRow, fields_of
from ledger.storage.listtables import table_names
from ledger.storage.listview import View, index_view
from ledger.storage.runmeta import RunMeta, change_meta
from ledger.storage.store import RunEntry, build_run_tree, commit_message
from ledger.storage.summary import summary_of

FILTERS = [
    (),
    ("--where", "lr=2e-06"),
    ("--where", "lr!=2e-06", "--where", "seed<2"),
    ("--where", "train/loss<0.5"),
    ("--where", "lr=12345"),  # no run
    ("--name", "run-1*"),
    ("--tag", "best"),
    ("--archived",),
    ("--since", "2026-01-01T00:00:20"),
]


def _values(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run i's settings and summary metrics."""
    metrics = {"train/loss": {"last": i / 10, "last_step": 3, "min": 0.0, "min_step": 0, "max": 9.0, "max_step": 1}}
    return {"lr": 1e-6 * (i % 3), "seed": i % 4, "flag": f"v{i}"}, metrics


def _add_runs(
    root: Path,
    first: int,
    n: int,
    values: Callable[[int], tuple[dict[str, Any], dict[str, Any]]] = _values,
    started: Callable[[int], str] | None = None,
) -> list[str]:
    repo = Repo(root)
    code = repo.code_snapshot()
    tip = repo.branch_tip("experiments")
    ids = []
    for i in range(first, first + n):
        t = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i)
        rid = f"{t.strftime('%Y%m%d-%H%M%S')}-{i % 251:02x}{i % 7:02x}"
        m = new_manifest(rid, t)
        m["name"] = f"run-{i}"
        if started is not None:  # a start time as another tool or a hand-edit wrote it
            m["started"] = started(i)
        m["settings"], metrics = values(i)
        m["status"] = {"state": "finished", "exit_code": 0, "signal": None, "duration_s": 1.0}
        files = {
            "manifest.yaml": json.dumps(m).encode(),
            "summary.json": json.dumps(summary_of(m, metrics)).encode(),
            "settings.json": json.dumps(m["settings"]).encode(),
        }
        run_tree = repo.tree_with_edits(None, {k: (repo.blob(v), 0o100644) for k, v in files.items()})
        tree = build_run_tree(repo, code.tree, tip, rid, run_tree)
        parents = [tip, code.commit] if tip else [code.commit]
        tip = repo.commit(tree, parents, commit_message(rid, m["name"], "exit 0", "1.0s", code.commit))
        ids.append(rid)
    assert tip is not None
    repo.update_ref("refs/heads/experiments", tip, repo.branch_tip("experiments"), "test runs")
    return ids


def _same_as_cold(root: Path) -> None:
    """The index gives what a cold read of every folder gives: the listing and every filter."""
    repo = Repo(root)
    tip = repo.branch_tip("experiments")
    warm, cold = load_listing(repo, tip, with_settings=True), load_listing(repo, tip, with_settings=True, cold=True)
    assert warm.manifests == cold.manifests and warm.broken == cold.broken
    assert warm.entries == cold.entries
    narrow = load_listing(repo, tip, setting_keys=["lr"], metric_names=["train/loss"])
    assert narrow.setting_keys == cold.setting_keys == {"lr", "seed", "flag"}
    for rid, m in cold.manifests.items():
        assert narrow.manifests[rid].get("settings", {}).get("lr") == m["settings"].get("lr")
        assert narrow.manifests[rid].get("metrics") == {"train/loss": m["metrics"]["train/loss"]}
    for args in FILTERS:
        for shape in (("--json",), ()):  # the objects, and the table (the default one kept per tree)
            listed = ledger(root, "list", *shape, *args)
            assert listed.returncode == 0, listed.stderr
            again = ledger(root, "list", *shape, *args)
            kept = root / ".git" / "ledger"  # the index, and the default listing kept whole
            (kept / "manifests.sqlite").rename(root / "saved.sqlite")
            shutil.rmtree(kept / "answers", ignore_errors=True)
            cold_listed = ledger(root, "list", *shape, *args)
            (root / "saved.sqlite").rename(kept / "manifests.sqlite")
            if shape:
                assert json.loads(listed.stdout) == json.loads(cold_listed.stdout), args
            assert listed.stdout == again.stdout == cold_listed.stdout, (shape, args)
    # `-n N` decodes only the newest N passing runs: the same runs as the first N of all of them
    for args in FILTERS:
        every = json.loads(ledger(root, "list", "--json", *args).stdout)
        assert json.loads(ledger(root, "list", "--json", "-n", "3", *args).stdout) == every[:3], args
        assert json.loads(ledger(root, "list", "--json", "-n", "3", "--reverse", *args).stdout) == every[:3][::-1], args
    # the default and `--where` tables, made from the kept cells alone, are the general table's
    for args in FILTERS:
        every = ledger(root, "list", *args, "-n", "1000000")  # the newest million: all, through the general table
        assert every.returncode == 0 and every.stdout == ledger(root, "list", *args).stdout, args


def _tables(cache: ManifestCache) -> dict[str, str]:
    return table_names(cache.version)


def _index_rows(root: Path) -> list[tuple[str, str]]:
    """What the index holds, as (key, part): each `runs/` tree ("tree"), each shard ("shard") and
    each filter column made for a shard ("s:<setting>", "m:<metric>")."""
    cache = ManifestCache(root / ".git")
    assert cache.db is not None
    t = _tables(cache)
    rows = [(tree, "tree") for (tree,) in cache.db.execute(f"SELECT tree FROM {t['t']}")]
    rows += [(shard, "shard") for (shard,) in cache.db.execute(f"SELECT shard FROM {t['s']}")]
    rows += [(shard, col) for col, shard in cache.db.execute(f"SELECT col, shard FROM {t['q']}")]
    cache.close()
    return rows


@pytest.fixture(scope="module")
def made_proj(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository after `ledger init` with 24 runs on its experiments branch, made once for the
    module (no listing has run in it yet: no index); each test works on a copy of it (`proj`)."""
    with module_home(tmp_path_factory, "home-listindex"):
        root = make_repo(tmp_path_factory.mktemp("listindex") / "proj", {"README.md": "x\n"})
        assert ledger(root, "init").returncode == 0
        _add_runs(root, 0, 24)
    return root


@pytest.fixture
def proj(made_proj: Path, tmp_path: Path, isolated_home: Path) -> Path:
    return Path(shutil.copytree(made_proj, tmp_path / "proj", symlinks=True))


def test_index_matches_a_cold_read_after_new_runs_tags_and_archive(proj: Path) -> None:
    _same_as_cold(proj)
    assert any(part == "s:lr" for _, part in _index_rows(proj))
    new = _add_runs(proj, 24, 6)
    _same_as_cold(proj)
    assert ledger(proj, "tag", new[0], "best").returncode == 0
    assert ledger(proj, "archive", new[1]).returncode == 0
    assert ledger(proj, "note", new[2], "a note\nof two lines").returncode == 0
    _same_as_cold(proj)
    table = ledger(proj, "list").stdout
    assert table.startswith("ID ") and " TAGS " in table.splitlines()[0] and table.splitlines()[0].endswith("NOTE")
    shown = json.loads(ledger(proj, "list", "--json", "--tag", "best").stdout)
    assert [r["id"] for r in shown] == [new[0]]
    assert new[1] not in {r["id"] for r in json.loads(ledger(proj, "list", "--json").stdout)}


def test_a_new_tip_reads_only_the_new_and_changed_run_folders(proj: Path) -> None:
    repo = Repo(proj)
    load_listing(repo, repo.branch_tip("experiments"))  # the index of the 24 runs
    new = _add_runs(proj, 24, 3)
    tagged = load_listing(repo, repo.branch_tip("experiments"), cold=True).ordered()[5]["id"]
    change_meta(repo, "experiments", tagged, "run-5", "tag best", lambda m: RunMeta(("best",), m.note, m.archived))
    tip = repo.branch_tip("experiments")
    assert tip is not None
    runs_tree = repo.tree_entry(tip, "runs")
    assert runs_tree is not None
    read: list[str] = []
    cache = ManifestCache(repo.common_dir)

    class Counting(RunReader):
        def folder(self, run_id: str, path: str, tree: str) -> RunRow:
            read.append(run_id)
            return super().folder(run_id, path, tree)

    assert cache.db is not None
    view = index_view(ListIndex(cache.db, cache.version), repo, runs_tree[0], Counting(repo, cache))
    assert sorted(read) == sorted([*new, tagged])
    assert view.fields()[tagged]["tags"] == ["best"] and len(view.entries()) == 27
    cache.close()


def test_pulled_runs_of_another_clone_are_indexed(proj: Path, tmp_path: Path) -> None:
    ledger(proj, "list")  # index at the 24 runs
    git(tmp_path, "init", "-q", "--bare", "shared.git")
    git(proj, "remote", "add", "origin", str(tmp_path / "shared.git"))
    assert ledger(proj, "push").returncode in (0, 5)  # 5: no DVC remote for data (none here)
    git(proj, "push", "-q", "origin", "HEAD:refs/heads/main")  # the code the other clone records from
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(tmp_path / "shared.git"), str(other))
    git(other, "fetch", "-q", "origin", "experiments:experiments")
    theirs = _add_runs(other, 40, 4)
    assert ledger(other, "push").returncode in (0, 5)
    pulled = ledger(proj, "pull")
    assert pulled.returncode == 0, pulled.stderr
    listed = {r["id"] for r in json.loads(ledger(proj, "list", "--json").stdout)}
    assert set(theirs) <= listed and len(listed) == 28
    _same_as_cold(proj)


def _damage(root: Path, sql: str, *params: Any) -> None:
    cache = ManifestCache(root / ".git")
    assert cache.db is not None
    with cache.db:
        cache.db.execute(sql.format(**_tables(cache)), params)
    cache.close()


@pytest.mark.parametrize(
    "damage",
    [
        "garbage file",
        "truncated file",
        "damaged run",
        "damaged cells",
        "damaged flags",
        "flags of another type",
        "damaged column",
        "damaged number",
        "damaged rows",
        "lost member",
        "foreign shard",
    ],
)
def test_a_damaged_or_foreign_index_is_a_miss_and_rebuilt(proj: Path, damage: str) -> None:
    ledger(proj, "list", "--where", "lr=1e-06")
    ledger(proj, "list", "--where", "train/loss<0.5")
    ledger(proj, "list", "--json")
    db = proj / ".git" / "ledger" / "manifests.sqlite"
    if damage == "garbage file":
        db.write_bytes(b"not a database at all\n" * 100)
    elif damage == "truncated file":
        db.write_bytes(db.read_bytes()[:5000])
    elif damage == "damaged run":
        _damage(proj, "UPDATE {r} SET fields = ?", b"\xff\x00junk")
    elif damage == "damaged cells":
        _damage(proj, "UPDATE {r} SET cells = ?", b"\x00")
    elif damage == "damaged flags":  # a bit no flag has, beside `archived`: read as is, every run would be hidden
        _damage(proj, "UPDATE {r} SET flags = 64 | 8")
    elif damage == "flags of another type":
        _damage(proj, "UPDATE {r} SET flags = 'x'")
    elif damage == "damaged column":
        _damage(proj, "UPDATE {c} SET val = ? WHERE col = 's:lr'", b"\x00")
    elif damage == "damaged number":  # a metric's last value that is not a number (compared in SQL)
        _damage(proj, "UPDATE {c} SET num = 'x' WHERE col = 'm:train/loss'")
    elif damage == "damaged rows":
        _damage(proj, "UPDATE {x} SET settings = ?", b"")
    elif damage == "lost member":
        _damage(proj, "DELETE FROM {m} WHERE k = (SELECT min(k) FROM {m})")
    else:  # two shards' rows filed under each other's tree ids (their counts swapped too)
        a, b = sorted(s for s, part in _index_rows(proj) if part == "shard")[:2]
        for table in ("m", "s"):
            for old, new in ((a, "swap"), (b, a), ("swap", b)):
                _damage(proj, f"UPDATE {{{table}}} SET shard = ? WHERE shard = ?", new, old)
    _same_as_cold(proj)
    try:
        rows = _index_rows(proj)
    except sqlite3.Error:
        pytest.fail("the damaged file was not replaced")
    repo = Repo(proj)
    tip = repo.branch_tip("experiments")
    assert tip is not None
    runs_tree = repo.tree_entry(tip, "runs")
    assert runs_tree is not None and (runs_tree[0], "tree") in rows


def test_new_runs_go_on_top_of_the_table_kept_before_and_anything_else_makes_it_whole(proj: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After new runs (a new tip as `ledger run` or a pull of newer runs makes it) the default
    table is the one kept for the tree before, their lines on top. A tag, a cell wider than its
    column or a run older than the newest shown make it whole. Either way it is, byte for byte, the
    table the general path prints."""
    made: list[int] = []
    whole = View.table_rows

    def counted(self: View) -> Any:
        made.append(1)
        return whole(self)

    monkeypatch.setattr(View, "table_rows", counted)

    def listed() -> bool:
        """List as the default `ledger list` does, and whether the table was made whole."""
        made.clear()
        table = list_runs(proj).table
        assert table is not None and table == ledger(proj, "list", "-n", "1000000").stdout
        return bool(made)

    assert listed()  # the first listing of a tree: whole
    _add_runs(proj, 24, 2)  # newer, names no wider than "run-23"
    assert not listed()
    (rid,) = _add_runs(proj, 26, 1)
    assert not listed() and list_runs(proj).table.splitlines()[1].startswith(rid)  # type: ignore[union-attr]
    assert ledger(proj, "tag", rid, "best").returncode == 0  # a changed line
    assert listed()
    _add_runs(proj, 100, 1)  # "run-100": a wider NAME column
    assert listed()
    _add_runs(proj, 30, 1, started=lambda _i: "2025-12-31T00:00:00Z")  # older than the newest shown
    assert listed()
    _add_runs(proj, 101, 2)  # new runs without tags under a TAGS column
    assert not listed()
    _same_as_cold(proj)


def test_list_json_streams_and_a_damaged_text_is_an_error_then_read_from_git(proj: Path) -> None:
    """`list --json` writes each run's stored settings as it inflates them (never all at once):
    a damaged one ends it with one line naming the run, exit 1, and the next listing reads that
    run from git and gives what a cold read gives."""
    first = ledger(proj, "list", "--json")
    assert first.returncode == 0, first.stderr
    objects = json.loads(first.stdout)
    assert first.stdout.startswith("[\n{") and first.stdout.endswith("}\n]\n")
    assert all(line.startswith("{") for line in first.stdout.splitlines()[1:-1])  # one object a line
    victim = objects[len(objects) // 2]["id"]
    _damage(proj, "UPDATE {x} SET metrics = ? WHERE k = (SELECT k FROM {r} WHERE id = ?)", b"\x78\x01junk", victim)
    broken = ledger(proj, "list", "--json")
    assert broken.returncode == 1
    assert broken.stderr.count("\n") == 1 and victim in broken.stderr and "Traceback" not in broken.stderr
    again = ledger(proj, "list", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == objects
    _same_as_cold(proj)


def test_a_read_only_listing_writes_nothing_and_lists_what_a_cold_read_does(proj: Path) -> None:
    """`ledger replay --dry-run` promises to write nothing: a listing in `read_only` at a tip the
    index lacks is made in memory, the file left byte for byte as it was."""
    ledger(proj, "list", "--where", "lr=1e-06")
    _add_runs(proj, 30, 3)
    db = proj / ".git" / "ledger" / "manifests.sqlite"
    before = db.read_bytes()
    repo = Repo(proj)
    tip = repo.branch_tip("experiments")
    with read_only():
        listing = load_listing(repo, tip, setting_keys=["lr"])
        shown = {rid: m["settings"]["lr"] for rid, m in listing.manifests.items() if "settings" in m}
    cold = load_listing(repo, tip, with_settings=True, cold=True)
    assert db.read_bytes() == before
    assert listing.manifests.keys() == cold.manifests.keys() and len(shown) == 27
    assert shown == {rid: m["settings"]["lr"] for rid, m in cold.manifests.items()}


def test_a_run_name_is_looked_up_without_loading_every_run(proj: Path) -> None:
    """`show`, `diff`, `compare` and `replay` of named runs cost what they name: the name, an id
    prefix and `NAME~N` are SQL lookups, no run's listing fields but the named one's are read."""
    repo = Repo(proj)
    tip = repo.branch_tip("experiments")
    listing = listing_at(repo, tip)
    third = load_listing(repo, tip, cold=True).ordered()[3]["id"]
    assert resolve(repo, tip, "run-3", listing).id == third
    assert resolve(repo, tip, third[:-1], listing).id == third  # a unique id prefix
    with pytest.raises(LedgerError, match="only 1 run named 'run-3'"):
        resolve(repo, tip, "run-3~1", listing)
    assert listing._manifests is None and listing._entries is None  # nothing loaded whole


def test_runs_started_near_a_time_are_asked_of_the_index_and_none_is_missed(proj: Path) -> None:
    """The replica search's age window (`Listing.started_near`): from the index, only the runs whose
    start time in ledger's own form falls in the window (a second wider), plus every run whose
    start time is in another form; every run `within_age` accepts is among them."""
    from ledger.compare.replicas import within_age

    others = {24: "2026-01-01T00:00:11Z", 25: "2026-01-01 00:00:12+00:00", 26: "2026-01-01T05:00:09+05:00", 27: "garbage"}
    _add_runs(proj, 24, 4, started=others.__getitem__)
    repo = Repo(proj)
    tip = repo.branch_tip("experiments")
    listing = listing_at(repo, tip)
    target = {"started": "2026-01-01T00:00:10.000Z"}
    at = dt.datetime(2026, 1, 1, 0, 0, 10, tzinfo=dt.timezone.utc).timestamp()
    near = listing.started_near([at], 3 / 3600)
    names = [m["name"] for m, _e in near]
    own_form = {f"run-{i}" for i in range(24) if abs(i - 10) <= 4}  # 3 s, and the second more
    assert set(names) == own_form | {f"run-{i}" for i in others}
    assert all(e.id == m["id"] for m, e in near)
    cold = load_listing(repo, tip, cold=True)
    exact = {m["name"] for m in cold.ordered() if within_age(target, m, 3 / 3600)}
    assert exact == {f"run-{i}" for i in range(7, 14)} | {"run-24", "run-25", "run-26"}
    assert exact <= set(names)
    # two windows, and one no datetime can hold: every run
    assert {m["name"] for m, _e in listing.started_near([at, at + 13], 1 / 3600)} >= {"run-10", "run-23", "run-27"}
    assert listing._manifests is None and listing._entries is None  # nothing loaded whole
    assert len(listing.started_near([at], 1e9)) == 28


def test_a_hostile_pulled_summary_is_a_broken_row_in_the_index_too(proj: Path) -> None:
    """Pulled runs are data: the read limits apply to what the index reads (storage/limits.py)."""
    repo = Repo(proj)
    ledger(proj, "list")
    (rid,) = _add_runs(proj, 60, 1)
    tip = repo.branch_tip("experiments")
    assert tip is not None
    path = f"runs/{rid[-4:-2]}/{rid}/summary.json"
    deep: Any = b"[" * 100_000 + b"]" * 100_000
    tree = repo.tree_with_edits(repo.commit_info(tip)[2], {path: (repo.blob(deep), 0o100644)})
    bad = repo.commit(tree, [tip], f"run {rid}\n\nRun-Id: {rid}\n")
    repo.update_ref("refs/heads/experiments", bad, tip, "test")
    listed = ledger(proj, "list")
    assert listed.returncode == 0 and rid in listed.stderr and rid not in listed.stdout
    warm, cold = load_listing(repo, bad), load_listing(repo, bad, cold=True)
    assert warm.broken == cold.broken and rid in warm.broken


def _runs_tree(repo: Repo) -> str:
    tip = repo.branch_tip("experiments")
    assert tip is not None
    found = repo.tree_entry(tip, "runs")
    assert found is not None
    return found[0]


class _Counting(RunReader):
    """The real reader, noting each folder it reads (`folder`) and each run whose settings it reads (`full`)."""

    folders: list[str] = msgspec.field(default_factory=list)
    full_reads: list[str] = msgspec.field(default_factory=list)

    def folder(self, run_id: str, path: str, tree: str) -> RunRow:
        self.folders.append(run_id)
        return super().folder(run_id, path, tree)

    def full(self, e: RunEntry) -> RunRow:
        self.full_reads.append(e.id)
        return super().full(e)


def test_a_first_listing_reads_each_folder_once_and_the_texts_when_asked(proj: Path) -> None:
    """A cold index reads each folder once (its tree, summary.json, settings.json: a run whose
    settings are over a limit is skipped by every listing); the settings and metrics text is
    written the first time a filter or `--json` asks, reading each record once more, then never."""
    repo = Repo(proj)
    cache = ManifestCache(repo.common_dir)
    assert cache.db is not None
    reader = _Counting(repo, cache)
    view = index_view(ListIndex(cache.db, cache.version), repo, _runs_tree(repo), reader)
    assert len(view.fields()) == 24 and len(reader.folders) == 24
    assert view.key_names() == ({"lr", "seed", "flag"}, {"train/loss"}) and reader.full_reads == []
    assert len(view.column("s:lr")) == 24 and len(view.texts()) == 24 and len(view.column("m:train/loss")) == 24
    assert sorted(reader.full_reads) == sorted(reader.folders)  # once each: the texts and columns are kept
    cache.close()


def test_another_code_version_reads_every_folder_again(proj: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The index's tables carry the code version: rows written by other code are never read (a new
    ledger starts a new index; the old tables are dropped)."""
    assert ledger(proj, "list").returncode == 0  # the index, written by this code
    repo = Repo(proj)
    before = ManifestCache(repo.common_dir)
    old = set(_tables(before).values())
    before.close()
    monkeypatch.setattr(manifestcache, "code_version", lambda *modules: "0ther")
    cache = ManifestCache(repo.common_dir)
    assert cache.db is not None and cache.version == "0ther"
    names = {name for (name,) in cache.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not names & old
    reader = _Counting(repo, cache)
    view = index_view(ListIndex(cache.db, cache.version), repo, _runs_tree(repo), reader)
    assert len(reader.folders) == 24 and len(view.fields()) == 24
    again = _Counting(repo, cache)
    index_view(ListIndex(cache.db, cache.version), repo, _runs_tree(repo), again)
    assert again.folders == []  # the same code and tree: every row is the index's
    cache.close()


def _mixed(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """`score` as a setting of several types in some runs, as a summary metric in others, absent in the rest."""
    settings, metrics = _values(i)
    kind = i % 7
    if kind < 4:
        settings["score"] = [1, "3", True, [1, 2]][kind]
    elif kind < 6:
        metrics["score"] = {"last": [2.5, float("inf")][kind - 4], "last_step": 1, "min": 0.0, "min_step": 0, "max": 9.0, "max_step": 1}
    return settings, metrics


@pytest.mark.parametrize(
    "where",
    [
        ("score<2",),
        ("score>=1.5",),
        ("score=3",),
        ("score!=3",),
        ("score=true",),
        ("score=[1, 2]",),
        ("score>1", "train/loss<3"),
        ("lr!=1e-06", "score<=2.5"),
    ],
)
def test_the_index_keeps_what_the_filter_keeps_of_each_run(proj: Path, where: tuple[str, ...]) -> None:
    """A `--where` run by the index (SQL, a number compared in SQL) keeps the runs `RunFilter.keep`
    keeps of each whole run, in the same order: settings of every type, a key that is a setting in
    some runs and a metric in others, an infinite metric."""
    _add_runs(proj, 24, 14, _mixed)
    repo = Repo(proj)
    tip = repo.branch_tip("experiments")
    flt = RunFilter(where=tuple(Where.parse(w) for w in where))
    full = load_listing(repo, tip, with_settings=True)
    expected = [m["id"] for m in full.ordered() if flt.keep(FullRow(fields_of(m), m.get("settings") or {}, m.get("metrics") or {}))]
    assert expected  # each filter keeps some runs
    for _warm in range(2):  # the index made, then read
        assert [row.fields.id for row in list_runs(proj, reverse=True, flt=flt).rows] == expected


def _listing_says(proj: Path, stderr: TextIO, monkeypatch: pytest.MonkeyPatch) -> None:
    """A listing of `proj` in this process, `stderr` its stderr."""
    repo = Repo(proj)
    with monkeypatch.context() as m:
        m.setattr(sys, "stderr", stderr)
        assert len(load_listing(repo, repo.branch_tip("experiments")).manifests) == 24


def test_a_long_cold_read_draws_a_bar_on_a_terminal_and_nothing_in_a_pipe(
    made_proj: Path, tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading many folders into a new index (a fresh clone, a new ledger: seconds at 10,000s of
    runs) draws one progress bar on stderr when it is a terminal, its total the folders read; piped,
    stderr gets nothing; a listing the index answers draws none."""
    monkeypatch.setattr(listindex, "PROGRESS_AT", 10)  # 24 runs here (2,000 in use)
    piped = io.StringIO()
    _listing_says(Path(shutil.copytree(made_proj, tmp_path / "piped", symlinks=True)), piped, monkeypatch)  # no index yet: cold
    assert piped.getvalue() == ""
    proj = Path(shutil.copytree(made_proj, tmp_path / "terminal", symlinks=True))

    def twice(terminal: TextIO) -> None:
        _listing_says(proj, terminal, monkeypatch)  # cold
        _listing_says(proj, terminal, monkeypatch)  # from the index: nothing read, no bar

    shown = drawn_on_a_terminal(twice, columns=200)  # a window's size: tqdm fits the bar to it
    assert shown.count("ledger: reading runs into the listing index:   0%") == 1 and "24/24" in shown, shown
    assert shown.rstrip().endswith("run/s]"), shown  # the bar's own last line: the warm listing drew nothing after it
