"""The local cache: an entry made by other code is a miss (ledger/cache.py's code versions)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ledger.cache import LocalCache, code_version


def test_an_entry_made_by_other_code_is_a_miss(tmp_path: Path) -> None:
    made = LocalCache.at(tmp_path, code=("ledger.cache",))
    made.write_json("k", {"x": 1})
    assert made.read_json("k") == {"x": 1}
    assert LocalCache.at(tmp_path, code=("ledger.textfmt",)).read_json("k") is None
    assert LocalCache.at(tmp_path, code=("ledger.cache",)).read_json("k") == {"x": 1}


def test_the_version_follows_the_source_without_importing_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "producer_of_entries.py"
    module.write_text("raise SystemExit('imported')\n")  # reading it must not run it
    monkeypatch.syspath_prepend(str(tmp_path))
    before = code_version.__wrapped__("producer_of_entries")
    module.write_text("raise SystemExit('imported, changed')\n")
    assert code_version.__wrapped__("producer_of_entries") != before
    assert "producer_of_entries" not in sys.modules


def test_the_manifest_cache_keeps_one_table_for_this_parsing_code(tmp_path: Path) -> None:
    import sqlite3

    from ledger.storage.listing import ManifestCache

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
    version = code_version(
        "ledger.storage.listing",
        "ledger.yamlio",
        "ledger.storage.listindex",
        "ledger.storage.runmeta",
        "ledger.storage.limits",
        "ledger.storage.summary",
        "ledger.storage.store",
    )
    assert sorted(name for (name,) in tables) == [f"m_{version}", f"x_{version}"]  # the manifests, the listing index
