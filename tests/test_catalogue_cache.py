"""The provider catalogue is derived from detect-secrets once per user and version, then read as
data (importing the plugins costs ~0.5 s of every `ledger run`'s start otherwise)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.redact import catalogue as cat


@pytest.fixture()
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cat.catalogue.cache_clear()
    yield tmp_path / "cache"
    cat.catalogue.cache_clear()


def test_the_cached_catalogue_is_the_derived_one(fresh: Path) -> None:
    first = cat.catalogue()
    files = list((fresh / "ledger" / "catalogue").glob("*.json"))
    assert len(files) == 1 and files[0].name.startswith(cat._installed_key() + "-")
    assert json.loads(files[0].read_text()) == cat._entries()
    cat.catalogue.cache_clear()
    again = cat.catalogue()
    assert [(r.plugin, r.source, r.flags, r.needs, r.candidates) for r in again] == [
        (r.plugin, r.source, r.flags, r.needs, r.candidates) for r in first
    ]
    stripe = next(r for r in again if "stripe" in r.kind)
    assert stripe.spans(b"key sk_live_" + b"4eC39HqLyjWDarjtT1zdp7dc" + b" end")


def test_a_damaged_cache_is_only_a_miss(fresh: Path) -> None:
    cat.catalogue()
    (path,) = (fresh / "ledger" / "catalogue").glob("*.json")
    path.write_text("{not json")
    cat.catalogue.cache_clear()
    assert len(cat.catalogue()) == len(cat._entries()) > 20
    assert json.loads(path.read_text()) == cat._entries()
