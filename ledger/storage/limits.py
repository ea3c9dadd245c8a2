"""How much of a run record ledger reads: pulled records are someone else's input.

A record ledger wrote is a few kilobytes of JSON and YAML nesting about six levels deep. One
crafted run must not stop every command of the team (a 200,000-deep `summary.json` overflowed the
parser's recursion, a huge one exhausted memory; a run of 400,000 settings under the size limit
made every `ledger diff` take 20 s and `ledger log` 27 s): each file is read only up to a
size, its nesting is checked without recursion before anything walks it, and what a run holds is
counted (settings, metric names, steps, files), far above what real runs hold. A run that fails is
skipped by the verbs that list runs with a one-line warning (`Listing.broken`); every other run keeps
working, and a verb that names it refuses it in one line (docs/trust.md).

`counting()` is how tests see the cost: how many settings and metric steps were decoded, per file.
"""

from __future__ import annotations

import contextvars
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ledger.manifest import ManifestError
from ledger.storage.git import MODE_TREE, Repo

MAX_JSON_BYTES = 8 << 20  # summary.json is ~1 KB, settings.json ~10 KB with 150+ settings
MAX_DEPTH = 64
# counts, each far above a real Miles run's (docs/trust.md)
MAX_SETTINGS = 10_000  # settings of a run (settings.json, the manifest's): real runs have ~150-300
MAX_METRICS = 10_000  # metric names of a run (summary.json, metrics.jsonl): real runs log a few hundred
MAX_STEPS = 1_000_000  # step lines of metrics.jsonl: real runs log up to ~100,000 steps
MAX_FILES = 10_000  # files and folders in a run folder, every level: a real one holds ~10-30
MAX_METRICS_BYTES = 1 << 30  # metrics.jsonl: ~1-3 KB a step, ~300 MB at 100,000 steps

NOT_OURS = "the record is not one ledger wrote"

_COUNTS: contextvars.ContextVar[Counter[str] | None] = contextvars.ContextVar("ledger_decoded", default=None)


@contextmanager
def counting() -> Iterator[Counter[str]]:
    """Within this block, how many entries were decoded per record file (`runs/<xx>/<id>/settings.json`:
    settings, `.../metrics.jsonl`: step lines): the hook that shows a verb's cost follows what it shows."""
    counts: Counter[str] = Counter()
    token = _COUNTS.set(counts)
    try:
        yield counts
    finally:
        _COUNTS.reset(token)


def decoded(where: str, entries: int) -> None:
    """Note `entries` decoded from the record file `where` (seen only inside `counting()`)."""
    counts = _COUNTS.get()
    if counts is not None:
        counts[where] += entries


def over_limit(where: str, limit: int, what: str) -> ManifestError:
    """The one refusal of a record holding too many of something."""
    return ManifestError(f"{where} holds more than {limit:,} {what} (the most ledger reads)", NOT_OURS)


def check_count(count: int, limit: int, where: str, what: str) -> None:
    """Refuse (ManifestError) a record file `where` holding more than `limit` of `what`."""
    if count > limit:
        raise over_limit(where, limit, what)


def check_size(size: int, limit: int, where: str) -> None:
    """Refuse (ManifestError) a record file `where` of more than `limit` bytes."""
    if size > limit:
        raise ManifestError(f"{where} is {size} bytes, more than ledger reads ({limit})", NOT_OURS)


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
            raise ManifestError(f"{where} nests deeper than {limit} levels", NOT_OURS)
        stack.extend((c, depth + 1) for c in children)
    return data


def load_json(raw: bytes, where: str) -> Any:
    """A record's JSON file, refused (ManifestError) when too big, too deep or not JSON."""
    check_size(len(raw), MAX_JSON_BYTES, where)
    try:
        data = json.loads(raw)  # its C scanner raises RecursionError on a deep nest, never crashes
    except RecursionError as exc:
        raise ManifestError(f"{where} nests deeper than {MAX_DEPTH} levels", NOT_OURS) from exc
    except ValueError as exc:
        raise ManifestError(f"{where} is not valid JSON ({str(exc)[:200]})", "the record is corrupt") from exc
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:  # cannot nest deeper: skip the walk
        return data
    return check_depth(data, where)


def load_settings(raw: bytes, where: str) -> dict[str, Any]:
    """A run's settings.json: a JSON object of at most MAX_SETTINGS entries, refused without
    decoding more than MAX_SETTINGS + 1 of them."""
    if len(raw) <= MAX_JSON_BYTES and raw.count(b":") > MAX_SETTINGS:  # every entry has a colon: it may hold too many
        seen = _entries_upto(raw.decode("utf-8", "replace"), MAX_SETTINGS + 1)
        if seen > MAX_SETTINGS:
            decoded(where, seen)
            raise over_limit(where, MAX_SETTINGS, "settings")
    data = load_json(raw, where)
    if not isinstance(data, dict):
        raise ManifestError(f"{where} is not a JSON object of settings", NOT_OURS)
    decoded(where, len(data))
    return data


_SPACE = " \t\n\r"


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def _entries_upto(text: str, stop: int) -> int:
    """How many entries the JSON object `text` holds, counting (and decoding) no further than `stop`.

    Text that is not a JSON object counts what was read before the fault: `load_json` then says
    what is wrong with it."""
    decoder = json.JSONDecoder()
    i = _skip(text, 0)
    if text[i : i + 1] != "{":
        return 0
    count, i = 0, _skip(text, i + 1)
    try:
        while count < stop and text[i : i + 1] == '"':
            _key, i = decoder.raw_decode(text, i)
            i = _skip(text, i)
            if text[i : i + 1] != ":":
                break
            _value, i = decoder.raw_decode(text, _skip(text, i + 1))
            count += 1
            i = _skip(text, i)
            if text[i : i + 1] != ",":
                break
            i = _skip(text, i + 1)
    except (ValueError, RecursionError):
        pass
    return count


def check_files(repo: Repo, tree: str, where: str) -> None:
    """Refuse a run folder holding more than MAX_FILES files and folders, every level counted; a
    tree's entries are looked at only while the count stays under the limit."""
    count, pending = 0, [tree]
    while pending:
        oid = pending.pop()
        count += repo.tree_size(oid)
        check_count(count, MAX_FILES, where, "files and folders")
        pending.extend(sub for _name, sub, mode in repo.list_tree(oid) if mode == MODE_TREE)
