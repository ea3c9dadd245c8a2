"""The one ISO-time format: manifests, heat logs and diff windows read each other's times."""

from __future__ import annotations

import datetime as dt

import pytest

from ledger.timefmt import iso, parse_iso

T0 = 1_795_000_000.0  # 2026-11-18


def test_iso_rounds_to_the_millisecond_with_a_z() -> None:
    assert iso(0.0) == "1970-01-01T00:00:00.000Z"
    assert iso(1.9996) == "1970-01-01T00:00:02.000Z"
    stamp = iso(T0 + 0.123)
    assert stamp is not None and stamp.endswith(".123Z")
    assert parse_iso(stamp) == pytest.approx(T0 + 0.123, abs=1e-6)


def test_datetime_and_float_give_the_same_text() -> None:
    aware = dt.datetime.fromtimestamp(T0, dt.timezone.utc)
    assert iso(aware) == iso(T0)
    assert iso(aware.astimezone(dt.timezone(dt.timedelta(hours=5)))) == iso(T0)
    assert iso(aware.replace(tzinfo=None)) == iso(T0)  # naive datetimes are UTC


def test_a_time_without_zone_is_utc() -> None:
    # the heat log and the diff windows used to disagree here: one refused, one read it as UTC
    assert parse_iso("2026-11-29T11:13:54.123") == parse_iso("2026-11-29T11:13:54.123Z")
    assert parse_iso("2026-11-29T12:13:54+01:00") == parse_iso("2026-11-29T11:13:54Z")


def test_malformed_times() -> None:
    assert parse_iso("yesterday") is None
    assert parse_iso(None) is None
    with pytest.raises(ValueError):
        parse_iso("yesterday", strict=True)
    with pytest.raises(ValueError):
        parse_iso("", strict=True)
