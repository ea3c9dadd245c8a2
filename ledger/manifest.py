"""The run manifest, schema version 1 (docs/manifest.md): run ids, where a run lives, how it is stored.

The manifest's shape is `ledger.runrecord` (frozen msgspec Structs, one per section, `RunRecord`);
what is stored is its dict, in a fixed key order so `git diff` between two runs is short.
`new_manifest` makes one with every key present (null where unknown); `check_manifest` validates
one read back from git and refuses newer schema versions.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import os
import re
from collections.abc import Mapping
from typing import Any

from ledger.runrecord import NOT_LEDGERS, SCHEMA, ManifestError, RunRecord, check_manifest
from ledger.timefmt import iso, utc_now

__all__ = ["NOT_LEDGERS", "SCHEMA", "ManifestError", "RunRecord", "check_manifest", "new_manifest", "new_run_id", "run_path", "shard_of"]
RUN_ID_RE = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{4}$")


def new_run_id(now: dt.datetime | None = None) -> str:
    """`<UTC yyyymmdd-HHMMSS>-<4 hex>` (the hex from `os.urandom`, as `secrets.token_hex` takes it)."""
    now = now or utc_now()
    return f"{now.strftime('%Y%m%d-%H%M%S')}-{os.urandom(2).hex()}"


def shard_of(run_id: str) -> str:
    """The folder under runs/ that holds a run: the first two of its four hex digits."""
    return run_id[-4:-2]


def run_path(run_id: str) -> str:
    return f"runs/{shard_of(run_id)}/{run_id}"


def new_manifest(run_id: str, started: dt.datetime) -> dict[str, Any]:
    """A manifest with every key present, unknowns null (the shape is `ledger.runrecord`'s)."""
    return RunRecord.new(run_id, iso(started)).to_dict()


def status_line(exit_code: int | None, signal_name: str | None, duration: float, finished: str | None) -> str:
    """The one-line `status` file."""
    code = "-" if exit_code is None else str(exit_code)
    return f"exit={code} signal={signal_name or '-'} duration={duration:.3f} finished={finished}\n"


def duration_text(seconds: float) -> str:
    """1.5s, 2m05s, 1h02m05s: how commit messages, stderr and `ledger list` show a duration."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _readable(value: Any, path: str, raw: dict[str, str] | None) -> Any:
    """`value` with each string holding surrogate escapes as readable UTF-8 (U+FFFD in place of
    the bad bytes); its exact bytes go to `raw` (key path -> base64) when given."""
    if isinstance(value, str) and _has_surrogates(value):
        data = value.encode("utf-8", "surrogateescape")
        if raw is not None:
            raw[path] = base64.b64encode(data).decode("ascii")
        return data.decode("utf-8", "replace")
    if isinstance(value, dict):
        return {
            _readable(k, f"{path}.<key>", raw) if isinstance(k, str) else k: _readable(v, f"{path}.{k}" if path else str(k), raw)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_readable(v, f"{path}.{i}", raw) for i, v in enumerate(value)]
    return value


def readable(value: Any) -> Any:
    """`value` (a name, the settings) as `storable` writes it: valid UTF-8 text, U+FFFD where a
    byte was not (the commit message, settings.json)."""
    return _readable(value, "", None)


def storable(m: Mapping[str, object]) -> dict[str, object]:
    """The manifest as valid UTF-8 text, losslessly.

    Bytes that are not UTF-8 (in argv, `--name`, `--note`, the environment) arrive as Python's
    surrogate escapes. Each such string is stored readable, with U+FFFD in place of the bad
    bytes, and its exact bytes go to `raw_bytes` (key path -> base64) for `original` to restore.
    """
    raw: dict[str, str] = {}
    out: dict[str, object] = _readable({k: v for k, v in m.items() if k != "raw_bytes"}, "", raw)
    if raw:
        out["raw_bytes"] = raw
    return out


def original(m: dict[str, Any]) -> dict[str, Any]:
    """The manifest with the exact bytes of `raw_bytes` put back (as surrogate-escaped strings)."""
    raw = m.get("raw_bytes") or {}
    if not raw:
        return m
    out = copy.deepcopy({k: v for k, v in m.items() if k != "raw_bytes"})
    for path, b64 in raw.items():
        parts = path.split(".")
        node: Any = out
        try:
            for part in parts[:-1]:
                node = node[int(part)] if isinstance(node, list) else node[part]
            key: Any = int(parts[-1]) if isinstance(node, list) else parts[-1]
            node[key] = base64.b64decode(b64).decode("utf-8", "surrogateescape")
        except (KeyError, IndexError, ValueError, TypeError):
            continue  # a path this version does not know: the readable text stays
    return out
