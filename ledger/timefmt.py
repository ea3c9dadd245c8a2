"""The one ISO-8601 time format of ledger: UTC, a `Z`, milliseconds (`2026-11-29T11:13:54.123Z`).

Every manifest time, heat-log time and comparison window goes through these two functions, so a
time written by one part is always read the same way by another. A time without a zone is UTC
(all times ledger writes carry the `Z`; a hand-edited one without it means what it says in UTC).
"""

from __future__ import annotations

import datetime as dt


def utc_now() -> dt.datetime:
    """The current time as an aware UTC datetime."""
    return dt.datetime.now(dt.timezone.utc)


def iso(t: dt.datetime | float | None) -> str | None:
    """Unix seconds or a datetime -> `YYYY-MM-DDTHH:MM:SS.mmmZ` (rounded to the millisecond)."""
    if t is None:
        return None
    if isinstance(t, dt.datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=dt.timezone.utc)
        t = t.timestamp()
    ms = round(t * 1000)
    whole = dt.datetime.fromtimestamp(ms // 1000, tz=dt.timezone.utc)
    return whole.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def parse_iso(text: object, strict: bool = False) -> float | None:
    """An ISO-8601 time -> unix seconds; a naive time is UTC.

    Lenient by default (None for empty or malformed text); with `strict`, malformed text raises
    ValueError, for readers of files ledger wrote itself, where a bad time means a damaged file.
    """
    if not text:
        if strict:
            raise ValueError("empty time")
        return None
    try:
        parsed = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        if strict:
            raise ValueError(f"not an ISO time: {text!r}") from None
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return parsed.timestamp()
