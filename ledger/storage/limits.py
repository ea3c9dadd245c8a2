"""How much of a run record ledger reads: pulled records are someone else's input.

A record ledger wrote is a few kilobytes of JSON and YAML nesting about six levels deep. One
crafted run must not stop every command of the team (a 200,000-deep `summary.json` overflowed the
parser's recursion, a huge one exhausted memory): each file is read only up to a size, and its
nesting is checked without recursion before anything walks it. A run that fails is skipped by
`ledger list` with a one-line warning (`Listing.broken`); every other run keeps working.
"""

from __future__ import annotations

import json
from typing import Any

from ledger.manifest import ManifestError

MAX_JSON_BYTES = 8 << 20  # summary.json is ~1 KB, settings.json ~10 KB with 150+ settings
MAX_DEPTH = 64


def check_depth(data: Any, where: str, limit: int = MAX_DEPTH) -> Any:
    """`data` itself, once it is known to nest no deeper than `limit` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise ManifestError(f"{where} nests deeper than {limit} levels", "the record is not one ledger wrote")
        stack.extend((c, depth + 1) for c in children)
    return data


def load_json(raw: bytes, where: str) -> Any:
    """A record's JSON file, refused (ManifestError) when too big, too deep or not JSON."""
    if len(raw) > MAX_JSON_BYTES:
        raise ManifestError(f"{where} is {len(raw)} bytes, more than ledger reads ({MAX_JSON_BYTES})", "the record is not one ledger wrote")
    try:
        data = json.loads(raw)  # its C scanner raises RecursionError on a deep nest, never crashes
    except RecursionError as exc:
        raise ManifestError(f"{where} nests deeper than {MAX_DEPTH} levels", "the record is not one ledger wrote") from exc
    except ValueError as exc:
        raise ManifestError(f"{where} is not valid JSON ({str(exc)[:200]})", "the record is corrupt") from exc
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:  # cannot nest deeper: skip the walk
        return data
    return check_depth(data, where)
