"""The local cache: an entry made by other code is a miss (ledger/cache.py's code versions)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import ledger
from ledger.cache import LocalCache, code_version, tree_version


def test_an_entry_made_by_other_code_is_a_miss(tmp_path: Path) -> None:
    made = LocalCache.at(tmp_path)
    made.write_json("k", {"x": 1})
    assert made.read_json("k") == {"x": 1} and made.version == code_version()
    other = LocalCache.at(tmp_path)
    other.version = "0123456789ab"  # what another ledger's code hashes to
    assert other.read_json("k") is None
    other.write_json("k", {"x": 2})
    assert LocalCache.at(tmp_path).read_json("k") == {"x": 1}


def test_the_version_covers_every_file_of_the_package(tmp_path: Path) -> None:
    """Any module, a data file in a subpackage, a new file: each is a new version; bytecode is not."""
    root = tmp_path / "pkg"
    (root / "sub" / "__pycache__").mkdir(parents=True)
    (root / "a.py").write_text("x = 1\n")
    (root / "sub" / "rules.json").write_text("[]\n")
    seen = {tree_version(root)}
    (root / "sub" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert tree_version(root) in seen
    for change in (
        lambda: (root / "a.py").write_text("x = 2\n"),
        lambda: (root / "sub" / "rules.json").write_text('["new rule"]\n'),
        lambda: (root / "sub" / "b.py").write_text(""),
        lambda: (root / "sub" / "b.py").rename(root / "sub" / "c.py"),
    ):
        change()
        assert tree_version(root) not in seen
        seen.add(tree_version(root))
    assert code_version() == tree_version(Path(ledger.__file__).parent)


def test_the_kept_version_is_used_only_for_the_very_files_it_was_hashed_from(tmp_path: Path) -> None:
    """The memo is keyed by each file's name, size, mtime and inode: a rewrite of the same size, a
    new file or a damaged memo entry each give the version of what is there now; nothing is kept
    for a file written just now (its mtime could be its next write's)."""
    root, memo = tmp_path / "pkg", tmp_path / "memo"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    first = tree_version(root, memo=memo)
    assert first == tree_version(root) and not memo.exists()  # too young to be kept
    hour_ago = time.time() - 3600
    os.utime(root / "a.py", (hour_ago, hour_ago))
    assert tree_version(root, memo=memo) == first and len(list(memo.iterdir())) == 1
    (root / "a.py").write_text("x = 2\n")  # the same size
    assert tree_version(root, memo=memo) == tree_version(root) != first
    os.utime(root / "a.py", (hour_ago, hour_ago))
    (root / "b.py").write_text("")
    os.utime(root / "b.py", (hour_ago, hour_ago))
    assert tree_version(root, memo=memo) == tree_version(root)
    for entry in memo.iterdir():
        entry.write_text("not a version")
    assert tree_version(root, memo=memo) == tree_version(root)


def test_the_manifest_cache_keeps_one_table_for_this_parsing_code(tmp_path: Path) -> None:
    import sqlite3

    from ledger.storage.listindex import table_names
    from ledger.storage.listing import ManifestCache
    from ledger.storage.manifestcache import LISTING_CODE

    (tmp_path / "ledger").mkdir()
    old = sqlite3.connect(tmp_path / "ledger" / "manifests.sqlite")
    old.execute("CREATE TABLE m (blob TEXT PRIMARY KEY, json TEXT)")  # what an older ledger wrote
    old.execute("INSERT INTO m VALUES ('a', '{\"parsed\": \"by old code\"}')")
    old.commit()
    old.close()
    cache = ManifestCache(tmp_path)
    assert cache.get_many(["a"]) == {}  # was: the old parse
    cache.put_many({"a": {"parsed": "now"}})
    assert ManifestCache(tmp_path).get_many(["a"]) == {"a": {"parsed": "now"}}
    tables = sqlite3.connect(tmp_path / "ledger" / "manifests.sqlite").execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    version = code_version(*LISTING_CODE)
    index = sorted(table_names(version).values())  # the listing index's tables
    assert sorted(name for (name,) in tables) == [f"m_{version}", *index]  # the manifests, the listing index
