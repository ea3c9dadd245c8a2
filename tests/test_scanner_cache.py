"""The rules' Hyperscan database kept in the per-user cache is only a cache: a damaged entry, one
made for other patterns or another platform is a miss (compiled again, the same matches); another
pattern set is another entry; a run's known values are never written there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.redact import scanner

hyperscan = pytest.importorskip("hyperscan", reason="the Hyperscan wheel is not installed here")

RULES = [(rb"ghp_[A-Za-z0-9]{36}", False), (rb"xox[bp]-[0-9]{6,}", True)]
OTHER = [(rb"AKIA[0-9A-Z]{16}", False)]
TEXT = b"token ghp_" + b"a" * 36 + b" and XOXB-1234567 and AKIA" + b"B" * 16 + b"\n"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    saved = dict(scanner._COMPILED)
    scanner._COMPILED.clear()  # a new process: nothing compiled yet
    yield tmp_path / "ledger" / "hyperscan"
    scanner._COMPILED.clear()
    scanner._COMPILED.update(saved)


def _ends(patterns: list[tuple[bytes, bool]]) -> list[int]:
    scanner._COMPILED.clear()
    db = scanner._database(hyperscan, patterns, persist=True)
    found: list[int] = []
    db.scan(TEXT, match_event_handler=lambda _i, _s, end, _f, _c: found.append(end))
    return sorted(found)


def test_an_entry_is_written_once_and_read_by_the_next_process(cache: Path) -> None:
    want = _ends(RULES)
    assert len(want) >= 2
    (entry,) = cache.iterdir()
    written = entry.read_bytes()
    assert _ends(RULES) == want and entry.read_bytes() == written
    assert scanner._load_db_file(hyperscan, RULES) == written[32:]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "foreign", "empty"])
def test_a_damaged_or_foreign_entry_is_a_miss(cache: Path, damage: str) -> None:
    want = _ends(RULES)
    entry = scanner._db_file(hyperscan, RULES)
    _ends(OTHER)
    other = scanner._db_file(hyperscan, OTHER)
    assert other != entry  # another pattern set: another entry
    good = entry.read_bytes()
    bad = {
        "garbage": b"\0" * 32 + b"not a database",
        "truncated": good[: len(good) // 2],
        "foreign": other.read_bytes(),  # a valid database, of other patterns, under this name
        "empty": b"",
    }[damage]
    entry.write_bytes(bad)
    assert scanner._load_db_file(hyperscan, RULES) is None
    assert _ends(RULES) == want  # compiled again: the same matches
    assert entry.read_bytes() == good  # and the entry written anew


def test_a_runs_known_values_are_never_written_to_the_cache(cache: Path) -> None:
    known = "s3cr3t-value-of-this-run-only"
    redactor = scanner.Redactor([known])
    block = f"the value {known} printed\n".encode() * 50
    assert known.encode() not in redactor.redact_lines(block)
    assert redactor.engine == "hyperscan"
    written = b"".join(p.read_bytes() for p in cache.rglob("*") if p.is_file())
    assert written and known.encode() not in written
