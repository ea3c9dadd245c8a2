"""A cold listing index read by forked readers holds exactly what one read in this process holds:
the same rows, broken rows included, the same settings and metrics texts, and an old
manifest-only record read by the parent."""

from __future__ import annotations

import marshal
import multiprocessing
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import ledger, make_repo
from test_listindex import _add_runs, _Counting, _runs_tree

from ledger.storage import coldread
from ledger.storage.git import Repo
from ledger.storage.listindex import ListIndex
from ledger.storage.listing import ManifestCache
from ledger.storage.listtables import create_tables, table_names, unpack_json
from ledger.storage.listview import index_view


def _rewrite(repo: Repo, edits: dict[str, Any]) -> None:
    tip = repo.branch_tip("experiments")
    assert tip is not None
    tree = repo.tree_with_edits(repo.commit_info(tip)[2], edits)
    repo.update_ref("refs/heads/experiments", repo.commit(tree, [tip], "edit runs\n"), tip, "test")


@pytest.fixture
def proj(tmp_path: Path, isolated_home: Path) -> tuple[Path, list[str]]:
    """30 runs: one with a summary.json nested past the depth limit (a broken row), one with a
    folder where a file belongs (broken at the door), one written before summary.json and
    settings.json were (its manifest.yaml read through the manifest cache)."""
    root = make_repo(tmp_path / "proj", {"README.md": "x\n"})
    assert ledger(root, "init").returncode == 0
    ids = _add_runs(root, 0, 30)
    repo = Repo(root)
    folder = {rid: f"runs/{rid[-4:-2]}/{rid}" for rid in ids}
    deep = repo.blob(b"[" * 100_000 + b"]" * 100_000)
    sub = repo.tree_with_edits(None, {"x": (repo.blob(b"x"), 0o100644)})
    _rewrite(
        repo,
        {
            f"{folder[ids[3]]}/summary.json": (deep, 0o100644),
            f"{folder[ids[7]]}/settings.json": (sub, 0o040000),
            f"{folder[ids[11]]}/summary.json": None,
            f"{folder[ids[11]]}/settings.json": None,
        },
    )
    return root, [ids[3], ids[7], ids[11]]


def _built(root: Path, readers: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple[Any, ...]], list[str]]:
    """The index's run rows (their name sets spelled out), made from nothing with `readers`
    readers, and the folders this process read itself."""
    monkeypatch.setattr(coldread, "PARALLEL_AT", 1 if readers > 1 else 10**9)
    monkeypatch.setattr(coldread, "cpus", lambda: readers)
    repo = Repo(root)
    cache = ManifestCache(repo.common_dir)
    db = sqlite3.connect(":memory:")
    create_tables(db, cache.version)
    reader = _Counting(repo, cache)
    view = index_view(ListIndex(db, cache.version), repo, _runs_tree(repo), reader)
    texts_read = view.texts()  # every readable run's settings and metrics text, read again
    t = table_names(cache.version)
    rows = db.execute(
        f"SELECT r.k, r.id, r.tree, r.entry, r.broken, r.started, r.name, r.archived, s.keys, m.keys, r.fields, r.cells, r.shown"
        f" FROM {t['r']} r LEFT JOIN {t['k']} s ON s.ks = r.sk LEFT JOIN {t['k']} m ON m.ks = r.mk ORDER BY r.k"
    ).fetchall()
    rows = [
        tuple(_loaded(v) if i in (3, 8, 9, 10, 11, 12) else v for i, v in enumerate(r)) for r in rows
    ]  # marshal's bytes vary with refcounts
    members = db.execute(f"SELECT shard, k FROM {t['m']} ORDER BY shard, k").fetchall()
    shards = [(s, n) for s, n, _sk, _mk in db.execute(f"SELECT * FROM {t['s']} ORDER BY shard")]
    texts = [(k, unpack_json(st), unpack_json(mt)) for k, st, mt in db.execute(f"SELECT * FROM {t['x']} ORDER BY k")]
    cache.close()
    assert len(texts) == 28 and sorted(texts_read.values()) == sorted((st, mt) for _k, st, mt in texts)
    return [*rows, *members, *shards, *texts, texts_read], [*reader.folders, *reader.full_reads]


def _loaded(blob: bytes | None) -> Any:
    return None if blob is None else marshal.loads(blob)


def test_forked_readers_index_what_one_process_indexes(proj: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    root, (deep, not_a_file, old) = proj
    one, read_here = _built(root, 1, monkeypatch)
    shared, read_by_parent = _built(root, 2, monkeypatch)
    assert shared == one
    assert len(read_here) == 30 + 28 and read_by_parent == [old, old]  # the forked readers read the rest, twice
    runs = {r[1]: r for r in one[:30]}
    assert {rid for rid, r in runs.items() if r[4] is not None} == {deep, not_a_file}  # broken: no fields, no name sets
    assert runs[deep][8] is None and runs[deep][10] is None
    assert runs[old][4] is None and runs[old][10] is not None  # the old record read, through the manifest cache


def _signals_here() -> tuple[Any, Any]:
    return signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)


def test_a_reader_takes_back_the_default_sigterm_its_parent_set_aside(proj: tuple[Path, list[str]]) -> None:
    """A parent with a SIGTERM handler of its own (the UI server, a test runner) forks readers that
    would inherit it, and the pool's terminate ends a busy reader by SIGTERM: each reader takes the
    default action back as it starts, and leaves Ctrl-C to its parent."""
    root, _broken = proj
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        with multiprocessing.get_context("fork").Pool(1, initializer=coldread._open, initargs=(str(root),)) as pool:
            term, intr = pool.apply(_signals_here)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert (term, intr) == (signal.SIG_DFL, signal.SIG_IGN)
